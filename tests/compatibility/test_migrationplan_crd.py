"""The MigrationPlan CRD is in `apprafter crds`, and what `plan` produces passes a server-side dry run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

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
        "safe", "requires-restart", "data-migration", "breaking", "security-boundary"]
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def _gated_plan(tmp_path: Path) -> dict[str, Any]:
    old = write_app(tmp_path / "a", MINIMAL.replace("expose: port: 8080", 'expose: {port: 8080, network: "public"}'))
    new = write_app(tmp_path / "b", MINIMAL.replace('"ghcr.io/acme/demo:1.0.0"', '"ghcr.io/other/demo:1.0.0"\n\t\t'
                                                    'env: KEY: secret: "vendor/key"'))
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
    assert stored["spec"]["risks"]["classifications"] == out["classifications"]
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
