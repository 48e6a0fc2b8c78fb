"""`apprafter plan [PATH]` as terraform plan: no flags in a repository (the merge-base with the default branch, and
how it was found), a first deployment's additions for review, the last app's removal, and `validate -o json` on
invalid input; with the real cue and git."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli.monorepo import app_text, git
from tests.renderer.helpers import run_cli, write_app

SHOP = app_text("shop", network="public", needs="\t\tneeds: pg: {}\n")
BASE_LINE = "apprafter plan: comparing with git:{commit} (the merge-base of HEAD and {branch})\n"


def repository(root: Path, branch: str = "main", app: str | None = None) -> Path:
    """A repository whose first commit is on `branch` (with `app` at its root, when given)."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", branch)
    (root / "README").write_text("shop\n")
    if app is not None:
        write_app(root, app)
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    return root


def short(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "rev-parse", "--short", rev).strip()


def test_plan_without_flags_lists_a_first_deployment_for_review(tmp_path: Path) -> None:
    repo = repository(tmp_path / "shop")
    base = short(repo)
    git(repo, "checkout", "-qb", "feature")
    write_app(repo, SHOP)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "the app")
    result = run_cli("plan", "-e", "prod", "--detailed-exitcode", cwd=repo)
    assert result.returncode == 0, result.stderr  # a first deployment gates nothing
    assert result.stderr == BASE_LINE.format(commit=base, branch="main")
    assert result.stdout == (
        "apprafter plan: shop, environment prod (.): first deployment, no baseline to compare\n\n"
        "  + expose.network: (absent) -> public  [security-boundary, AR-SB004] the blast radius widens from the "
        "cluster to the public Gateway: shop.prod.apps.example.com\n"
        "  + needs.pg: (absent) -> {}  [review, AR-RV001] a new pg claim is provisioned\n"
        "  + expose.port: (absent) -> 8080  [safe, AR-S009] part of the network change above\n"
        "  + health.readiness: (absent) -> TCP :8080  [safe, AR-S015] readiness probe added: rolled out like any "
        "deploy\n\n"
        "Plan: 4 to add, 2 for review (security-boundary, review). Not gated: a first deployment has no baseline, so "
        "the cluster applies it without approval.\n\n"
        "All: 1 app-environment, 0 gated (1 first deployment).\n")
    document = json.loads(run_cli("plan", ".", "-o", "json", cwd=repo).stdout)
    (prod,) = [p for p in document["plans"] if p["environment"] == "prod"]
    assert (prod["status"], prod["gated"], prod["primary"], prod["approvedSpecHash"]) == (
        "first-deployment", False, "security-boundary", None)
    assert prod["classifications"] == ["security-boundary", "review", "safe"]
    same = run_cli("plan", "--all", ".", "-o", "json", cwd=repo)  # --all DIR is PATH, kept for scripts
    assert json.loads(same.stdout) == document


def test_the_default_branch_is_origin_head_else_main_else_master(tmp_path: Path) -> None:
    upstream = repository(tmp_path / "upstream", "trunk", SHOP)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))  # origin/HEAD -> origin/trunk
    fork_point = short(clone)
    git(clone, "branch", "main")  # a local main elsewhere does not win over origin/HEAD
    git(clone, "checkout", "-qb", "feature")
    write_app(clone, SHOP.replace("1.0.0", "1.1.0"))
    git(clone, "commit", "-qam", "a new tag")
    git(clone, "checkout", "-q", "main")
    git(clone, "commit", "-q", "--allow-empty", "-m", "main moves on")
    git(clone, "checkout", "-q", "feature")
    result = run_cli("plan", cwd=clone)
    assert result.returncode == 0 and result.stderr == BASE_LINE.format(commit=fork_point, branch="origin/trunk")
    assert "image: ghcr.io/acme/shop:1.0.0 -> ghcr.io/acme/shop:1.1.0  [safe, AR-S007]" in result.stdout
    explicit = run_cli("plan", "--from", "git:HEAD", cwd=clone)  # --from wins, and nothing is said
    assert explicit.returncode == 0 and explicit.stderr == "" and "0 gated (2 unchanged)" in explicit.stdout

    old = repository(tmp_path / "old", "master", SHOP)
    assert run_cli("plan", cwd=old).stderr == BASE_LINE.format(commit=short(old), branch="master")


