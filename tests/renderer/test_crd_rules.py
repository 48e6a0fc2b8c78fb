"""What the generated CRDs make the API server enforce by itself: immutable environment, typed status, columns."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from compatibility.crd import ALL_CRDS
from renderer.crds import crd_documents
from renderer.emit import dump_stream
from renderer.load import load
from renderer.render import render_loaded
from tests.renderer.helpers import EXAMPLES
from tests.testbed.kube import ApplyRejected, KubeTestBed, _rejected

pytestmark = pytest.mark.testbed

API = "apprafter.io/v1alpha1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@pytest.fixture(scope="module")
def bed(kube: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> KubeTestBed:
    path = tmp_path_factory.mktemp("crds") / "crds.yaml"
    path.write_text(dump_stream(crd_documents(ALL_CRDS)))
    kube.install_crds([path])
    return kube


def parser_cr(namespace: str) -> dict[str, Any]:
    cr: dict[str, Any] = render_loaded(load(EXAMPLES / "parser"), "prod", "cr", namespace).objects[0]
    return cr


def fresh_namespace(bed: KubeTestBed) -> str:
    name = f"crd-{uuid.uuid4().hex[:8]}"
    bed.ensure_namespace(name)
    return name


def write_status(bed: KubeTestBed, kind: str, name: str, namespace: str, status: dict[str, Any]) -> dict[str, Any]:
    info = bed.resource_for(API, kind)
    body = {"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": namespace}, "status": status}
    resp = bed.http.patch(info.path(name, namespace) + "/status", params={"fieldManager": "status-test",
                          "force": "true"}, content=json.dumps(body).encode(),
                          headers={"Content-Type": "application/apply-patch+yaml"})
    if resp.status_code >= 300:
        raise _rejected(resp, f"{kind} {namespace}/{name} status")
    result: dict[str, Any] = resp.json()
    return result


def condition(type_: str, status: str = "True") -> dict[str, Any]:
    return {"type": type_, "status": status, "lastTransitionTime": "2026-11-30T12:00:00Z", "reason": "Test",
            "message": "set by the test"}


def test_spec_environment_is_immutable_and_required(bed: KubeTestBed) -> None:
    ns = fresh_namespace(bed)
    cr = parser_cr(ns)
    bed.apply(cr)
    cr["spec"]["base"]["replicas"] = 5  # any other edit is fine
    bed.apply(cr)
    cr["spec"]["environment"] = "staging"
    with pytest.raises(ApplyRejected, match=r"spec\.environment is immutable"):
        bed.apply(cr)
    missing = parser_cr(ns)
    missing["metadata"]["name"] = "no-env"
    del missing["spec"]["environment"]
    with pytest.raises(ApplyRejected, match="environment: Required value"):
        bed.apply(missing)


def test_application_status_is_typed_and_conditions_are_a_map_by_type(bed: KubeTestBed) -> None:
    ns = fresh_namespace(bed)
    bed.apply(parser_cr(ns))
    stored = write_status(bed, "Application", "parser", ns, {
        "phase": "Ready", "observedGeneration": 1, "conditions": [condition("Ready"), condition("ClaimsReady")],
        "lastAppliedSpec": {"image": "ghcr.io/user/parser:1.4.2", "replicas": 3}, "image": "ghcr.io/user/parser:1.4.2"})
    assert stored["status"]["lastAppliedSpec"] == {"image": "ghcr.io/user/parser:1.4.2", "replicas": 3}
    assert [c["type"] for c in stored["status"]["conditions"]] == ["Ready", "ClaimsReady"]
    with pytest.raises(ApplyRejected, match=r"status\.phase"):
        write_status(bed, "Application", "parser", ns, {"phase": "Sleeping"})
    with pytest.raises(ApplyRejected, match=r"duplicate entries for key \[type=\"Ready\"\]"):
        write_status(bed, "Application", "parser", ns, {"conditions": [condition("Ready"), condition("Ready")]})
    with pytest.raises(ApplyRejected, match="reason"):
        broken = condition("Ready")
        del broken["reason"]
        write_status(bed, "Application", "parser", ns, {"conditions": [broken]})


def test_migrationplan_status_accepts_the_phases_and_the_approval_stamp(bed: KubeTestBed) -> None:
    ns = fresh_namespace(bed)
    plan = {"apiVersion": API, "kind": "MigrationPlan", "metadata": {"name": "p1", "namespace": ns}, "spec": {
        "scope": {"type": "application", "application": {"ref": {"name": "parser"}, "environment": "prod"}},
        "trigger": {"type": "need-removed", "field": "needs.pg", "approvedSpecHash": "sha256:" + "a" * 64},
        "risks": {"classification": "data-migration", "classifications": ["data-migration"], "reversible": False},
        "changes": [], "approvers": []}}
    bed.apply(plan)
    write_status(bed, "MigrationPlan", "p1", ns, {"phase": "pending-approval"})
    stored = write_status(bed, "MigrationPlan", "p1", ns, {"phase": "approved", "approvedBy": "alice",
                                                            "approvedAt": "2026-11-30T12:00:00Z"})
    assert stored["status"]["approvedBy"] == "alice"
    with pytest.raises(ApplyRejected, match=r"status\.phase"):
        write_status(bed, "MigrationPlan", "p1", ns, {"phase": "done"})


def test_kubectl_get_shows_environment_phase_and_ready(bed: KubeTestBed) -> None:
    ns = fresh_namespace(bed)
    bed.apply(parser_cr(ns))
    write_status(bed, "Application", "parser", ns, {"phase": "AwaitingMigrationApproval",
                                                    "conditions": [condition("Ready", "False")]})
    info = bed.resource_for(API, "Application")
    table = bed.http.get(info.path(None, ns), headers={"Accept": TABLE}).json()
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns[:5] == ["Name", "Environment", "Phase", "Ready", "Plan"]
    [row] = table["rows"]
    assert row["cells"][:4] == ["parser", "prod", "AwaitingMigrationApproval", "False"]


def test_health_bounds_from_the_cue_source_are_the_api_servers_own(bed: KubeTestBed) -> None:
    """The CRD carries every bound of `health` (the CUE schema's), for `health: false` beside a struct too."""
    ns = fresh_namespace(bed)
    cr = parser_cr(ns)
    cr["spec"]["base"]["health"] = {"readiness": {"path": "/healthz", "periodSeconds": 5}, "liveness": {}}
    cr["spec"]["environments"]["dev"]["health"] = False
    bed.apply(cr)
    stored = bed.get(API, "Application", "parser", ns)
    assert stored is not None and stored["spec"]["environments"]["dev"]["health"] is False
    assert stored["spec"]["base"]["health"]["readiness"] == {"path": "/healthz", "periodSeconds": 5}
    for probe, setting, value, says in [("readiness", "periodSeconds", 0, "greater than or equal to 1"),
                                        ("liveness", "failureThreshold", 121, "less than or equal to 120"),
                                        ("startup", "timeoutSeconds", 61, "less than or equal to 60"),
                                        ("readiness", "path", "healthz", "should match '\\^/"),
                                        ("readiness", "port", 70000, "less than or equal to 65535")]:
        bad = parser_cr(ns)
        bad["spec"]["base"]["health"] = {probe: {setting: value}}
        with pytest.raises(ApplyRejected, match=rf"spec\.base\.health\.{probe}\.{setting}: .*{says}"):
            bed.apply(bad)
    bad = parser_cr(ns)
    bad["spec"]["environments"]["prod"]["health"] = {"progressDeadlineSeconds": 10}
    with pytest.raises(ApplyRejected, match=r"spec\.environments\.prod\.health\.progressDeadlineSeconds: .*30"):
        bed.apply(bad)
