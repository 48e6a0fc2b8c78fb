"""A need's fields its provider will not serve as asked, through the API server and the operator (issue 42 item 4):
a pg version the Cluster does not run, a pg share that does not fit the Cluster's volume, named s3 buckets. Each
claim says why (its Ready condition, not retried), nothing is made for it at its backend, and its Application fails
at once (ClaimRefused: Argo CD Degraded), where before the version, the share and the buckets were dropped in
silence. The cores' every case: tests/lifecycle/test_backend_pg_needs.py, test_backend_need_fields.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from lifecycle.backends.pg_cluster import CLUSTER
from tests.reconciler.helpers import (
    API,
    add_provider,
    apply,
    condition,
    cr,
    edit,
    fresh_namespace,
    status,
    wait_showing,
)
from tests.reconciler.operator_proc import Operator
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
SELECTOR = {"need-fields": RUN}
PG, S3 = f"pg-{RUN}", f"s3-{RUN}"


@pytest.fixture(scope="module")
def site(bed: KubeTestBed) -> Iterator[str]:
    """The providers' namespace (their claims' records), and the providers: pg on a 1Gi volume (the operator's
    default image: PostgreSQL 15), s3 on a gateway the administrator runs."""
    namespace = fresh_namespace(bed, "site")
    add_provider(bed, PG, "pg", "cloudnative-pg", {"namespace": namespace, "storage": {"size": "1Gi"}},
                 labels=SELECTOR)
    add_provider(bed, S3, "s3", "versitygw", {"namespace": namespace, "address": "127.0.0.1:1"}, labels=SELECTOR)
    yield namespace
    for name in (PG, S3):
        bed.delete(API, "ServiceProvider", name)


def claim_ready(bed: KubeTestBed, namespace: str, claim: str, reason: str) -> dict[str, Any]:
    """The claim's Ready condition once it has `reason`."""
    def probe() -> dict[str, Any] | None:
        st = (bed.get(API, "ResourceClaim", claim, namespace) or {}).get("status") or {}
        ready = condition(st, "Ready") or {}
        return ready if ready.get("reason") == reason else None
    return wait_showing(f"{namespace}/{claim} Ready {reason}", probe, 60,
                        lambda: bed.get(API, "ResourceClaim", claim, namespace), "claim now")


def refused_application(bed: KubeTestBed, namespace: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        st = status(bed, namespace)
        return st if (st.get("phase"), (condition(st, "Ready") or {}).get("reason")) == ("Failed", "ClaimRefused") \
            else None
    return wait_showing(f"{namespace}/demo Failed, ClaimRefused", probe, 60, lambda: status(bed, namespace),
                        "Application status now")


PG_APP = {"env": {"DATABASE_URL": {"claim": "pg/url"}}, "expose": {"port": 8080}}


def test_a_pg_version_the_provider_does_not_run_is_refused_and_nothing_is_made(
        bed: KubeTestBed, operator: Operator, site: str) -> None:
    namespace = fresh_namespace(bed, "pgv")
    apply(bed, cr(namespace, edit(needs={"pg": {"version": "16", "selector": SELECTOR}}, **PG_APP)))
    ready = claim_ready(bed, namespace, "demo-pg", "VersionNotServed")
    assert ready["message"] == (f'needs.pg.version "16": ServiceProvider {PG} runs PostgreSQL 15 (Cluster '
                                f"{site}/{PG}): ask for 15, or select a provider that runs 16")
    failed = refused_application(bed, namespace)
    assert (condition(failed, "Ready") or {})["message"].startswith(
        f"needs.pg cannot be provisioned: bound to ServiceProvider {PG}: VersionNotServed: ")
    # nothing of the claim at the backend: no role password Secret, no Cluster made for it
    assert bed.get("v1", "Secret", f"{namespace}.demo-pg", site) is None
    assert bed.get(CLUSTER.api_version, CLUSTER.kind, PG, site) is None


def test_a_pg_share_larger_than_the_volume_waits_saying_so(bed: KubeTestBed, operator: Operator, site: str) -> None:
    namespace = fresh_namespace(bed, "pgs")
    apply(bed, cr(namespace, edit(needs={"pg": {"size": "xlarge", "selector": SELECTOR}}, **PG_APP)))
    ready = claim_ready(bed, namespace, "demo-pg", "ShareDoesNotFit")
    assert ready["message"].startswith(f"needs.pg.size xlarge: its share does not fit: 8Gi of Cluster {site}/{PG}'s "
                                       "1Gi volume")
    refused_application(bed, namespace)
    assert bed.get("v1", "Secret", f"{namespace}.demo-pg", site) is None


def test_named_s3_buckets_are_refused_before_anything_is_asked_of_the_gateway(
        bed: KubeTestBed, operator: Operator, site: str) -> None:
    namespace = fresh_namespace(bed, "s3b")
    apply(bed, cr(namespace, edit(needs={"s3": {"buckets": ["ingest-archive"], "selector": SELECTOR}},
                                  env={"S3_URL": {"claim": "s3/url"}}, expose={"port": 8080})))
    ready = claim_ready(bed, namespace, "demo-s3", "BucketsNotServed")
    assert ready["message"].startswith("needs.s3.buckets ingest-archive: versitygw gives a claim one bucket of its "
                                       "own")
    refused_application(bed, namespace)
