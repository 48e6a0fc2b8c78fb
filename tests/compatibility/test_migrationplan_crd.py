"""The MigrationPlan CRD is in `apprafter crds`, and what `plan` produces passes a server-side dry run."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from compatibility.authority import PENDING, PHASES, REACHABLE_FROM
from compatibility.migrationplan import migration_plan
from compatibility.platform import PlatformChange, roll_up_platform
from tests.renderer.helpers import MINIMAL, run_cli, write_app
from tests.testbed.kube import ApplyRejected, KubeTestBed

pytestmark = pytest.mark.testbed


def crds_output() -> list[dict[str, Any]]:
    result = run_cli("crds")
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.fixture(scope="module")
def kube_with_crds(kube: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> KubeTestBed:
    path = tmp_path_factory.mktemp("crds") / "crds.yaml"
    path.write_text(yaml.safe_dump_all(crds_output()))
    assert "migrationplans.apprafter.io" in kube.install_crds([path])
    return kube


def test_crds_lists_migrationplan_generated_from_its_cue_schema() -> None:
    by_name = {d["metadata"]["name"]: d for d in crds_output()}
    crd = by_name["migrationplans.apprafter.io"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["risks"]["properties"]["classification"]["enum"] == [
        "safe", "review", "requires-restart", "data-migration", "breaking", "security-boundary"]
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def _gated_plan(tmp_path: Path) -> dict[str, Any]:
    old = write_app(tmp_path / "a", MINIMAL.replace("expose: port: 8080", 'expose: {port: 8080, network: "public"}'))
    # Gated (a new repository, a secret reference), with a new claim riding along (review: listed, not gated).
    new = write_app(tmp_path / "b", MINIMAL.replace('"ghcr.io/acme/demo:1.0.0"', '"ghcr.io/other/demo:1.0.0"\n\t\t'
                                                    'env: KEY: secret: "vendor/key"\n\t\tneeds: pg: {}'))
    result = run_cli("plan", "--from", str(old), "--to", str(new), "--env", "prod", "--format", "json",
                     "--namespace", "demo-prod", "--approver", "alice@example.com")
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    assert out["gated"]
    return out


def test_the_plan_commands_migrationplan_passes_a_server_side_dry_run(kube_with_crds: KubeTestBed,
                                                                     tmp_path: Path) -> None:
    out = _gated_plan(tmp_path)
    obj = out["migrationPlan"]
    assert obj["metadata"]["namespace"] == "demo-prod"
    [stored] = kube_with_crds.dry_run_apply([obj])
    assert stored["spec"] == obj["spec"]  # nothing pruned: every field is in the schema
    assert stored["spec"]["risks"]["classifications"] == out["classifications"] == [
        "security-boundary", "requires-restart", "review"]
    assert [(c["rule"], c["classification"]) for c in stored["spec"]["changes"] if c["field"] == "needs.pg"] == [
        ("AR-RV001", "review")]
    assert [c["rule"] for c in stored["spec"]["changes"]] == [c["rule"] for c in out["changes"]]


def test_the_crd_rejects_a_plan_without_a_valid_hash_or_class(kube_with_crds: KubeTestBed, tmp_path: Path) -> None:
    obj = _gated_plan(tmp_path)["migrationPlan"]
    obj["spec"]["trigger"]["approvedSpecHash"] = ""
    with pytest.raises(ApplyRejected, match="approvedSpecHash"):
        kube_with_crds.dry_run_apply([obj])
    obj = _gated_plan(tmp_path)["migrationPlan"]
    obj["spec"]["risks"]["classification"] = "fine"
    with pytest.raises(ApplyRejected, match="classification"):
        kube_with_crds.dry_run_apply([obj])


def test_a_platform_scope_plan_has_the_same_shape(kube_with_crds: KubeTestBed) -> None:
    plan = roll_up_platform([
        PlatformChange("cnpg", "version", "1.24.1", "1.25.0", "data-migration", "1.25.0: data-migration"),
        PlatformChange("cilium", "values.hubble.enabled", False, True, "requires-restart", "1.6.0: restart"),
        PlatformChange("kyverno", "", None, {"version": "1.12.0"}, "safe", "new component"),
    ], "1.5.0", "1.6.0")
    obj = migration_plan(plan, approvers=["ops@example.com"])
    [stored] = kube_with_crds.dry_run_apply([obj])
    assert stored["metadata"]["namespace"] == "apprafter-system"
    assert stored["spec"]["scope"] == {"type": "platform", "platform": {
        "ref": {"name": "default", "namespace": "apprafter-system"}, "fromVersion": "1.5.0", "toVersion": "1.6.0"}}
    assert stored["spec"]["risks"]["classification"] == "data-migration"
    assert stored["spec"] == obj["spec"]


# --- the phase machine as CEL: the API server alone (no webhook here) holds compatibility.authority's table ----

def _path_to(phase: str | None) -> list[str]:
    """Phases to write, from a new plan, to reach `phase` (breadth-first over REACHABLE_FROM)."""
    paths: dict[str | None, list[str]] = {None: []}
    frontier: list[str | None] = [None]
    while frontier:
        here = frontier.pop(0)
        for nxt, sources in sorted(REACHABLE_FROM.items()):
            if here in sources and nxt not in paths:
                paths[nxt] = [*paths[here], nxt]
                frontier.append(nxt)
    return paths[phase]


def _status(kube: KubeTestBed, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    info = kube.resource_for(obj["apiVersion"], obj["kind"])
    resp = kube.http.patch(info.path(obj["metadata"]["name"], obj["metadata"]["namespace"]) + "/status",
                           json={"status": status}, headers={"Content-Type": "application/merge-patch+json"})
    if resp.status_code >= 300:
        raise ApplyRejected(resp.json().get("message", resp.text), resp.json(), resp.status_code)
    result: dict[str, Any] = resp.json()
    return result


def _plan(namespace: str, scope: str = "platform") -> dict[str, Any]:
    spec_scope = ({"type": "platform", "platform": {"ref": {"name": "default"}}} if scope == "platform" else
                  {"type": "application", "application": {"ref": {"name": "demo"}, "environment": "prod"}})
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "MigrationPlan",
            "metadata": {"name": f"p-{uuid.uuid4().hex[:8]}", "namespace": namespace},
            "spec": {"scope": spec_scope, "trigger": {"type": "t", "field": "f",
                                                      "approvedSpecHash": "sha256:" + "c" * 64},
                     "risks": {"classification": "breaking", "classifications": ["breaking"], "reversible": False},
                     "changes": [], "approvers": []}}


@pytest.mark.parametrize("before", [None, *PHASES])
def test_the_api_server_moves_phases_only_along_the_table(kube_with_crds: KubeTestBed, before: str | None) -> None:
    namespace = f"phases-{uuid.uuid4().hex[:6]}"
    for after in PHASES:
        obj = _plan(namespace)
        kube_with_crds.apply(obj)
        for step in _path_to(before):
            _status(kube_with_crds, obj, {"phase": step})
        try:
            stored = _status(kube_with_crds, obj, {"phase": after})
        except ApplyRejected as e:
            assert before not in REACHABLE_FROM[after], f"{before} -> {after}: {e}"
            assert f"status.phase may become {after} only from" in str(e)
        else:
            assert before in REACHABLE_FROM[after], f"{before} -> {after} was accepted"
            assert stored["status"]["phase"] == after


def test_the_api_server_keeps_the_other_plan_rules(kube_with_crds: KubeTestBed) -> None:
    namespace = f"phases-{uuid.uuid4().hex[:6]}"
    app_plan, platform_plan = _plan(namespace, "application"), _plan(namespace)
    for obj in (app_plan, platform_plan):
        kube_with_crds.apply(obj)
        _status(kube_with_crds, obj, {"phase": PENDING})
    with pytest.raises(ApplyRejected, match=r"status\.phase rejected is only for platform-scope plans"):
        _status(kube_with_crds, app_plan, {"phase": "rejected"})
    with pytest.raises(ApplyRejected, match=r"status\.phase cannot be removed"):
        _status(kube_with_crds, app_plan, {"phase": None})
    _status(kube_with_crds, platform_plan, {"phase": "approved", "approvedBy": "alice",
                                            "approvedAt": "2026-11-30T12:00:00Z"})
    with pytest.raises(ApplyRejected, match=r"status\.approvedBy never changes once stamped"):
        _status(kube_with_crds, platform_plan, {"approvedBy": "mallory"})
    with pytest.raises(ApplyRejected, match=r"status\.approvedAt never changes once stamped"):
        _status(kube_with_crds, platform_plan, {"approvedAt": None})
    changed = copy.deepcopy(platform_plan)
    changed["spec"]["approvers"] = ["mallory@example.com"]
    with pytest.raises(ApplyRejected, match="spec is immutable"):
        kube_with_crds.apply(changed)
    relabelled = copy.deepcopy(platform_plan)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert kube_with_crds.apply(relabelled)["metadata"]["labels"] == {"team": "a"}
