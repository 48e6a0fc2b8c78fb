"""`stack plan`: a stack change rolled up into the same plan JSON and MigrationPlan shape as `apprafter plan`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.platform_stack.conftest import built_tgz, cli
from tests.platform_stack.test_classify import _next_release
from tests.testbed.kube import KubeTestBed

PLAN_KEYS = {"environment", "gated", "primary", "classifications", "changes", "approvedSpecHash", "migrationPlan"}


def test_stack_change_becomes_a_platform_migration_plan(source_copy: Path, tmp_path: Path) -> None:
    old = built_tgz(tmp_path / "old", "--source", str(source_copy))
    same = cli("stack", "plan", "--from", str(old), "--to", str(old), "--format", "json", "--detailed-exitcode")
    assert same.returncode == 0, same.stderr
    nothing = json.loads(same.stdout)
    assert (nothing["gated"], nothing["primary"], nothing["approvedSpecHash"], nothing["migrationPlan"]) == (
        False, "safe", None, None)
    _next_release(source_copy)
    new = built_tgz(tmp_path / "new", "--source", str(source_copy))
    result = cli("stack", "plan", "--from", str(old), "--to", str(new), "--format", "json", "--detailed-exitcode")
    assert result.returncode == 2, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == PLAN_KEYS
    assert out["gated"] and out["primary"] == "data-migration"
    assert set(out["classifications"]) == {"requires-restart", "data-migration"}
    fields = {c["field"]: c for c in out["changes"]}
    pg = fields["components.cloudnative-pg.source.targetRevision"]
    assert (pg["from"], pg["to"], pg["classification"]) == ("0.25.0", "0.26.0", "data-migration")
    assert fields["components.argocd.source.targetRevision"]["classification"] == "requires-restart"
    plan = out["migrationPlan"]
    assert plan["kind"] == "MigrationPlan" and plan["spec"]["scope"]["type"] == "platform"
    assert plan["spec"]["trigger"]["approvedSpecHash"] == out["approvedSpecHash"]


@pytest.mark.testbed
def test_platform_migration_plan_passes_a_server_side_dry_run(source_copy: Path, tmp_path: Path,
                                                              kube: KubeTestBed) -> None:
    old = built_tgz(tmp_path / "old", "--source", str(source_copy))
    _next_release(source_copy)
    new = built_tgz(tmp_path / "new", "--source", str(source_copy))
    out = json.loads(cli("stack", "plan", "--from", str(old), "--to", str(new), "--format", "json").stdout)
    crds = tmp_path / "crds.yaml"
    crds.write_text(cli("crds").stdout)
    kube.install_crds([crds])
    stored = kube.dry_run_apply([out["migrationPlan"]], namespace="apprafter-system")[0]
    assert stored["spec"] == out["migrationPlan"]["spec"]
