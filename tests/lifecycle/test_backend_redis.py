"""The redis-server backend's core (lifecycle/backends/redis.py, instance.py): the instance a provider's config gives
(the schema's defaults, Guaranteed, maxmemory below the limit, bring-your-own address), the steps of a claim (the
admin Secret made once, the instance applied, waits until it answers, the ACL user set and tried), its deterministic
user, prefix and connection, the password kept from its own Secret, and the drop."""

from __future__ import annotations

from typing import Any

import pytest

from controller_runtime.outcomes import Done, Requeue
from lifecycle.backends import instance as server
from lifecycle.backends.common import b64, connection_secret_of
from lifecycle.backends.contract import Again, Apply, CreateOnce, Gone, Ready, Seen, Site, Step, Waiting
from lifecycle.backends.redis import CORE, Account, Config, DropUser, SetUser, TryUser, account_of, acl_rules
from lifecycle.backends.registry import core_for
from lifecycle.binding import bind, status_of, waiting_reason
from lifecycle.conditions import Condition

NS = "apprafter-redis"
IMAGE = "ghcr.io/apprafter/redis:0.1.0"
FRESH = "a-fresh-password"
ADMIN = "the-admin-password"


def provider(name: str = "redis-integrated", **config: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"type": "redis", "backend": "redis-server",
                                                 **({"config": config} if config else {})}}


def claim(namespace: str = "shop", name: str = "cart-redis", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ResourceClaim",
            "metadata": {"namespace": namespace, "name": name, "uid": "0a1b", "labels": labels},
            "spec": {"type": "redis", "selector": {}}}


def config(**given: Any) -> Config:
    found = CORE.configure(provider(**given), Site(NS, IMAGE))
    assert isinstance(found, Config), found
    return found


def admin_secret(password: str = ADMIN) -> dict[str, Any]:
    return {"metadata": {"name": "redis-integrated-admin"}, "data": {"password": b64(password)}}


def seen(cfg: Config, *objects: Any, connection: dict[str, str] | None = None) -> Seen:
    reads = server.reads(cfg.instance)
    return Seen(dict(zip(reads, objects, strict=False)), connection, FRESH, 0)


AVAILABLE = {"status": {"availableReplicas": 1}}
SERVICE = {"spec": {"clusterIP": "10.0.0.17"}}
SLICES = [{"endpoints": [{"addresses": ["10.244.0.7"], "conditions": {"ready": True}}]}]


def test_the_default_instance_is_the_services_dns_name_with_the_schemas_default_sizes() -> None:
    instance = config().instance
    assert (instance.host, instance.port, instance.integrated) == ("redis-integrated.apprafter-redis.svc", 6379, True)
    assert (instance.memory, instance.cpu) == ("256Mi", "250m")  # the schema's *defaults
    assert config().max_memory == 192 * 2**20  # 256Mi less a quarter


