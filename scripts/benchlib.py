"""Shared by the benchmark scripts: time a command, and lay out the exact files `render` gives cue."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from renderer.load import locate, read_source, write_module


def timed(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    """Wall time of one run of argv (output discarded; a failure raises)."""
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def bare_cue_package(app: Path, into: Path) -> Path:
    """The module (schema package, user package, binding) exactly as `render` hands it to cue, for a bare
    `cue export --out json .` in the returned directory."""
    into.mkdir(parents=True, exist_ok=True)
    write_module(into, read_source(*locate(app)))
    return into
