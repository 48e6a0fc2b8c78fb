"""`apprafter version`, shell completion (environment names from the repository), colour off by NO_COLOR and
--no-color, and doctor's supported range."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import subprocess
import sys
from importlib.metadata import version as installed
from pathlib import Path

import pytest

from renderer.load import schema_text
from tests.renderer.helpers import MINIMAL, run_cli, write_app
from toolchain.tools import TOOLS


def test_version_names_apprafter_cue_and_the_schema() -> None:
    info = json.loads(run_cli("version", "-o", "json").stdout)
    assert info["apprafter"] == {"version": installed("apprafter-render"), "distribution": "apprafter-render"}
    cue = info["cue"]
    assert (cue["version"], cue["ok"], cue["supported"]) == (TOOLS["cue"].pinned, True, ">= v0.17.0, < v0.18.0")
    assert info["schema"] == {"apiVersion": "apprafter.io/v1alpha1",
                              "sha256": hashlib.sha256(schema_text().encode()).hexdigest()[:12]}
    text = run_cli("version").stdout.splitlines()
    assert text[0] == f"apprafter {installed('apprafter-render')} (apprafter-render)"
    assert text[1] == f"cue       {cue['version']} at {cue['path']} (supported: >= v0.17.0, < v0.18.0)"


def test_doctor_says_the_supported_range() -> None:
    result = run_cli("doctor")
    assert result.returncode == 0
    assert f"(pinned {TOOLS['cue'].pinned}; supported >= v0.17.0, < v0.18.0)" in result.stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_call_back_into_apprafter(shell: str) -> None:
    result = run_cli("completion", shell)
    assert result.returncode == 0 and "_APPRAFTER_COMPLETE" in result.stdout and f"{shell}_complete" in result.stdout


def complete(cwd: Path, words: str) -> list[str]:
    """What bash completion offers for the last word of `words` (click's protocol, as the script calls it)."""
    parts = words.split(" ")
    env = {**os.environ, "_APPRAFTER_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(parts) - 1)}
    out = subprocess.run([sys.executable, "-m", "apprafter"], cwd=cwd, env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return [line.split(",", 1)[1] for line in out.splitlines() if line]


def test_environment_names_complete_from_the_repository(tmp_path: Path) -> None:
    write_app(tmp_path, MINIMAL.replace("dev: {}", "dev: {}\n\t\tstaging: {}"))
    assert complete(tmp_path, "apprafter render . -e ") == ["dev", "prod", "staging"]
    assert complete(tmp_path, "apprafter render . --env st") == ["staging"]
    assert complete(tmp_path, "apprafter plan --from . --to . -e p") == ["prod"]
    assert complete(tmp_path, "apprafter ren") == ["render"]
    other = tmp_path / "apps" / "shop"  # completion follows the PATH argument, also before the option is complete
    write_app(other, MINIMAL.replace("dev: {}", "qa: {}"))
    assert complete(tmp_path, "apprafter render apps/shop -e ") == ["prod", "qa"]
    assert complete(tmp_path, "apprafter render apps/shop --mode cr --env q") == ["qa"]
    assert complete(tmp_path, "apprafter plan apps/shop -e ") == ["prod", "qa"]
    broken = tmp_path / "broken"
    write_app(broken, "spec: {")
    assert complete(broken, "apprafter render . -e ") == []  # a completion never prints an error


def on_tty(argv: list[str], env: dict[str, str]) -> str:
    leader, follower = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "apprafter", *argv], stdout=follower, stderr=subprocess.PIPE,
                          env={**os.environ, **env}, timeout=120, check=False)
    os.close(follower)
    text = os.read(leader, 65536).decode()
    os.close(leader)
    assert proc.returncode == 0, proc.stderr
    return text


def test_colour_is_off_with_no_color_or_the_flag(tmp_path: Path) -> None:
    public = MINIMAL.replace("expose: port: 8080", 'expose: {port: 8080, network: "public"}')
    old, new = write_app(tmp_path / "a", MINIMAL), write_app(tmp_path / "b", public)
    argv = ["plan", "--from", str(old), "--to", str(new), "-e", "prod"]
    assert "\x1b[" in on_tty(argv, {"NO_COLOR": ""})
    assert "\x1b[" not in on_tty(argv, {"NO_COLOR": "1"})
    assert "\x1b[" not in on_tty([*argv, "--no-color"], {"NO_COLOR": ""})
