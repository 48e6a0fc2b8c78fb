"""`apprafter plan` end to end with the real cue: CUE file/dir, YAML/JSON CR, git:<rev>, formats, exit codes."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.renderer.helpers import MINIMAL, REPO, run_cli, write_app

JSON_KEYS = ["environment", "gated", "primary", "classifications", "changes", "approvedSpecHash", "migrationPlan"]
CHANGE_KEYS = ["rule", "field", "classification", "from", "to", "reason"]
PUBLIC = MINIMAL.replace("expose: port: 8080", 'expose: {port: 8080, network: "public"}')


def plan_json(*args: str, cwd: Path | None = None) -> dict[str, Any]:
    result = run_cli("plan", *args, "--format", "json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def test_json_output_has_exactly_the_documented_shape(tmp_path: Path) -> None:
    old, new = write_app(tmp_path / "a", PUBLIC), write_app(tmp_path / "b", MINIMAL)
    out = plan_json("--from", str(old), "--to", str(new.parent.parent), "--env", "prod")
    assert list(out) == JSON_KEYS
    assert out["environment"] == "prod" and out["gated"] is True and out["primary"] == "requires-restart"
    changes = out["changes"]
    assert isinstance(changes, list) and all(list(c) == CHANGE_KEYS for c in changes)
    assert [(c["rule"], c["field"], c["from"], c["to"]) for c in changes] == [
        ("AR-RR002", "expose.network", "public", "internal")]
    plan = out["migrationPlan"]
    assert isinstance(plan, dict) and plan["kind"] == "MigrationPlan"
    assert plan["spec"]["trigger"]["approvedSpecHash"] == out["approvedSpecHash"]


def test_nothing_gated_gives_safe_and_null_hash(tmp_path: Path) -> None:
    old = write_app(tmp_path / "a", MINIMAL)
    new = write_app(tmp_path / "b", MINIMAL.replace("demo:1.0.0", "demo:1.1.0"))
    out = plan_json("--from", str(old), "--to", str(new), "--env", "dev")
    assert out["gated"] is False and out["primary"] == "safe" and out["approvedSpecHash"] is None
    assert out["migrationPlan"] is None and out["classifications"] == ["safe"]
    same = plan_json("--from", str(old), "--to", str(old), "--env", "dev")
    assert same["changes"] == [] and same["classifications"] == [] and same["primary"] == "safe"


def test_detailed_exitcode(tmp_path: Path) -> None:
    old, new = write_app(tmp_path / "a", MINIMAL), write_app(tmp_path / "b", PUBLIC)
    gated = run_cli("plan", "--from", str(old), "--to", str(new), "--env", "dev", "--detailed-exitcode")
    assert gated.returncode == 2 and "AR-SB004" in gated.stdout
    plain = run_cli("plan", "--from", str(old), "--to", str(new), "--env", "dev")
    assert plain.returncode == 0
    clean = run_cli("plan", "--from", str(old), "--to", str(old), "--env", "dev", "--detailed-exitcode")
    assert clean.returncode == 0 and "No changes." in clean.stdout


def test_invalid_cue_is_exit_1_with_the_renderers_message(tmp_path: Path) -> None:
    old = write_app(tmp_path / "a", MINIMAL)
    new = write_app(tmp_path / "b", MINIMAL.replace("prod: replicas: 2", 'prod: replicas: "two"'))
    result = run_cli("plan", "--from", str(old), "--to", str(new), "--env", "prod", "--detailed-exitcode")
    assert result.returncode == 1 and result.stdout == ""
    rendered = run_cli("render", str(new), "--env", "prod")
    assert result.stderr == rendered.stderr
    assert result.stderr.startswith(f"{new}:") and "spec.environments.prod.replicas" in result.stderr


def test_undeclared_environment_in_to_is_an_error_and_new_in_to_is_a_first_deployment(tmp_path: Path) -> None:
    old = write_app(tmp_path / "a", MINIMAL)
    new = write_app(tmp_path / "b", MINIMAL.replace("dev: {}", "dev: {}\n\t\tqa: {}"))
    missing = run_cli("plan", "--from", str(new), "--to", str(old), "--env", "qa")
    assert missing.returncode == 1 and "environment 'qa' is not declared" in missing.stderr
    first = run_cli("plan", "--from", str(old), "--to", str(new), "--env", "qa", "--detailed-exitcode")
    assert first.returncode == 0 and "first deployment" in first.stdout


def test_cr_inputs_yaml_and_json_agree_with_cue(tmp_path: Path) -> None:
    new = tmp_path / "b"
    write_app(new, MINIMAL.replace("ghcr.io/acme/demo", "ghcr.io/other/demo"))
    old = write_app(tmp_path / "a", MINIMAL)
    rendered = run_cli("render", str(old), "--env", "prod").stdout
    (tmp_path / "old-cr.yaml").write_text(rendered)
    (tmp_path / "old-cr.json").write_text(json.dumps(yaml.safe_load(rendered)))
    outs = [plan_json("--from", str(src), "--to", str(new), "--env", "prod")
            for src in (old, tmp_path / "old-cr.yaml", tmp_path / "old-cr.json")]
    assert outs[0] == outs[1] == outs[2]
    assert outs[0]["primary"] == "security-boundary"


def test_a_cr_stamped_for_another_environment_is_refused(tmp_path: Path) -> None:
    old = write_app(tmp_path / "a", MINIMAL)
    cr = tmp_path / "dev.yaml"
    cr.write_text(run_cli("render", str(old), "--env", "dev").stdout)
    result = run_cli("plan", "--from", str(cr), "--to", str(old), "--env", "prod")
    assert result.returncode == 1 and "spec.environment" in result.stderr and "stamped for environment 'dev'" in \
        result.stderr


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    write_app(root, PUBLIC)
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "public")
    write_app(root, MINIMAL)
    _git(root, "commit", "-q", "-am", "internal")
    return root


def test_git_revision_of_the_current_repo(repo: Path) -> None:
    write_app(repo, MINIMAL.replace("prod: replicas: 2", "prod: replicas: 0"))
    against_head = plan_json("--from", "git:HEAD", "--to", ".", "--env", "prod", cwd=repo)
    assert [c["rule"] for c in against_head["changes"]] == ["AR-RR003"]
    two_revs = plan_json("--from", "git:HEAD~1", "--to", "git:HEAD", "--env", "prod", cwd=repo)
    assert [c["rule"] for c in two_revs["changes"]] == ["AR-RR002"]
    explicit = plan_json("--from", "git:HEAD~1:apprafter/Application.cue", "--to", "apprafter", "--env", "prod",
                         cwd=repo / "apprafter" / "..")
    assert explicit["approvedSpecHash"] != against_head["approvedSpecHash"]


def test_git_errors_name_the_revision(repo: Path) -> None:
    bad_rev = run_cli("plan", "--from", "git:no-such-rev", "--to", ".", "--env", "prod", cwd=repo)
    assert bad_rev.returncode == 1 and bad_rev.stderr.startswith("git:no-such-rev:apprafter/Application.cue:1:1:")
    write_app(repo, "spec: {")
    _git(repo, "commit", "-q", "-am", "broken")
    broken = run_cli("plan", "--from", "git:HEAD", "--to", "git:HEAD~1", "--env", "prod", cwd=repo)
    assert broken.returncode == 1 and broken.stderr.startswith("git:HEAD:apprafter/Application.cue:")
    option = run_cli("plan", "--from", "git:--output=x", "--to", ".", "--env", "prod", cwd=repo)
    assert option.returncode == 1 and not (repo / "x").exists()


def test_text_output_reads_like_a_plan_and_is_coloured_only_on_a_tty(tmp_path: Path) -> None:
    old, new = write_app(tmp_path / "a", MINIMAL), write_app(tmp_path / "b", PUBLIC)
    args = ["plan", "--from", str(old), "--to", str(new), "--env", "prod"]
    piped = run_cli(*args)
    assert "\x1b[" not in piped.stdout
    assert "~ expose.network: internal -> public  [security-boundary, AR-SB004]" in piped.stdout
    summary, named = piped.stdout.rstrip().splitlines()[-2:]
    assert summary.startswith("Plan: 1 change, 1 gated. Gated: security-boundary")
    assert named.startswith("MigrationPlan: demo-prod-") and "apprafter migration approve demo-prod-" in named
    leader, follower = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "apprafter", *args], stdout=follower, stderr=subprocess.PIPE,
                          cwd=REPO, timeout=120, check=False)
    os.close(follower)
    on_tty = os.read(leader, 65536).decode()
    os.close(leader)
    assert proc.returncode == 0 and "\x1b[1;31m" in on_tty
