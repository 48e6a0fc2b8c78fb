"""`apprafter migration list | approve | reject` against the real API server, and kubeconfig resolution."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from compatibility.migrationplan import migration_plan
from compatibility.platform import PlatformChange, roll_up_platform
from tests.reconciler.helpers import (
    apply,
    claims_when_created,
    cr,
    edit,
    fresh_namespace,
    plan_phase,
    plans,
    wait,
    wait_phase,
    write_status,
)
from tests.reconciler.operator_proc import Operator
from tests.renderer.helpers import run_cli
from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import free_port

pytestmark = pytest.mark.testbed


def held(bed: KubeTestBed) -> tuple[str, str, str]:
    """An Application (uniquely named) waiting for approval: (namespace, app, plan)."""
    ns, name = fresh_namespace(bed, "cli"), f"cli-{uuid.uuid4().hex[:6]}"
    apply(bed, cr(ns, name=name))
    claims_when_created(bed, ns, [f"{name}-pg", f"{name}-redis"])
    wait_phase(bed, ns, "Ready", name)
    apply(bed, cr(ns, edit(replicas=0), name=name))
    st = wait_phase(bed, ns, "AwaitingMigrationApproval", name)
    wait("pending", lambda: plan_phase(bed, ns, st["migrationPlan"]) == "pending-approval" or None)
    return ns, name, st["migrationPlan"]


def platform_plan(bed: KubeTestBed, namespace: str) -> str:
    result = roll_up_platform([PlatformChange("cilium", "", "1.16.0", "1.17.0", "requires-restart", "minor upgrade")],
                              "1.0.0", "1.1.0")
    obj: dict[str, Any] = migration_plan(result)
    obj["metadata"]["namespace"] = namespace
    bed.apply(obj, field_manager="apprafter-platform")
    write_status(bed, "MigrationPlan", obj["metadata"]["name"], namespace, {"phase": "pending-approval"}, "platform")
    return str(obj["metadata"]["name"])


def cli(bed: KubeTestBed, *args: str, env: dict[str, str] | None = None) -> Any:
    return run_cli("migration", *args, "--kubeconfig", str(bed.kubeconfig), env=env)


def test_list_approve_and_the_operator_applies(bed: KubeTestBed, operator: Operator) -> None:
    ns, name, plan = held(bed)
    table = cli(bed, "list")
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "SCOPE", "TARGET", "ENVIRONMENT", "CLASS", "PHASE", "AGE"]
    [row] = [r.split() for r in rows if plan in r]
    assert row[:7] == [ns, plan, "application", name, "prod", "requires-restart", "pending-approval"]

    listed = cli(bed, "list", "-n", ns, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["kind"] == "List" and [p["metadata"]["name"] for p in doc["items"]] == [plan]
    assert "managedFields" not in doc["items"][0]["metadata"]

    approved = cli(bed, "approve", plan)  # no -n: the only plan of that name
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == f"migrationplan/{plan} approved (namespace {ns})\n"
    wait_phase(bed, ns, "Ready", name)
    wait("applied", lambda: plan_phase(bed, ns, plan) == "applied" or None)
    again = cli(bed, "approve", plan)
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr == (f"migrationplan/{plan}: cannot approve a plan in phase applied: only a pending-approval "
                            "plan can be approved\n")


def test_an_application_plan_is_rejected_by_a_git_revert(bed: KubeTestBed, operator: Operator) -> None:
    ns, _, plan = held(bed)
    result = cli(bed, "reject", plan)
    assert result.returncode == 1 and result.stdout == ""
    assert "revert the change in git" in result.stderr
    assert plan_phase(bed, ns, plan) == "pending-approval"


def test_a_platform_plan_is_rejected_and_names_are_resolved_per_namespace(bed: KubeTestBed) -> None:
    first, second = fresh_namespace(bed, "plat"), fresh_namespace(bed, "plat")
    plan = platform_plan(bed, first)
    platform_plan(bed, second)
    ambiguous = cli(bed, "reject", plan)
    assert ambiguous.returncode == 1
    assert f"exist in several namespaces ({', '.join(sorted([first, second]))}): pass -n NAMESPACE" in ambiguous.stderr
    done = cli(bed, "reject", plan, "-n", first)
    assert done.returncode == 0, done.stderr
    assert plan_phase(bed, first, plan) == "rejected" and plan_phase(bed, second, plan) == "pending-approval"
    missing = cli(bed, "approve", "no-such-plan", "-n", first)
    assert missing.returncode == 1 and "no MigrationPlan no-such-plan in namespace" in missing.stderr
    assert [p["metadata"]["name"] for p in plans(bed, second)] == [plan]


def test_kubeconfig_is_found_like_kubectl_finds_it(bed: KubeTestBed, tmp_path: Path) -> None:
    by_env = run_cli("migration", "list", "-o", "json", env={"KUBECONFIG": f"/nonexistent:{bed.kubeconfig}"})
    assert by_env.returncode == 0, by_env.stderr
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(bed.kubeconfig.read_text())
    by_home = run_cli("migration", "list", "-o", "json", env={"HOME": str(home), "KUBECONFIG": ""})
    assert by_home.returncode == 0, by_home.stderr
    nothing = run_cli("migration", "list", env={"HOME": str(tmp_path), "KUBECONFIG": ""})
    assert nothing.returncode == 2 and nothing.stdout == ""
    assert nothing.stderr.startswith("apprafter: no cluster configured: pass --kubeconfig PATH or set KUBECONFIG")
    missing = run_cli("migration", "list", "--kubeconfig", str(tmp_path / "absent"))
    assert missing.returncode == 2 and "--kubeconfig" in missing.stderr and "no such file" in missing.stderr


def test_an_unreachable_cluster_is_a_tool_failure(bed: KubeTestBed, tmp_path: Path) -> None:
    config = yaml.safe_load(bed.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    result = run_cli("migration", "list", "--kubeconfig", str(path))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("apprafter: cannot reach the API server")
