"""Runs the real `apprafter` CLI (and so the real cue) the way a user does, and writes throwaway apps."""

from __future__ import annotations

import dataclasses
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
APPRAFTER = [sys.executable, "-m", "apprafter"]


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*APPRAFTER, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=120, check=False, input=stdin if stdin is not None else "")


def write_app(root: Path, text: str) -> Path:
    """A repo at root holding apprafter/Application.cue with text; returns the file."""
    app = root / "apprafter" / "Application.cue"
    app.parent.mkdir(parents=True, exist_ok=True)
    app.write_text(text)
    return app


MINIMAL = '''apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "demo"
spec: {
	base: {
		image: "ghcr.io/acme/demo:1.0.0"
		expose: port: 8080
	}
	environments: {
		dev: {}
		prod: replicas: 2
	}
}
'''

# Appended to MINIMAL (with `import "list"` in front): an evaluation no budget can afford, feeding the document
# (a hidden field nothing uses is never evaluated).
RUNAWAY = '\n_burn: [for i in list.Range(0, 100000000, 1) {i * 2}]\nspec: base: replicas: len(_burn)\n'


@dataclasses.dataclass(frozen=True)
class Capped:
    """A finished CLI run made under a hard memory cap."""

    returncode: int
    stdout: str
    stderr: str


def run_capped(*args: str, memory_mb: int, cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float = 120) -> Capped:
    """Run the CLI with a hard RLIMIT_DATA of memory_mb over its whole process tree's each process: a run that
    needed more fails (MemoryError, a crash), so a clean result proves the work stayed under it. `timeout`
    only guards against a hang (never a speed check)."""
    limit = memory_mb << 20

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    result = subprocess.run([*APPRAFTER, *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                            text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL, preexec_fn=cap)
    return Capped(result.returncode, result.stdout, result.stderr)


# One problem per line: `file:line:col: field: message`, `file: message`, `argocd: ...`, `apprafter: ...`.
PROBLEM_LINE = re.compile(r"^(?:[^\s:][^:]*?(?::\d+:\d+)?|apprafter|argocd): \S.*$")


def assert_clean_failure(result: Capped | subprocess.CompletedProcess[str], code: int | None = None) -> list[str]:
    """Exit 1 or 2 (or `code`), nothing on stdout, one well-formed line per problem and no traceback."""
    assert result.returncode == code if code is not None else result.returncode in (1, 2), result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines and "Traceback" not in result.stderr, result.stderr
    for line in lines:
        assert PROBLEM_LINE.match(line), line
    return lines
