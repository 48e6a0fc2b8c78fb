"""`apprafter plan --all DIR --from git:REV` over a generated 50-app repository with additions, removals, gated and
soft changes, with the real cue and git; and the one-app plan's first deployment at a git revision."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli.monorepo import app_text, base_repo, git
from tests.renderer.helpers import assert_clean_failure, run_cli, write_app

COUNT = 50


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = base_repo(tmp_path_factory.mktemp("plan-all") / "repo", COUNT)
    apps = root / "apps"
    for i in (1, 2, 3):  # gated: public exposure (security-boundary)
        write_app(apps / f"app-{i:03d}", app_text(f"app-{i:03d}", network="public"))
    for i in (4, 6):  # soft: a new tag
        write_app(apps / f"app-{i:03d}", app_text(f"app-{i:03d}", tag="1.1.0"))
    for i in (7, 10):  # removed apps (app-010 had a pg need)
        shutil.rmtree(apps / f"app-{i:03d}")
    write_app(apps / "app-008", app_text("app-008", envs="dev"))  # prod removed
    write_app(apps / "app-009", app_text("app-009", envs="dev, prod, staging"))  # staging is new
    for name in ("new-a", "team/new-b"):  # new apps, one nested deeper
        write_app(apps / name, app_text(name.split("/")[-1]))
    return root


def plan(repo: Path, *args: str) -> dict[str, Any]:
    result = run_cli("plan", "--all", "apps", "--from", "git:main", "-o", "json", *args, cwd=repo)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def by_key(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["path"], p["environment"]): p for p in document["plans"]}


def test_every_app_and_environment_gets_its_verdict(repo: Path) -> None:
    document = plan(repo)
    entries = by_key(document)
    statuses = {key: e["status"] for key, e in entries.items() if e["status"] != "unchanged"}
    assert statuses == {
        **{(f"app-{i:03d}", env): "changed" for i in (1, 2, 3, 4, 6) for env in ("dev", "prod")},
        **{(f"app-{i:03d}", env): "removed" for i in (7, 10) for env in ("dev", "prod")},
        ("app-008", "prod"): "removed", ("app-009", "staging"): "first-deployment",
        **{(path, env): "first-deployment" for path in ("new-a", "team/new-b") for env in ("dev", "prod")},
    }
    assert document["summary"] == {"first-deployment": 5, "changed": 10, "unchanged": 85,
                                   "removed": 5, "gated": 11}
    public = entries[("app-001", "prod")]
    assert public["gated"] and public["primary"] == "security-boundary"
    assert public["migrationPlanName"].startswith("app-001-prod-")
    assert [c["rule"] for c in public["changes"]] == ["AR-SB004"]
    soft = entries[("app-004", "dev")]
    assert not soft["gated"] and [c["rule"] for c in soft["changes"]] == ["AR-S007"]
    gone = entries[("app-010", "prod")]  # classified as scaled to zero holding nothing, without a MigrationPlan
    assert gone["gated"] and gone["primary"] == "data-migration" and gone["migrationPlanName"] is None
    assert {c["rule"] for c in gone["changes"]} == {"AR-DM001", "AR-RR003", "AR-S009", "AR-S014"}
    assert gone["approvedSpecHash"] is None
    assert entries[("app-007", "dev")]["primary"] == "requires-restart"
    new = entries[("team/new-b", "prod")]  # a first deployment: its additions, classified, nothing gated
    assert new["app"] == "new-b" and not new["gated"] and new["approvedSpecHash"] is None
    assert [(c["rule"], c["field"], c["from"], c["to"]) for c in new["changes"]] == [
        ("AR-S009", "expose.network", None, "internal"), ("AR-S009", "expose.port", None, 8080),
        ("AR-S015", "health.readiness", None, "TCP :8080")]
    assert document["gated"] is True
    order = [(p["app"], p["environment"], p["path"]) for p in document["plans"]]
    assert order == sorted(order)


def test_the_migration_plan_names_are_the_ones_one_app_plans_print(repo: Path) -> None:
    entries = by_key(plan(repo))
    one = run_cli("plan", "--from", "git:main", "--to", "apps/app-002", "-e", "dev", "-o", "json", cwd=repo)
    assert json.loads(one.stdout)["migrationPlan"]["metadata"]["name"] == entries[("app-002", "dev")][
        "migrationPlanName"]


def test_environments_filter_and_a_directory_as_the_base_agree_with_git(repo: Path, tmp_path: Path) -> None:
    prod = plan(repo, "-e", "prod")
    assert {p["environment"] for p in prod["plans"]} == {"prod"}
    base = tmp_path / "base"
    git(repo, "worktree", "add", "-q", "--detach", str(base), "main")
    try:
        from_dir = json.loads(run_cli("plan", "--all", "apps", "--from", str(base / "apps"), "-o", "json",
                                      cwd=repo).stdout)
    finally:
        git(repo, "worktree", "remove", "--force", str(base))
    assert from_dir == plan(repo)


def test_detailed_exitcode_text_and_markdown_are_stable(repo: Path) -> None:
    gated = run_cli("plan", "--all", "apps", "--from", "git:main", "--detailed-exitcode", cwd=repo)
    assert gated.returncode == 2
    assert gated.stdout.rstrip().splitlines()[-1] == ("All: 105 app-environments, 11 gated (5 removed, 5 first "
                                                      "deployment, 10 changed, 85 unchanged).")
    first = run_cli("plan", "--all", "apps", "--from", "git:main", "-o", "markdown", cwd=repo)
    again = run_cli("plan", "--all", "apps", "--from", "git:main", "-o", "markdown", cwd=repo)
    assert first.stdout == again.stdout and first.stdout.startswith("## AppRafter plan\n")
    table = first.stdout.split("<details>")[0]
    assert first.stdout.count("<details>") == 20 and table.count("\n| `") == 20  # the 85 unchanged: counted


def test_every_problem_of_both_sides_is_reported_at_once(tmp_path: Path) -> None:
    repo = base_repo(tmp_path / "repo", 3)
    write_app(repo / "apps" / "app-001", app_text("app-001", extra="\t\treplicas: \"two\"\n"))
    git(repo, "commit", "-qam", "broken on main")
    write_app(repo / "apps" / "app-001", app_text("app-001"))  # fixed in the pull request
    write_app(repo / "apps" / "app-002", app_text("app-002", extra="\t\treplica: 2\n"))
    result = run_cli("plan", "--all", "apps", "--from", "git:main", "--detailed-exitcode", cwd=repo)
    assert result.returncode == 1 and result.stdout == ""
    assert [line.split(": ", 2)[:2] for line in result.stderr.splitlines()] == [
        ["apps/app-002/apprafter/Application.cue:8:3", "spec.base.replica"],
        ["git:main:apps/app-001/apprafter/Application.cue:8:13", "spec.base.replicas"]]


def test_an_empty_base_makes_every_app_a_first_deployment(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("x\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "empty")
    write_app(repo / "apps" / "one", app_text("one"))
    result = run_cli("plan", "--all", "apps", "--from", "git:main", "-o", "json", "--detailed-exitcode", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert [p["status"] for p in json.loads(result.stdout)["plans"]] == ["first-deployment"] * 2


def test_a_file_new_on_the_branch_is_a_first_deployment_not_an_error(tmp_path: Path) -> None:
    repo = base_repo(tmp_path / "repo", 1)
    write_app(repo / "apps" / "fresh", app_text("fresh"))
    result = run_cli("plan", "--from", "git:main", "--to", "apps/fresh", "-e", "prod", "--detailed-exitcode",
                     cwd=repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("apprafter plan: fresh, environment prod is new in apps/fresh: first deployment")
    typo = run_cli("plan", "--from", "git:mian", "--to", "apps/fresh", "-e", "prod", "--detailed-exitcode",
                   cwd=repo)
    assert typo.returncode == 1 and typo.stdout == ""
    assert typo.stderr.splitlines() == ["git:mian:apps/fresh/apprafter/Application.cue:1:1: unknown revision "
                                             "'mian' (is it fetched? a shallow clone needs fetch-depth: 0)"]


def test_both_sides_of_a_one_app_plan_report_their_problems(tmp_path: Path) -> None:
    old = write_app(tmp_path / "a", app_text("a", extra="\t\treplica: 2\n"))
    new = write_app(tmp_path / "b", app_text("a", extra="\t\treplicas: -1\n"))
    result = run_cli("plan", "--from", str(old), "--to", str(new), "-e", "prod")
    lines = assert_clean_failure(result, 1)
    assert len(lines) == 2 and any("spec.base.replica:" in line for line in lines) and any(
        "spec.base.replicas:" in line for line in lines)
