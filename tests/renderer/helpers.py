"""Runs the real `apprafter` CLI (and so the real cue) the way a user does, and writes throwaway apps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
APPRAFTER = [sys.executable, "-m", "apprafter"]


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*APPRAFTER, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=120, check=False)


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
