"""`apprafter app scaffold` and `apprafter app rollback`, the app commands without a cluster, run as a user runs
them (the real cue and git)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from apprafter.app_local import PRESETS
from tests.renderer.helpers import run_cli

APP = "apprafter/Application.cue"


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_validates_as_written(tmp_path: Path, preset: str) -> None:
    where = tmp_path / "Shop_Front"
    where.mkdir()
    made = run_cli("app", "scaffold", "--preset", preset, cwd=where)
    assert made.returncode == 0, made.stderr
    assert made.stdout == ""
    text = (where / APP).read_text()
    assert 'metadata: name: "shop-front"' in text  # the directory's name, as a DNS label
    assert f"port: {PRESETS[preset].port}" in text
    checked = run_cli("validate", ".", cwd=where)
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr == f"{APP}: valid (prod, staging)\n"


def test_needs_and_public_give_the_claims_env_and_a_public_endpoint(tmp_path: Path) -> None:
    made = run_cli("app", "scaffold", "--preset", "python", "--name", "shop", "--image", "ghcr.io/acme/shop:1.0.0",
                   "--public", "--needs", "redis", "--needs", "pg", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    rendered = run_cli("render", ".", "-e", "prod", "--mode", "manifests", "-o", "name", cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    names = rendered.stdout.split()
    assert {"resourceclaim.apprafter.io/shop-pg", "resourceclaim.apprafter.io/shop-redis",
            "httproute.gateway.networking.k8s.io/shop"} <= set(names)
    text = (tmp_path / APP).read_text()
    for line in ("DATABASE_URL:     claim.pg.url", "REDIS_PREFIX:     claim.redis.prefix", 'network: "public"',
                 'image: "ghcr.io/acme/shop:1.0.0"'):
        assert line in text


def test_scaffold_keeps_an_existing_file_and_checks_what_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "apprafter").mkdir()
    (tmp_path / APP).write_text("mine\n")
    kept = run_cli("app", "scaffold", "--preset", "go", cwd=tmp_path)
    assert (kept.returncode, kept.stderr) == (1, f"{APP}: exists: pass --force to overwrite it\n")
    assert (tmp_path / APP).read_text() == "mine\n"
    bad = run_cli("app", "scaffold", "--preset", "go", "--force", "--image", "ghcr.io/acme/Shop:1", cwd=tmp_path)
    assert bad.returncode == 1
    assert "the repository 'acme/Shop' must be lowercase" in bad.stderr
    assert (tmp_path / APP).read_text() == "mine\n"  # nothing written from a failed check


def _git(where: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, check=True, timeout=60,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin",
                               "HOME": str(where)})
    return done.stdout


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A repository whose app went from 2 to 3 prod replicas, then to another image repository (a gated change)."""
    assert run_cli("app", "scaffold", "--preset", "go", "--name", "shop", "--image", "ghcr.io/acme/shop:1.0.0",
                   cwd=tmp_path).returncode == 0
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "shop")
    app = tmp_path / APP
    app.write_text(app.read_text().replace("prod: replicas: 2", "prod: replicas: 3"))
    _git(tmp_path, "commit", "-qam", "three")
    app.write_text(app.read_text().replace("ghcr.io/acme/shop:1.0.0", "ghcr.io/other/shop:1.0.0"))
    _git(tmp_path, "commit", "-qam", "moved")
    return tmp_path


def test_rollback_shows_the_plan_of_going_back_and_changes_nothing(history: Path) -> None:
    before = (history / APP).read_text()
    shown = run_cli("app", "rollback", cwd=history)
    assert shown.returncode == 0, shown.stderr
    assert "~ image: ghcr.io/other/shop:1.0.0 -> ghcr.io/acme/shop:1.0.0  [security-boundary" in shown.stdout
    assert "MigrationPlan: shop-prod-" in shown.stdout  # going back is a gated change too, named before the push
    three = _git(history, "rev-parse", "--short", "HEAD^").strip()
    assert shown.stderr == (f"nothing changed; to roll back: git checkout {three} -- {APP} && git commit -m 'Roll "
                            f"back {APP} to {three} (three)' (or run again with --commit), then git push\n")
    assert (history / APP).read_text() == before
    assert _git(history, "status", "--porcelain") == ""


def test_rollback_commit_makes_the_commit_and_to_picks_the_revision(history: Path) -> None:
    first = _git(history, "rev-list", "--max-parents=0", "HEAD").strip()
    done = run_cli("app", "rollback", "--to", first, "--commit", cwd=history)
    assert done.returncode == 0, done.stderr
    assert "~ replicas: 3 -> 2" in done.stdout
    assert (history / APP).read_bytes() == _git(history, "show", f"{first}:{APP}").encode()
    assert _git(history, "log", "-1", "--format=%s").strip() == f"Roll back {APP} to {first[:7]} (shop)"
    assert _git(history, "status", "--porcelain") == ""
    again = run_cli("app", "rollback", "--to", first, cwd=history)
    assert (again.returncode, again.stderr) == (1, f"{APP}: is already as it was at {first}: nothing to roll back\n")


def test_rollback_refuses_a_file_with_uncommitted_changes(history: Path) -> None:
    (history / APP).write_text((history / APP).read_text() + "\n")
    refused = run_cli("app", "rollback", cwd=history)
    assert (refused.returncode, refused.stderr) == (1, f"{APP}: has changes not committed: commit or stash them "
                                                       "first\n")


def test_add_dry_run_prints_each_environments_argo_cd_application_from_the_checkout(history: Path) -> None:
    _git(history, "remote", "add", "origin", "https://me:ghp_notprinted@git.example.com/acme/shop.git")
    printed = run_cli("app", "add", "--dry-run", "-e", "prod", "--project", "team-a", cwd=history)
    assert printed.returncode == 0, printed.stderr
    app = yaml.safe_load(printed.stdout)
    assert app["metadata"]["name"] == "shop-prod"
    assert app["spec"]["source"] | {"plugin": None} == {
        "repoURL": "https://git.example.com/acme/shop.git", "path": ".", "targetRevision": "main", "plugin": None}
    assert (app["spec"]["project"], app["spec"]["destination"]["namespace"]) == ("team-a", "shop-prod")
    assert "ghp_notprinted" not in printed.stdout + printed.stderr
    assert printed.stderr.startswith("note: the login in the repository URL is left out")
    both = run_cli("app", "add", "--dry-run", cwd=history)
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(both.stdout)] == ["shop-prod", "shop-staging"]


def test_add_names_what_is_missing(history: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    no_origin = run_cli("app", "add", "--dry-run", cwd=history)
    assert (no_origin.returncode, no_origin.stdout) == (1, "")
    assert no_origin.stderr.endswith(": the repository has no remote `origin`: push it somewhere Argo CD can read, "
                                     "or pass --repo URL\n")
    unknown = run_cli("app", "add", "--dry-run", "-e", "qa", "--repo", "https://x/y.git", cwd=history)
    assert (unknown.returncode, unknown.stderr) == (1, f"{APP}: environment qa is not declared; declared: "
                                                       "prod, staging\n")
    loose = tmp_path_factory.mktemp("loose")
    assert run_cli("app", "scaffold", "--preset", "go", cwd=loose).returncode == 0
    outside = run_cli("app", "add", "--dry-run", cwd=loose)
    assert outside.returncode == 1
    assert "not in a git repository: Argo CD deploys from git" in outside.stderr
