"""ServiceProvider writes pass the webhook (issue 34 item 6, the kind of issue 31): through the real API server, a
provider whose backend does not serve its type, or of a type no backend serves yet, is refused with the webhook's
message naming the field, and so is a config its backend does not read; a type the platform does not know is the
CRD's to refuse; a tenant may not write one at all (cluster-scoped: RBAC; and the webhook, when RBAC grants too
much); an administrator's provider is kept as
written, its backend's config included; the integrated providers the stack ships on every tier pass."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.binding import BOUND, bind
from tests.admission.cluster import Webhook, apply, eventually, fresh_namespace, message, ok
from tests.admission.reviews import API, EDITOR, parser_cr
from tests.platform_stack.conftest import ALL_TIERS, stack_all  # noqa: F401 (the session's built stack)
from tests.platform_stack.shipped import shipped
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

PROVIDERS = 'admission webhook "serviceproviders.apprafter.io" denied the request'
APPS = 'admission webhook "applications.apprafter.io" denied the request'


def provider(name: str, kind: str, backend: str, **config: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": kind, "backend": backend}
    if config:
        spec["config"] = config
    return {"apiVersion": API, "kind": "ServiceProvider",
            "metadata": {"name": name, "labels": {"tier": "integrated", "location": "in-cluster"}}, "spec": spec}


@pytest.fixture()
def made(admission_bed: KubeTestBed) -> Iterator[list[str]]:
    """Names of the ServiceProviders the test makes (deleted after it)."""
    names: list[str] = []
    yield names
    for name in names:
        admission_bed.delete(API, "ServiceProvider", name)


def test_an_administrators_provider_is_kept_as_written(admission_bed: KubeTestBed, webhook: Webhook,
                                                        made: list[str]) -> None:
    wanted = provider("pg-integrated", "pg", "cloudnative-pg", cluster="shop-postgres", namespace="apprafter-pg",
                      instances=2, storage={"size": "50Gi", "storageClassName": "fast"},
                      resources={"cpu": "2", "memory": "8Gi"}, sharedBuffersPercent=25)
    made.append("pg-integrated")
    kept = ok(apply(admission_bed.http, admission_bed, wanted))
    assert kept["spec"] == wanted["spec"] and kept["metadata"]["labels"] == wanted["metadata"]["labels"]
    assert "namespace" not in kept["metadata"]  # cluster-scoped
    # an update that moves it onto a backend of another type is refused like a create
    moved = provider("pg-integrated", "pg", "redis-server")
    text = message(apply(admission_bed.http, admission_bed, moved))
    assert PROVIDERS in text and "spec.backend: 'redis-server' does not serve pg: use cloudnative-pg" in text, text
    # its instances' volumes grow, never shrink
    grown = {**wanted, "spec": {**wanted["spec"], "config": {**wanted["spec"]["config"],
                                                             "storage": {"size": "80Gi", "storageClassName": "fast"}}}}
    assert ok(apply(admission_bed.http, admission_bed, grown))["spec"]["config"]["storage"]["size"] == "80Gi"
    shrunk = {**grown, "spec": {**grown["spec"], "config": {**grown["spec"]["config"],
                                                            "storage": {"size": "40Gi", "storageClassName": "fast"}}}}
    text = message(apply(admission_bed.http, admission_bed, shrunk))
    assert PROVIDERS in text and "spec.config.storage.size: 40Gi is smaller than 80Gi: a volume never shrinks" in text


def test_a_redis_the_administrator_runs_is_named_by_its_address(admission_bed: KubeTestBed, webhook: Webhook,
                                                              made: list[str]) -> None:
    """Bring your own Redis: `address` and no sizes (the operator runs no instance for it); a URL is no address."""
    wanted = provider("redis-external", "redis", "redis-server", server="cache", namespace="apprafter-redis",
                      address="cache.example.internal:6380")
    made.append("redis-external")
    kept = ok(apply(admission_bed.http, admission_bed, wanted))
    assert kept["spec"] == wanted["spec"]
    url = provider("redis-external", "redis", "redis-server", server="cache", namespace="apprafter-redis",
                   address="redis://cache:6379")
    text = message(apply(admission_bed.http, admission_bed, url))
    assert PROVIDERS in text and "spec.config.address" in text, text


@pytest.mark.parametrize(("kind", "backend", "said"), [
    ("redis", "cloudnative-pg", "spec.backend: 'cloudnative-pg' does not serve redis: use redis-server"),
    # a backend no core of the operator serves (issue 42: #Backends listed it, and its providers' claims waited)
    ("redis", "dragonfly", "spec.backend: 'dragonfly' does not serve redis: use redis-server"),
    ("jetstream", "nats", "spec.type: no backend serves jetstream on this platform yet (types with one: disk, pg, "
                          "redis, s3)"),
])
def test_a_backend_that_does_not_serve_its_type_is_refused(admission_bed: KubeTestBed, webhook: Webhook,
                                                           kind: str, backend: str, said: str) -> None:
    text = message(apply(admission_bed.http, admission_bed, provider(f"{kind}-x", kind, backend)))
    assert PROVIDERS in text and said in text, text
    assert admission_bed.get(API, "ServiceProvider", f"{kind}-x") is None


def test_the_schema_and_rbac_refuse_before_the_webhook(admission_bed: KubeTestBed, webhook: Webhook) -> None:
    unknown = message(apply(admission_bed.http, admission_bed, provider("mysql", "mysql", "percona")))
    assert "spec.type" in unknown and PROVIDERS not in unknown, unknown  # the CRD's enum
    with admission_bed.as_user(EDITOR) as tenant:
        refused = apply(tenant, admission_bed, provider("pg-mine", "pg", "cloudnative-pg"))
    assert refused.status_code == 403 and "serviceproviders" in message(refused), refused.text
    assert admission_bed.get(API, "ServiceProvider", "pg-mine") is None


def test_a_tenant_rbac_lets_write_providers_is_refused_by_the_webhook(admission_bed: KubeTestBed, webhook: Webhook,
                                                                      made: list[str]) -> None:
    """A ClusterRole granted too widely (a tenant may write ServiceProviders) still does not let a tenant say where
    claims' data lives: the webhook admits the platform's provider writers alone (--provider-writer)."""
    rbac, name = "rbac.authorization.k8s.io", "too-wide-providers"
    grant = {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": name},
             "rules": [{"apiGroups": ["apprafter.io"], "resources": ["serviceproviders"], "verbs": ["*"]}]}
    binding = {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "subjects": [{"kind": "User", "name": EDITOR, "apiGroup": rbac}],
               "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": name}}
    admission_bed.apply(grant, field_manager="admin")
    admission_bed.apply(binding, field_manager="admin")
    admission_bed.wait_authorized(EDITOR, verb="patch", group="apprafter.io", resource="serviceproviders")
    made.append("pg-mine")
    try:
        with admission_bed.as_user(EDITOR) as tenant:
            refused = apply(tenant, admission_bed, provider("pg-mine", "pg", "cloudnative-pg"))
        assert refused.status_code == 403, refused.text
        said = message(refused)
        assert PROVIDERS in said and "only the platform's provider writers (group:system:masters) may write " \
            f"ServiceProviders; {EDITOR!r} may not" in said, said
        assert admission_bed.get(API, "ServiceProvider", "pg-mine") is None
        ok(apply(admission_bed.http, admission_bed, provider("pg-mine", "pg", "cloudnative-pg")))  # the administrator
    finally:
        admission_bed.delete(f"{rbac}/v1", "ClusterRoleBinding", name)
        admission_bed.delete(f"{rbac}/v1", "ClusterRole", name)


def test_the_stacks_integrated_providers_of_every_tier_pass_the_webhook_and_each_need_binds_to_its_own(
        admission_bed: KubeTestBed, webhook: Webhook, made: list[str], stack_all: Path,  # noqa: F811
        tmp_path: Path) -> None:
    for tier in ALL_TIERS:
        providers = shipped(stack_all, tier, tmp_path)
        assert providers
        for wanted in providers:
            name = wanted["metadata"]["name"]
            if name not in made:
                made.append(name)
            kept = ok(apply(admission_bed.http, admission_bed, wanted, manager="argocd-controller"))
            assert (kept["spec"], kept["metadata"]["labels"]) == (wanted["spec"], wanted["metadata"]["labels"]), tier
        # What the binder reads: every ServiceProvider the API server holds now.
        listed = ok(admission_bed.http.get("/apis/apprafter.io/v1alpha1/serviceproviders"))["items"]
        assert sorted(p["metadata"]["name"] for p in listed) == sorted(made)
        for kind, name in (("pg", "pg-integrated"), ("redis", "redis-integrated"), ("disk", "disk"),
                           ("s3", "s3-integrated")):
            for selector in ({}, {"tier": "integrated"}):
                binding = bind({"spec": {"type": kind, "selector": selector}}, listed)
                assert (binding.provider, binding.condition.reason) == (name, BOUND), (tier, selector, binding)


def bent(name: str, stack: Path, into: Path, change: Any) -> dict[str, Any]:
    """The solo tier's shipped provider `name`, its config changed by `change`."""
    [wanted] = [p for p in shipped(stack, "solo", into) if p["metadata"]["name"] == name]
    change(wanted["spec"]["config"])
    return wanted


