"""API Priority and Fairness throttling the operator's ServiceAccount (a priority level of its own with the fewest
seats the server gives, no borrowing, excess rejected with 429 and Retry-After): the operator holds every request
until the Retry-After has passed, requeues no sooner, and converges without a storm of rejected requests."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.reconciler.faults import throttle, unthrottle
from tests.reconciler.helpers import apply, cr, edit, fresh_namespace, wait
from tests.reconciler.operator_proc import Operator
from tests.reconciler.test_restarts_cluster import all_in
from tests.testbed.kube import KubeTestBed, ssl_context

pytestmark = [pytest.mark.testbed, pytest.mark.faults]

SIMPLE = edit(needs=None, env={"LOG_LEVEL": "info"})


@pytest.fixture
def throttled(bed: KubeTestBed, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A ServiceAccount of its own (cluster-admin: this is about throttling, not RBAC) whose every request goes
    to a priority level of one nominal share: (its kubeconfig, the FlowSchema's uid)."""
    name = f"throttled-{uuid.uuid4().hex[:6]}"
    token = bed.service_account_token(name, "operator")
    bed.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": name}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}})
    bed.wait_authorized(f"system:serviceaccount:{name}:operator", verb="list", group="apprafter.io",
                        resource="applications")
    schema_uid = throttle(bed, name, (name, "operator"))
    kubeconfig = bed.kubeconfig_for(tmp_path / "throttled.kubeconfig", token, name)
    try:
        yield kubeconfig, schema_uid
    finally:
        unthrottle(bed, name)
        bed.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", name)


def test_throttled_by_priority_and_fairness_it_backs_off_and_converges(
        bed: KubeTestBed, throttled: tuple[Path, str], tmp_path: Path) -> None:
    kubeconfig, schema_uid = throttled
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    with httpx.Client(base_url=bed.url, verify=ssl_context(bed.ca_path),
                      headers={"Authorization": f"Bearer {token}"}) as client:
        # the server applies new flow control settings a moment later: wait until it files us under ours
        wait("the FlowSchema in force", lambda: client.get("/version").headers.get(
            "X-Kubernetes-PF-FlowSchema-UID") == schema_uid or None, 30)
    ns = fresh_namespace(bed, "apf")
    names = [f"t{i}" for i in range(16)]  # enough to be throttled (the test says so if not), few for the budget
    for n in names:
        apply(bed, cr(ns, SIMPLE, name=n))
    op = Operator(bed, tmp_path, ("--no-leader-elect", "--no-platform-stack", "--namespace", ns, "--resync", "60",
                                  "--max-backoff", "5"), name="throttled", kubeconfig=kubeconfig).start()
    try:
        all_in(bed, ns, names, "Ready", timeout=180)
        rejected = op.metric("apprafter_kube_requests_total", code="429")
        answered = op.metric("apprafter_kube_requests_total") - rejected
        assert rejected > 0, "the priority level never throttled: the test proved nothing"
        assert op.metric("apprafter_kube_throttled_seconds_total") > 0, "Retry-After was not honoured"
        # no storm: each 429 holds every request for its Retry-After, so far fewer are rejected than answered
        assert rejected < answered, (rejected, answered)
        requeued = [json.loads(line) for line in op.log().splitlines()
                    if line.startswith("{") and '"requeued"' in line and re.search("429|[Tt]oo many", line)]
        assert all(r["retry_in"] >= 1 for r in requeued), requeued[:5]
        print(f"throttled: {rejected:.0f} requests rejected (429), {answered:.0f} answered, "
              f"{op.metric('apprafter_kube_throttled_seconds_total'):.1f} s held, {len(requeued)} reconciles requeued")
    finally:
        op.stop()
