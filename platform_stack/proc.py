"""Runs an external tool with a timeout and a scrubbed environment, mapping failures to StackToolError."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from platform_stack.errors import StackToolError
from toolchain.tools import remedy, resolve, scrubbed_env

DEFAULT_TIMEOUT = 120.0


def tool_path(name: str) -> Path:
    """A supported binary for `name` (a ToolError carrying the remedy when it is missing)."""
    return resolve(name)


def run(name: str, args: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run tool `name` with `args`; returns the completed process (callers judge the exit code)."""
    binary = tool_path(name)
    with tempfile.TemporaryDirectory(prefix=f"apprafter-{name}-") as home:
        extra = dict(env or {})
        if name == "cue":  # a private module cache: never the user's, never shared between runs
            extra.setdefault("CUE_CACHE_DIR", str(Path(home) / "cue-cache"))
        full_env = scrubbed_env(Path(home), extra)
        try:
            return subprocess.run([str(binary), *args], cwd=cwd, env=full_env, input=stdin,
                                  capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise StackToolError(f"{name} timed out after {timeout:.0f}s: {' '.join(args[:2])}") from exc
        except OSError as exc:
            raise StackToolError(f"{name} could not be started ({exc}): {remedy(name)}") from exc