@pytest.mark.parametrize(("name", "change", "said"), [
    ("pg-integrated", lambda c: c.update(nodes=3),
     "spec.config.nodes: cloudnative-pg does not read it (it reads: backup, cluster, instances, namespace, pooler, "
     "resources, sharedBuffersPercent, storage)"),
    ("pg-integrated", lambda c: c.update(sharedBuffersPercent=100), "spec.config.sharedBuffersPercent: 100 is "
                                                                    "greater than the maximum of 40"),
    ("pg-integrated", lambda c: c["resources"].update(limits={"memory": "2Gi"}),
     "spec.config.resources.limits: cloudnative-pg does not read it (it reads: cpu, memory)"),
    ("redis-integrated", lambda c: c.update(maxmemoryPercent=95), "spec.config.maxmemoryPercent: 95 is greater than "
                                                                  "the maximum of 90"),
    ("disk", lambda c: c.update(accessMode="ReadWriteSometimes"), "spec.config.accessMode: 'ReadWriteSometimes' is "
                                                                  "not one of"),
    ("s3-integrated", lambda c: c.update(maxmemoryPercent=75), "spec.config.maxmemoryPercent: versitygw does not read "
                                                               "it (it reads: address, namespace, resources, server, "
                                                               "storage)"),
])
def test_a_config_its_backend_does_not_read_is_refused_naming_the_field(
        admission_bed: KubeTestBed, webhook: Webhook, stack_all: Path, tmp_path: Path,  # noqa: F811
        name: str, change: Any, said: str) -> None:
    text = message(apply(admission_bed.http, admission_bed, bent(name, stack_all, tmp_path, change)))
    assert PROVIDERS in text and said in text, text
    assert admission_bed.get(API, "ServiceProvider", name) is None


