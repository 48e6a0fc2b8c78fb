"""An API server of the admission tests' own (a failurePolicy: Fail webhook on every AppRafter kind must not
touch the session's shared one), with the token users and roles, and `apprafter webhook` registered on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.admission.cluster import (
    Webhook,
    apply,
    eventually,
    fresh_namespace,
    merge_status,
    ok,
    rbac,
    register,
    webhook_kubeconfig,
)
from tests.admission.reviews import APPROVER, EDITOR, FLOODER, OPERATOR, parser_cr, plan
from tests.renderer.helpers import run_cli
from tests.testbed.kube import KubeTestBed, start_kube


@pytest.fixture(scope="session")
def admission_bed(testbed_dir: Path) -> Iterator[KubeTestBed]:
    """kube-apiserver with users OPERATOR, APPROVER, EDITOR, FLOODER and the CRDs `apprafter crds` prints."""
    bed = start_kube(testbed_dir / "kube-admission", install_crds=False,
                     users={OPERATOR: ("system:serviceaccounts",), APPROVER: (), EDITOR: (), FLOODER: ()})
    try:
        crds = run_cli("crds")
        assert crds.returncode == 0, crds.stderr
        path = testbed_dir / "admission-crds.yaml"
        path.write_text(crds.stdout)
        assert {"applications.apprafter.io", "migrationplans.apprafter.io", "platformstacks.apprafter.io"} <= set(
            bed.install_crds([path]))
        assert all(d["kind"] == "CustomResourceDefinition" for d in yaml.safe_load_all(crds.stdout) if d)
        rbac(bed, (EDITOR, FLOODER), APPROVER)
        yield bed
    finally:
        bed.stop()


@pytest.fixture(scope="session")
def webhook_server(admission_bed: KubeTestBed, testbed_dir: Path) -> Iterator[Webhook]:
    # ServiceProviders are written by the bed's administrator (system:masters) alone, as the chart's default says.
    server = Webhook(testbed_dir / "webhook", ("--kubeconfig", str(webhook_kubeconfig(admission_bed,
                                                                                     testbed_dir / "webhook")),
                                               "--provider-writer", "group:system:masters"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def webhook(admission_bed: KubeTestBed, webhook_server: Webhook) -> Webhook:
    """The webhook running and honoured by the API server (a test that stops or unregisters it sets
    `honoured = False`, and it is started and registered again here)."""
    if webhook_server.process is not None and webhook_server.process.popen.poll() is not None:
        webhook_server.stop()  # it died: a test's failure, not the next test's
    if webhook_server.process is None:
        webhook_server.start()
    if webhook_server.honoured:
        return webhook_server
    register(admission_bed, webhook_server.base_url, webhook_server.ca.pem)
    ns = fresh_namespace(admission_bed, "canary")
    canary = parser_cr(ns)
    canary["spec"]["base"]["env"]["not-a-key"] = "x"
    bed = admission_bed
    with bed.as_user(EDITOR) as editor, bed.as_user(OPERATOR) as operator, bed.as_user(APPROVER) as approver:
        eventually("the validating webhook to be honoured", lambda: "applications.apprafter.io" in apply(
            editor, bed, canary, dry_run=True).json().get("message", "") or None)
        pending = plan(ns, name="canary")
        ok(apply(operator, bed, pending))
        ok(merge_status(operator, bed, pending, {"phase": "pending-approval"}))
        eventually("the mutating webhook to be honoured", lambda: ok(merge_status(
            approver, bed, pending, {"phase": "approved"}, dry_run=True)).get("status", {}).get("approvedBy"))
    webhook_server.honoured = True
    return webhook_server