def test_no_default_branch_and_outside_git_say_what_to_pass(tmp_path: Path) -> None:
    odd = repository(tmp_path / "odd", "develop", SHOP)
    result = run_cli("plan", cwd=odd)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (".: no default branch to plan against (refs/remotes/origin/HEAD is not set, no local "
                             "main or master): pass --from git:<rev>, or run `git remote set-head origin --auto`\n")
    loose = tmp_path / "loose"
    write_app(loose, SHOP)
    outside = run_cli("plan", ".", "--detailed-exitcode", cwd=loose)
    assert (outside.returncode, outside.stdout) == (1, "")
    assert outside.stderr == (".: not inside a git repository, so there is no default --from: pass --from OLD (a "
                              "directory, a .cue file, an Application CR or git:<rev>)\n")
    both = run_cli("plan", ".", "--to", ".", "-e", "prod", cwd=loose)
    assert both.returncode == 1 and "--to NEW plans one app: not with PATH or --all" in both.stderr


def test_a_claim_added_to_a_running_app_is_for_review_and_not_gated(tmp_path: Path) -> None:
    repo = repository(tmp_path / "shop", app=SHOP)
    git(repo, "checkout", "-qb", "cache")
    write_app(repo, SHOP.replace("needs: pg: {}", "needs: {pg: {}, redis: {}}"))
    result = run_cli("plan", "-e", "prod", "--detailed-exitcode", "--from", "git:main", cwd=repo)
    assert result.returncode == 0, result.stderr  # review-class: listed, never gated (no MigrationPlan)
    assert result.stdout == (
        "apprafter plan: shop, environment prod (.)\n\n"
        "  + needs.redis: (absent) -> {}  [review, AR-RV001] a new redis claim is provisioned\n\n"
        "Plan: 1 change, 0 gated. Not gated: applies without approval.\n\n"
        "All: 1 app-environment, 0 gated (1 changed).\n")
    (entry,) = json.loads(run_cli("plan", "-e", "prod", "-o", "json", "--from", "git:main", cwd=repo).stdout)["plans"]
    assert (entry["gated"], entry["primary"], entry["classifications"], entry["approvedSpecHash"],
            entry["migrationPlanName"]) == (False, "review", ["review"], None, None)


def test_the_last_app_removed_is_planned(tmp_path: Path) -> None:
    repo = repository(tmp_path / "shop", app=SHOP)
    git(repo, "checkout", "-qb", "retire")
    git(repo, "rm", "-rq", "apprafter")
    result = run_cli("plan", "--detailed-exitcode", cwd=repo)
    assert result.returncode == 2, result.stderr  # a removal counts as gated
    assert result.stdout.rstrip().splitlines()[-1] == "All: 2 app-environments, 2 gated (2 removed)."
    assert "- needs.pg: {} -> (absent)  [data-migration, AR-DM001]" in result.stdout
    one = run_cli("plan", "apprafter/Application.cue", "-e", "prod", "-o", "json", cwd=repo)  # the file's path
    (entry,) = json.loads(one.stdout)["plans"]
    assert (entry["status"], entry["gated"], entry["migrationPlanName"]) == ("removed", True, None)
    nothing = run_cli("plan", "--from", "git:HEAD~0", "elsewhere", cwd=repo)
    assert nothing.returncode == 1 and nothing.stderr == (
        "elsewhere: no app to plan: no apprafter/Application.cue below it, neither here nor in git:HEAD~0\n")


