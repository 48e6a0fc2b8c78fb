"""Shared by the benchmark scripts: time a command, and lay out the exact files `render` gives cue."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from renderer.load import locate, read_source, write_module


def timed(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    """Wall time of one run of argv (output discarded; a failure raises)."""
    return timed_cpu(argv, cwd, env)[0]


def timed_cpu(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall time, CPU time) of one run of argv, the CPU time with every process it waited for (cue too).

    On a shared, loaded machine the wall time also counts waiting for a core; the CPU time does not.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, argv)
    return wall, usage.ru_utime + usage.ru_stime


def bare_cue_package(app: Path, into: Path) -> Path:
    """The module (schema package, user package, binding) exactly as `render` hands it to cue, for a bare
    `cue export --out json .` in the returned directory."""
    into.mkdir(parents=True, exist_ok=True)
    write_module(into, read_source(*locate(app)))
    return into
