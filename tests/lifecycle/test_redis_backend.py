"""The redis-server backend's decisions (lifecycle/redis_backend.py): the instance a provider's config gives (sizes,
Guaranteed, maxmemory below the limit, bring-your-own address), a claim's deterministic user, prefix and Secret, and
what the claim's status says."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from lifecycle import redis_backend as core
from lifecycle.binding import Binding, bind, status_of, waiting_reason
from lifecycle.conditions import Condition

NS = "apprafter-redis"


def provider(name: str = "redis-integrated", **config: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"type": "redis", "backend": "redis-server",
                                                 **({"config": config} if config else {})}}


def claim(namespace: str = "shop", name: str = "cart-redis", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ResourceClaim",
            "metadata": {"namespace": namespace, "name": name, "uid": "0a1b", "labels": labels},
            "spec": {"type": "redis", "selector": {}}}


def test_the_default_instance_is_the_services_dns_name_with_the_default_sizes() -> None:
    instance = core.instance_of(provider(), NS)
    assert isinstance(instance, core.Instance)
    assert (instance.host, instance.port, instance.integrated) == ("redis-integrated.apprafter-redis.svc", 6379, True)
    assert (instance.memory, instance.cpu) == (core.DEFAULTS["resources.memory"], core.DEFAULTS["resources.cpu"])
    assert instance.max_memory == 192 * 2**20  # 256Mi less a quarter


def test_the_shipped_providers_config_names_the_server_its_namespace_and_sizes() -> None:
    shipped = provider(server="platform-redis", namespace="apprafter-redis",
                       resources={"cpu": "1", "memory": "4Gi"}, maxmemoryPercent=75)
    instance = core.instance_of(shipped, "elsewhere")
    assert isinstance(instance, core.Instance)
    assert (instance.provider, instance.name, instance.namespace, instance.host) == (
        "redis-integrated", "platform-redis", "apprafter-redis", "platform-redis.apprafter-redis.svc")
    assert (instance.cpu, instance.memory, instance.max_memory, instance.admin_secret) == (
        "1", "4Gi", 3 * 2**30, "platform-redis-admin")


@pytest.mark.parametrize(("memory", "percent", "max_memory"), [
    ("64Mi", 75, 32 * 2**20), ("128Mi", 75, 96 * 2**20), ("1Gi", 75, 768 * 2**20), ("1G", 75, 750_000_000),
    ("1Gi", 90, 2**30 * 90 // 100), ("64Mi", 90, 32 * 2**20), ("1Gi", 10, 2**30 // 10)])
def test_maxmemory_is_the_share_asked_and_at_least_32Mi_below_the_limit(memory: str, percent: int,
                                                                         max_memory: int) -> None:
    instance = core.instance_of(provider(resources={"memory": memory}, maxmemoryPercent=percent), NS)
    assert isinstance(instance, core.Instance) and instance.max_memory == max_memory


def test_the_instance_is_guaranteed_and_runs_redis_server_with_maxmemory_below_its_limit() -> None:
    instance = core.instance_of(provider(resources={"memory": "512Mi", "cpu": "500m"}), NS)
    assert isinstance(instance, core.Instance)
    deployment, service = core.instance_objects(instance, "ghcr.io/apprafter/redis:0.1.0")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": "500m",
                                                                                      "memory": "512Mi"}
    args = container["args"]
    assert args[args.index("--maxmemory") + 1] == str(384 * 2**20)
    assert args[args.index("--requirepass") + 1] == "$(ADMIN_PASSWORD)"  # from the admin Secret, never literal
    assert container["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "redis-integrated-admin", "key": "password"}
    assert (deployment["metadata"]["namespace"], service["metadata"]["name"]) == (NS, "redis-integrated")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_bring_your_own_redis_by_address_and_a_config_that_does_not_hold() -> None:
    own = core.instance_of(provider("ours", address="10.0.0.7:6380"), NS)
    assert isinstance(own, core.Instance) and (own.host, own.port, own.integrated) == ("10.0.0.7", 6380, False)
    v6 = core.instance_of(provider("ours", address="[fd00::7]:6379"), NS)
    assert isinstance(v6, core.Instance) and v6.host == "fd00::7"
    assert core.instance_of(provider("ours", resources={"memory": "32Mi", "cpu": "lots"}, maxmemoryPercent=95,
                                     address="nowhere"), NS) == [
        "spec.config.resources.memory: '32Mi' is not a memory quantity of at least 64Mi",
        "spec.config.resources.cpu: 'lots' is not a CPU quantity (250m, 1, 1.5)",
        "spec.config.maxmemoryPercent: 95 is not a whole percentage from 10 to 90",
        "spec.config.address: 'nowhere' is not host:port"]
    assert core.instance_of(provider("Bad.Name"), NS) == [
        "spec.config.server: 'Bad.Name' is not a DNS label (a-z0-9-, 63 at most)"]


def test_a_claims_user_prefix_and_secret_are_its_namespace_and_name() -> None:
    account = core.account_of(claim())
    assert account == core.Account("shop.cart-redis", "shop.cart-redis:")
    assert core.account_of(claim("shop", "cart-redis")) == account  # the same app and need: the same keys
    assert core.connection_secret_of(claim(**{"app.kubernetes.io/name": "cart"})) == "cart-redis-conn"
    assert core.connection_secret_of(claim()) == "cart-redis-conn"
    rules = core.acl_rules(account, "pw")
    assert rules[:5] == ["reset", "on", ">pw", "~shop.cart-redis:*", "&shop.cart-redis:*"]
    assert "-@dangerous" in rules and "-@admin" in rules


def test_the_connection_secret_holds_every_field_and_is_owned_by_the_claim() -> None:
    instance = core.instance_of(provider(), NS)
    assert isinstance(instance, core.Instance)
    account = core.account_of(claim())
    secret = core.connection_secret_object(claim(), instance, account, "pw")
    fields = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert fields == {"url": "redis://shop.cart-redis:pw@redis-integrated.apprafter-redis.svc:6379/0",
                      "host": "redis-integrated.apprafter-redis.svc", "port": "6379", "user": "shop.cart-redis",
                      "password": "pw", "prefix": "shop.cart-redis:"}
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "0a1b"
    assert core.password_in(secret, account) == "pw"
    assert core.password_in(secret, core.Account("other.x", "other.x:")) is None
    assert core.password_in(None, account) is None


def test_the_claims_status_and_why_its_application_waits() -> None:
    instance = core.instance_of(provider(), NS)
    assert isinstance(instance, core.Instance)
    binding = Binding("redis-integrated", Condition("Bound", "True", "Bound", "bound to ServiceProvider x"))
    ready = status_of(binding, claim(), "2026-12-05T00:00:00Z",
                      core.provisioned(instance, core.account_of(claim()), "cart-redis-conn"))
    assert ready["ready"] is True and ready["connection"] == {
        "host": "redis-integrated.apprafter-redis.svc", "port": 6379, "user": "shop.cart-redis",
        "prefix": "shop.cart-redis:", "secretName": "cart-redis-conn"}
    assert [c["type"] for c in ready["conditions"]] == ["Bound", "Ready"]
    waits = status_of(binding, claim(), "2026-12-05T00:00:00Z",
                      core.waiting("InstanceNotReady", "Deployment apprafter-redis/redis-integrated has no available "
                                                       "replica yet"))
    assert waits["ready"] is False
    assert waiting_reason({"status": waits}) == (
        "bound to ServiceProvider redis-integrated: InstanceNotReady: Deployment apprafter-redis/redis-integrated "
        "has no available replica yet")
    # another backend's claim: provider and Bound alone, as before
    other = status_of(bind(claim(), [provider()]), claim(), "2026-12-05T00:00:00Z")
    assert set(other) == {"provider", "conditions"}


def test_it_serves_redis_claims_of_redis_server_providers_alone() -> None:
    assert core.serves(claim(), provider())
    assert not core.serves(claim(), None)
    assert not core.serves({**claim(), "spec": {"type": "pg"}}, provider())  # the webhook refuses such a provider
    assert not core.serves(claim(), {"spec": {"type": "redis", "backend": "dragonfly"}})


def test_an_integrated_instance_takes_users_once_its_deployment_has_an_available_replica() -> None:
    instance = core.instance_of(provider(), NS)
    own = core.instance_of(provider(address="127.0.0.1:6379"), NS)
    assert isinstance(instance, core.Instance) and isinstance(own, core.Instance)
    assert core.instance_waits(instance, None) == "Deployment apprafter-redis/redis-integrated is being created"
    assert core.instance_waits(instance, {"status": {}}) == (
        "Deployment apprafter-redis/redis-integrated has no available replica yet")
    assert core.instance_waits(instance, {"status": {"availableReplicas": 1}}) is None
    assert core.instance_waits(own, None) is None


def test_the_operator_dials_an_integrated_instance_at_its_services_cluster_ip_and_an_own_redis_at_its_address() -> None:
    instance = core.instance_of(provider(), NS)
    own = core.instance_of(provider(address="redis.example:6380"), NS)
    assert not isinstance(instance, list) and not isinstance(own, list)
    ready = [{"endpoints": [{"addresses": ["10.244.0.9"], "conditions": {"ready": False}}]},
             {"endpoints": [{"addresses": ["10.244.0.7"], "conditions": {"ready": True}}]}]
    assert core.dial(instance, {"spec": {"clusterIP": "10.0.0.17"}}, ready) == ("10.0.0.17", 6379)
    # no ready endpoint: nothing would answer at the cluster IP, so it is not dialled
    for slices in ([], [{"endpoints": None}], ready[:1]):
        assert core.dial(instance, {"spec": {"clusterIP": "10.0.0.17"}}, slices) == (
            f"Service {NS}/redis-integrated has no ready endpoint yet")
    # the apps' Secrets keep the Service's DNS name
    assert core.connection(instance, core.account_of(claim()))["host"] == f"redis-integrated.{NS}.svc"
    for service in (None, {"spec": {}}, {"spec": {"clusterIP": "None"}}):
        assert core.dial(instance, service) == f"Service {NS}/redis-integrated has no cluster IP yet"
    assert core.dial(own, None) == ("redis.example", 6380)