def test_validate_json_and_yaml_always_print_the_report(tmp_path: Path) -> None:
    write_app(tmp_path, SHOP.replace("needs: pg: {}", 'needs: pg: {sise: "small"}'))
    line = ("apprafter/Application.cue:8:15: spec.base.needs.pg.sise: field not allowed; did you mean `size`?\n")
    problem = {"file": "apprafter/Application.cue", "line": 8, "col": 15, "field": "spec.base.needs.pg.sise",
               "message": "field not allowed; did you mean `size`?"}
    as_json = run_cli("validate", "-o", "json", cwd=tmp_path)
    assert (as_json.returncode, as_json.stderr) == (1, line)
    assert json.loads(as_json.stdout) == {"valid": False, "apps": [], "problems": [problem]}
    as_yaml = run_cli("validate", "-o", "yaml", cwd=tmp_path)
    assert (as_yaml.returncode, as_yaml.stderr) == (1, line)
    assert yaml.safe_load(as_yaml.stdout) == {"valid": False, "apps": [], "problems": [problem]}
    text = run_cli("validate", cwd=tmp_path)
    assert (text.returncode, text.stdout, text.stderr) == (1, "", line)
    write_app(tmp_path, SHOP)
    valid = run_cli("validate", "-o", "json", cwd=tmp_path)
    assert valid.returncode == 0 and valid.stderr == ""
    assert json.loads(valid.stdout) == {"valid": True, "problems": [], "apps": [
        {"file": "apprafter/Application.cue", "app": "shop", "environments": ["dev", "prod"], "valid": True,
         "warnings": []}]}


def test_a_rename_is_a_removal_and_a_first_deployment_never_a_migration_plan(tmp_path: Path) -> None:
    """Issue 43: baselines are keyed by namespace, app and environment, so a renamed app is the old one removed (its
    claims' data kept by retention) and the new one deployed first; plan named a MigrationPlan that would never
    exist."""
    repo = repository(tmp_path / "shop", app=SHOP)
    write_app(repo, SHOP.replace('name: "shop"', 'name: "store"'))
    for args in (("plan", "-e", "prod", "--from", "git:HEAD"),
                 ("plan", "--from", "git:HEAD", "--to", ".", "-e", "prod")):
        result = run_cli(*args, cwd=repo)
        assert result.returncode == 0, result.stderr
        headers = [line for line in result.stdout.splitlines() if line.startswith("apprafter plan: ")]
        where = "." if "--to" not in args else "apprafter/Application.cue"
        assert headers == [
            f"apprafter plan: shop, environment prod ({where}): renamed to store: the removal of shop (its claims' "
            "data kept by retention), then the first deployment of store; no MigrationPlan",
            f"apprafter plan: store, environment prod ({where}): renamed from shop: the first deployment of store "
            "(new, empty claims), after the removal of shop"]
        assert "  - needs.pg: {} -> (absent)  [data-migration, AR-DM001] pg: its claim goes; its data is kept " \
               "(retention: no approved plan removes the need), for the same app and need" in result.stdout
        assert "MigrationPlan:" not in result.stdout and "AR-DM002" not in result.stdout
    document = json.loads(run_cli("plan", ".", "-e", "prod", "--from", "git:HEAD", "-o", "json", cwd=repo).stdout)
    assert [(p["app"], p["status"], p["migrationPlanName"], p["renamed"]) for p in document["plans"]] == [
        ("shop", "removed", None, {"from": "shop", "to": "store"}),
        ("store", "first-deployment", None, {"from": "shop", "to": "store"})]
    markdown = run_cli("plan", ".", "--from", "git:HEAD", "-o", "markdown", cwd=repo).stdout
    assert "approve MigrationPlan" not in markdown
    assert "Renamed to `store` in this pull request: the cluster keys a deployment by namespace, app and " \
           "environment, so this is the removal of `shop`" in markdown
    unchanged = run_cli("plan", ".", "--from", "git:HEAD", "-o", "json", cwd=repo.parent / "shop")
    assert unchanged.returncode == 0