@pytest.mark.parametrize(("memory", "percent", "max_memory"), [
    ("64Mi", 75, 32 * 2**20), ("128Mi", 75, 96 * 2**20), ("1Gi", 75, 768 * 2**20), ("1G", 75, 750_000_000),
    ("1Gi", 90, 2**30 * 90 // 100), ("64Mi", 90, 32 * 2**20), ("1Gi", 10, 2**30 // 10)])
def test_maxmemory_is_the_share_asked_and_at_least_32Mi_below_the_limit(memory: str, percent: int,
                                                                         max_memory: int) -> None:
    assert config(resources={"memory": memory}, maxmemoryPercent=percent).max_memory == max_memory


def test_the_instance_is_guaranteed_and_runs_redis_server_with_maxmemory_below_its_limit() -> None:
    cfg = config(resources={"memory": "512Mi", "cpu": "500m"})
    step = CORE.provision(claim(), cfg, seen(cfg, admin_secret()))
    volume, deployment, service = (w.obj for w in step.writes if isinstance(w, Apply))
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE and volume["kind"] == "PersistentVolumeClaim"
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": "500m",
                                                                                      "memory": "512Mi"}
    args = container["args"]
    assert args[args.index("--maxmemory") + 1] == str(384 * 2**20)
    # the admin password from the Secret, as the environment: never literal, never in argv
    assert "--requirepass" not in args and "PASSWORD" not in " ".join(args)
    assert container["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "redis-integrated-admin", "key": "password"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert (deployment["metadata"]["namespace"], service["metadata"]["name"]) == (NS, "redis-integrated")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_bring_your_own_redis_by_address_and_what_the_core_refuses() -> None:
    own = config(address="10.0.0.7:6380").instance
    assert (own.host, own.port, own.integrated) == ("10.0.0.7", 6380, False)
    assert config(address="[fd00::7]:6379").instance.host == "fd00::7"
    assert config(address="[::ffff:10.0.0.7]:6379").instance.host == "::ffff:10.0.0.7"
    assert CORE.configure(provider(resources={"memory": "32Mi", "cpu": "0"}), Site(NS, IMAGE)) == [
        "spec.config.resources.memory: '32Mi' is not a memory quantity of at least 64Mi",
        "spec.config.resources.cpu: '0' is not a CPU quantity (250m, 1, 1.5)"]
    assert CORE.configure(provider(address="nowhere:99999"), Site(NS, IMAGE)) == [
        "spec.config.address: 'nowhere:99999' is not host:port"]
    # what the schema refuses comes first, in the webhook's words
    said = CORE.configure(provider(maxmemoryPercent=95), Site(NS, IMAGE))
    assert isinstance(said, list) and len(said) == 1
    assert said[0].startswith("spec.config.maxmemoryPercent: 95 is greater than the maximum of 90")
    # an integrated instance needs an image to run
    assert CORE.configure(provider(), Site(NS, None)) == [
        "the operator runs no redis-server here (no image for it: --backend-image redis-server=REF): set "
        "spec.config.address"]
    assert isinstance(CORE.configure(provider(address="10.0.0.7:6380"), Site(NS, None)), Config)


def test_the_admin_secret_is_made_once_for_an_integrated_instance_and_asked_of_the_administrator_else() -> None:
    cfg = config()
    first = CORE.provision(claim(), cfg, seen(cfg, None))
    assert isinstance(first.then, Again)
    [made] = first.writes
    assert isinstance(made, CreateOnce) and made.obj["data"] == {"password": b64(FRESH)}
    own = config(address="10.0.0.7:6380")
    waits = CORE.provision(claim(), own, seen(own, None))
    assert isinstance(waits.then, Waiting) and waits.then.reason == "AdminSecretMissing"
    assert isinstance(waits.then.retry, Done) and not waits.writes  # its administrator makes it: a watch wakes it


def test_an_integrated_instance_takes_users_once_available_and_is_dialled_at_its_cluster_ip() -> None:
    cfg = config()
    for objects, said in (((None, None, None), "Deployment apprafter-redis/redis-integrated is being created"),
                          (({"status": {}}, SERVICE, SLICES), "Deployment apprafter-redis/redis-integrated has no "
                                                              "available replica yet"),
                          ((AVAILABLE, {"spec": {"clusterIP": "None"}}, SLICES),
                           "Service apprafter-redis/redis-integrated has no cluster IP yet"),
                          ((AVAILABLE, SERVICE, []), "Service apprafter-redis/redis-integrated has no ready endpoint "
                                                     "yet")):
        step = CORE.provision(claim(), cfg, seen(cfg, admin_secret(), *objects))
        assert isinstance(step.then, Waiting) and (step.then.reason, step.then.message) == ("InstanceNotReady", said)
        assert isinstance(step.then.retry, Requeue) and not step.calls
        assert [w.obj["kind"] for w in step.writes if isinstance(w, Apply)] == ["PersistentVolumeClaim", "Deployment",
                                                                                  "Service"]
    ready = CORE.provision(claim(), cfg, seen(cfg, admin_secret(), AVAILABLE, SERVICE, SLICES))
    set_user, try_user = ready.calls
    assert isinstance(set_user, SetUser) and (set_user.host, set_user.port) == ("10.0.0.17", 6379)
    assert isinstance(try_user, TryUser) and try_user.user == "shop.cart-redis"
    assert isinstance(ready.then, Ready)
    assert ready.then.secret is not None and ready.then.secret["host"] == "redis-integrated.apprafter-redis.svc"


def test_a_claims_user_prefix_and_connection_are_its_namespace_and_name() -> None:
    account = account_of(claim())
    assert account == Account("shop.cart-redis", "shop.cart-redis:")
    assert connection_secret_of(claim(**{"app.kubernetes.io/name": "cart"})) == "cart-redis-conn"
    rules = acl_rules(account, "pw")
    assert list(rules[:5]) == ["reset", "on", ">pw", "~shop.cart-redis:*", "&shop.cart-redis:*"]
    assert "-@dangerous" in rules and "-@admin" in rules and "-client|tracking" in rules
    assert rules[-1] == "-@scripting" and acl_rules(account, "pw", scripting=True)[-4:] == (
        "-function", "-script|flush", "-script|kill", "-script|debug")  # own scripts only where the provider says
    assert config().scripting is False and config(scripting=True).scripting is True
    own = config(address="127.0.0.1:6380")
    step = CORE.provision(claim(), own, seen(own, admin_secret()))
    assert isinstance(step.then, Ready)
    assert step.then.secret == {"url": f"redis://shop.cart-redis:{FRESH}@127.0.0.1:6380/0", "host": "127.0.0.1",
                                "port": "6380", "user": "shop.cart-redis", "password": FRESH,
                                "prefix": "shop.cart-redis:"}
    assert step.then.connection == {"host": "127.0.0.1", "port": 6380, "user": "shop.cart-redis",
                                    "prefix": "shop.cart-redis:"}
    assert not step.writes  # a Redis the administrator runs: nothing to make for it


def test_the_password_is_kept_from_the_claims_own_secret_and_never_shown() -> None:
    own = config(address="127.0.0.1:6380")
    kept = CORE.provision(claim(), own, seen(own, admin_secret(), connection={"user": "shop.cart-redis",
                                                                               "password": "kept-one"}))
    assert kept.then.secret is not None and kept.then.secret["password"] == "kept-one"  # type: ignore[union-attr]
    other = CORE.provision(claim(), own, seen(own, admin_secret(), connection={"user": "other.x",
                                                                                "password": "theirs"}))
    assert other.then.secret is not None and other.then.secret["password"] == FRESH  # type: ignore[union-attr]
    shown = repr(kept.calls) + repr(kept.then.message)  # type: ignore[union-attr]
    assert "kept-one" not in shown and ADMIN not in shown and "<hidden>" in shown


def test_the_drop_deletes_the_user_and_its_keys_as_the_admin() -> None:
    own = config(address="127.0.0.1:6380")
    step = CORE.drop(claim(), own, seen(own, admin_secret()))
    assert step == Step(Gone(), calls=(DropUser("127.0.0.1", 6380, ADMIN, "shop.cart-redis",  # type: ignore[arg-type]
                                                "shop.cart-redis:"),))
    nothing = CORE.drop(claim(), own, seen(own, None))
    assert isinstance(nothing.then, Waiting) and nothing.then.reason == "AdminSecretMissing" and not nothing.writes


def test_the_shipped_providers_config_names_the_server_its_namespace_and_sizes() -> None:
    cfg = CORE.configure(provider(server="platform-redis", namespace="apprafter-redis",
                                  resources={"cpu": "1", "memory": "4Gi"}, maxmemoryPercent=75),
                         Site("elsewhere", IMAGE))
    assert isinstance(cfg, Config)
    instance = cfg.instance
    assert (instance.provider, instance.name, instance.namespace, instance.host) == (
        "redis-integrated", "platform-redis", "apprafter-redis", "platform-redis.apprafter-redis.svc")
    assert (instance.cpu, instance.memory, cfg.max_memory, instance.admin_secret) == (
        "1", "4Gi", 3 * 2**30, "platform-redis-admin")
    # the admin Secret it makes, and what the edge reads, are the named server's in its namespace
    [made] = CORE.provision(claim(), cfg, seen(cfg, None)).writes
    assert isinstance(made, CreateOnce)
    assert (made.obj["metadata"]["namespace"], made.obj["metadata"]["name"]) == ("apprafter-redis",
                                                                                "platform-redis-admin")
    assert {(r.kind.kind, r.namespace, r.name) for r in CORE.reads(claim(), cfg)} >= {
        ("Secret", "apprafter-redis", "platform-redis-admin"), ("Deployment", "apprafter-redis", "platform-redis"),
        ("Service", "apprafter-redis", "platform-redis")}
    refused = CORE.configure(provider("ours", server="Bad.Name"), Site(NS, IMAGE))
    assert isinstance(refused, list) and len(refused) == 1
    assert refused[0].startswith("spec.config.server: ")  # the schema's words: a DNS label


def test_what_the_edge_reads_an_integrated_instance_and_one_the_administrator_runs() -> None:
    cfg = config()
    admin, deployment, service, slices, volume = CORE.reads(claim(), cfg)
    assert [(r.kind.kind, r.namespace, r.name) for r in (admin, deployment, service, volume)] == [
        ("Secret", NS, "redis-integrated-admin"), ("Deployment", NS, "redis-integrated"),
        ("Service", NS, "redis-integrated"), ("PersistentVolumeClaim", NS, "redis-integrated-data")]
    assert (slices.kind.kind, slices.namespace, slices.name) == ("EndpointSlice", NS, None)
    assert slices.labels == (("kubernetes.io/service-name", "redis-integrated"),)  # the Service's slices alone
    own = config(address="10.0.0.7:6380")
    assert [(r.kind.kind, r.name) for r in CORE.reads(claim(), own)] == [("Secret", "redis-integrated-admin")]


def test_the_admin_secret_is_not_made_again_once_it_exists_and_a_drop_never_makes_it() -> None:
    cfg = config()
    ready = CORE.provision(claim(), cfg, seen(cfg, admin_secret(), AVAILABLE, SERVICE, SLICES))
    assert not [w for w in ready.writes if isinstance(w, CreateOnce)]
    set_user = ready.calls[0]
    assert isinstance(set_user, SetUser) and set_user.admin_password == ADMIN  # read from the admin Secret
    # a Secret that holds no password is not replaced: its administrator mends it (a watch wakes the claim)
    empty = CORE.provision(claim(), cfg, seen(cfg, {"metadata": {"name": "redis-integrated-admin"}, "data": {}}))
    assert isinstance(empty.then, Waiting) and empty.then.reason == "AdminSecretMissing"
    assert isinstance(empty.then.retry, Done) and not empty.writes and not empty.calls
    dropped = CORE.drop(claim(), cfg, seen(cfg, None, AVAILABLE))  # its server runs, its admin Secret is gone
    assert isinstance(dropped.then, Waiting) and dropped.then.reason == "AdminSecretMissing"
    assert not dropped.writes and not dropped.calls
    # an instance that never ran (no admin Secret, no Deployment, no volume) holds nothing: the drop is done
    assert CORE.drop(claim(), cfg, seen(cfg, None)) == Step(Gone())


@pytest.mark.parametrize("connection", [None, {"user": "shop.cart-redis", "password": "kept-one"}])
def test_the_user_is_set_and_tried_with_the_password_its_secret_holds(connection: dict[str, str] | None) -> None:
    own = config(address="10.0.0.7:6380")
    step = CORE.provision(claim(), own, seen(own, admin_secret(), connection=connection))
    assert isinstance(step.then, Ready) and step.then.secret is not None
    password = step.then.secret["password"]
    assert password == (connection or {}).get("password", FRESH)
    set_user, try_user = step.calls
    assert isinstance(set_user, SetUser) and isinstance(try_user, TryUser)
    assert (set_user.host, set_user.port, set_user.user) == ("10.0.0.7", 6380, "shop.cart-redis")
    assert set_user.rules == acl_rules(account_of(claim()), password)
    scripted = config(address="10.0.0.7:6380", scripting=True)
    [with_scripts, _] = CORE.provision(claim(), scripted, seen(scripted, admin_secret(), connection=connection)).calls
    assert isinstance(with_scripts, SetUser) and with_scripts.rules == acl_rules(account_of(claim()), password, True)
    assert (try_user.host, try_user.port, try_user.user, try_user.password) == (
        "10.0.0.7", 6380, "shop.cart-redis", password)
    assert "password" not in step.then.connection  # status.connection: never the secret
    assert password not in repr(step.calls) and password not in step.then.message


def test_an_ipv6_address_is_bracketed_in_the_url_and_bare_in_host() -> None:
    own = config(address="[fd00::7]:6379")
    step = CORE.provision(claim(), own, seen(own, admin_secret()))
    assert isinstance(step.then, Ready) and step.then.secret is not None
    assert step.then.secret["url"] == f"redis://shop.cart-redis:{FRESH}@[fd00::7]:6379/0"
    assert step.then.secret["host"] == "fd00::7" and step.then.connection["host"] == "fd00::7"
    set_user, _ = step.calls
    assert (set_user.host, set_user.port) == ("fd00::7", 6379)


def test_only_a_ready_endpoint_lets_the_instance_be_dialled() -> None:
    cfg = config()
    not_ready = [{"endpoints": [{"addresses": ["10.244.0.9"], "conditions": {"ready": False}}]}]
    for slices in ([{"endpoints": None}], not_ready):
        step = CORE.provision(claim(), cfg, seen(cfg, admin_secret(), AVAILABLE, SERVICE, slices))
        assert isinstance(step.then, Waiting) and step.then.reason == "InstanceNotReady" and not step.calls
    mixed = CORE.provision(claim(), cfg, seen(cfg, admin_secret(), AVAILABLE, SERVICE, [*not_ready, *SLICES]))
    assert isinstance(mixed.then, Ready) and len(mixed.calls) == 2
    services: list[dict[str, Any] | None] = [None, {"spec": {}}]
    for service in services:
        step = CORE.provision(claim(), cfg, seen(cfg, admin_secret(), AVAILABLE, service, SLICES))
        assert isinstance(step.then, Waiting) and step.then.message == (
            "Service apprafter-redis/redis-integrated has no cluster IP yet")


def test_the_drop_of_an_integrated_instance_waits_for_it_and_dials_its_cluster_ip() -> None:
    cfg = config()
    waits = CORE.drop(claim(), cfg, seen(cfg, admin_secret(), {"status": {}}, SERVICE, SLICES))
    assert isinstance(waits.then, Waiting) and waits.then.reason == "InstanceNotReady"
    assert isinstance(waits.then.retry, Requeue) and not waits.calls and not waits.writes
    gone = CORE.drop(claim(), cfg, seen(cfg, admin_secret(), AVAILABLE, SERVICE, SLICES))
    assert isinstance(gone.then, Gone) and not gone.writes  # nothing of the instance is applied by a drop
    [drop] = gone.calls
    assert isinstance(drop, DropUser) and (drop.host, drop.port, drop.user, drop.prefix) == (
        "10.0.0.17", 6379, "shop.cart-redis", "shop.cart-redis:")
    assert ADMIN not in repr(gone.calls)


def test_the_registry_gives_redis_claims_on_redis_server_providers_this_core_alone() -> None:
    assert (CORE.type, CORE.backend) == ("redis", "redis-server")
    assert core_for("redis", "redis-server") is CORE
    assert core_for("redis", None) is CORE  # the provider is gone: the one core of the type
    assert core_for("redis", "dragonfly") is None  # no core serves it (and the schema refuses it)
    assert core_for("pg", "redis-server") is None and core_for("disk", "redis-server") is None
    assert CORE.drop_needs_provider is True  # its user lives at the provider's instance


def test_a_claim_without_an_app_label_has_the_same_connection_secret_name() -> None:
    assert connection_secret_of(claim()) == connection_secret_of(claim(**{"app.kubernetes.io/name": "cart"}))
    assert connection_secret_of(claim(name="shop-redis")) == "shop-redis-conn"


def test_the_claims_status_says_why_it_waits_in_the_cores_words() -> None:
    cfg = config()
    step = CORE.provision(claim(), cfg, seen(cfg, admin_secret(), {"status": {}}, SERVICE, SLICES))
    assert isinstance(step.then, Waiting)
    binding = bind(claim(), [provider()])
    status = status_of(binding, claim(), "2026-12-05T00:00:00Z",
                       (Condition("Ready", "False", step.then.reason, step.then.message), {"ready": False}))
    assert [c["type"] for c in status["conditions"]] == ["Bound", "Ready"]
    assert waiting_reason({"status": status}) == (
        "bound to ServiceProvider redis-integrated: InstanceNotReady: Deployment apprafter-redis/redis-integrated "
        "has no available replica yet")
    # a provider of another type: the claim binds to none
    assert bind(claim(), [{"metadata": {"name": "pg"}, "spec": {"type": "pg"}}]).provider is None
