"""ServiceProvider writes pass the webhook (issue 34 item 6, the kind of issue 31): through the real API server, a
provider whose backend does not serve its type, or of a type no backend serves yet, is refused with the webhook's
message naming the field; a type the platform does not know is the CRD's to refuse; a tenant may not write one at all
(cluster-scoped: RBAC); an administrator's provider is kept as written, its backend's config included."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.admission.cluster import Webhook, apply, message, ok
from tests.admission.reviews import API, EDITOR
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

PROVIDERS = 'admission webhook "serviceproviders.apprafter.io" denied the request'


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
    wanted = provider("pg-integrated", "pg", "cloudnative-pg", cluster="platform-postgres", nodes=1,
                      sizes={"solo": {"memory": "1Gi"}})
    made.append("pg-integrated")
    kept = ok(apply(admission_bed.http, admission_bed, wanted))
    assert kept["spec"] == wanted["spec"] and kept["metadata"]["labels"] == wanted["metadata"]["labels"]
    assert "namespace" not in kept["metadata"]  # cluster-scoped
    # an update that moves it onto a backend of another type is refused like a create
    moved = provider("pg-integrated", "pg", "redis-server")
    text = message(apply(admission_bed.http, admission_bed, moved))
    assert PROVIDERS in text and "spec.backend: 'redis-server' does not serve pg: use cloudnative-pg" in text, text


@pytest.mark.parametrize(("kind", "backend", "said"), [
    ("redis", "cloudnative-pg", "spec.backend: 'cloudnative-pg' does not serve redis: use redis-server or dragonfly"),
    ("jetstream", "nats", "spec.type: no backend serves jetstream on this platform yet (types with one: disk, pg, "
                          "redis)"),
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