def test_a_disk_past_its_providers_max_size_is_refused_at_the_door_as_the_provider_changes(
        admission_bed: KubeTestBed, webhook: Webhook, made: list[str]) -> None:
    """A need its provider can never provision (a disk past the provider's maxSize) is refused at admission, at the
    need's size (issue 41: it became a claim that waited forever); the webhook reads providers as they change."""
    bed, name = admission_bed, f"disk-small-{uuid.uuid4().hex[:6]}"
    made.append(name)
    small = provider(name, "disk", "storage-class", maxSize="10Gi")
    small["metadata"]["labels"] = {"size-test": name}
    ok(apply(bed.http, bed, small))
    namespace = fresh_namespace(bed)
    cr = parser_cr(namespace)
    cr["spec"]["base"]["needs"]["disk"] = {"size": "20Gi", "selector": {"size-test": name}}
    with bed.as_user(EDITOR) as tenant:
        said = eventually("the webhook to read the provider", lambda: (
            lambda text: text if "maxSize" in text else None)(message(apply(tenant, bed, cr, dry_run=True))))
        assert APPS in said and (f"spec.base.needs.disk.size: 20Gi is above the provider's maxSize 10Gi "
                                 f"(ServiceProvider {name})") in said, said
        prod = cr["spec"]["environments"]["prod"].setdefault("needs", {})
        prod["disk"] = {"size": "5Gi", "selector": {"size-test": name}}
        assert ok(apply(tenant, bed, cr, dry_run=True))  # the environment's own size, within the ceiling
        prod["disk"]["size"] = "11Gi"
        said = message(apply(tenant, bed, cr, dry_run=True))
        assert "spec.environments.prod.needs.disk.size: 11Gi is above the provider's maxSize 10Gi" in said, said
        del prod["disk"]
        ok(apply(bed.http, bed, provider(name, "disk", "storage-class", maxSize="1Ti") | {
            "metadata": small["metadata"]}))  # the administrator raises the ceiling
        eventually("the raised ceiling read", lambda: apply(tenant, bed, cr, dry_run=True).status_code < 300 or None)


def test_needs_no_provider_can_serve_as_asked_are_refused_at_the_door_and_the_rest_warned_of(
        admission_bed: KubeTestBed, webhook: Webhook, made: list[str]) -> None:
    """Issue 42: a pg need whose share of the Cluster's volume is larger than the volume, and named s3 buckets, are
    refused at their field; a need of a type no backend serves and a size its provider does not apply are admitted
    with the API server's warnings, in the claim's own words (the webhook reads providers as they change)."""
    bed, run = admission_bed, uuid.uuid4().hex[:6]
    pg, s3 = f"pg-small-{run}", f"s3-{run}"
    made.extend([pg, s3])
    for name, kind, backend, config in ((pg, "pg", "cloudnative-pg", {"storage": {"size": "1Gi"}}),
                                        (s3, "s3", "versitygw", {})):
        found = provider(name, kind, backend, **config)
        found["metadata"]["labels"] = {"door-test": run}
        ok(apply(bed.http, bed, found))
    namespace = fresh_namespace(bed)
    cr = parser_cr(namespace)
    base = cr["spec"]["base"]
    base["env"], base["needs"] = {}, {"pg": {"size": "xlarge", "selector": {"door-test": run}}}
    base.pop("autoscale", None)
    for environment in cr["spec"]["environments"].values():
        environment.pop("needs", None)
    with bed.as_user(EDITOR) as tenant:
        said = eventually("the webhook to read the provider", lambda: (
            lambda text: text if "share" in text else None)(message(apply(tenant, bed, cr, dry_run=True))))
        assert APPS in said and ("spec.base.needs.pg.size: needs.pg.size xlarge: its share of the Cluster's volume, "
                                 f"8Gi, is more than the whole volume (1Gi) (ServiceProvider {pg})") in said, said
        base["needs"] = {"s3": {"buckets": ["ingest-archive"], "selector": {"door-test": run}}}
        said = eventually("the webhook to read the s3 provider", lambda: (
            lambda text: text if "buckets" in text else None)(message(apply(tenant, bed, cr, dry_run=True))))
        assert "spec.base.needs.s3.buckets: needs.s3.buckets ingest-archive: versitygw gives a claim one bucket" in said
        base["needs"] = {"pg": {"size": "small", "selector": {"door-test": run}}, "jetstream": {"streams": ["s"]},
                         "s3": {"size": "large", "selector": {"door-test": run}}}
        admitted = apply(tenant, bed, cr, dry_run=True)
        ok(admitted)
        warnings = admitted.headers.get_list("warning")
        assert any('spec.base.needs.jetstream: NoMatchingProvider: no ServiceProvider serves \\"jetstream\\"' in w
                   or 'no ServiceProvider serves "jetstream"' in w for w in warnings), warnings
        assert any("needs.s3.size large: not applied" in w for w in warnings), warnings
