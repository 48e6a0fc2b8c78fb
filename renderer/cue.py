"""The one wrapper around the `cue` binary: scrubbed environment, time and memory budget, no shell."""

from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from renderer.errors import ToolFailure
from renderer.scratch import scratch_dir
from toolchain.tools import resolve

__all__ = ["Budget", "CueResult", "run_cue"]

DEFAULT_TIMEOUT_S = float(os.environ.get("APPRAFTER_CUE_TIMEOUT", "20"))
DEFAULT_MEMORY_MB = int(os.environ.get("APPRAFTER_CUE_MEMORY_MB", "1024"))


class CueResult(NamedTuple):
    """What cue printed and how it exited."""

    returncode: int
    stdout: str
    stderr: str


class Budget(ToolFailure):
    """cue ran out of its time or memory budget (the input's fault, but reported with a remedy)."""


def cue_binary() -> Path:
    """The pinned cue (a ToolFailure naming `make setup` when it is missing)."""
    return resolve("cue")


def _limit_memory(megabytes: int) -> None:
    # RLIMIT_DATA, not RLIMIT_AS: Go reserves large PROT_NONE arenas at start-up that AS would count.
    limit = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    # cue stays in our process group on purpose: Argo CD's SIGTERM to the group reaches it too.


def scrubbed_env(cache_dir: str) -> dict[str, str]:
    """Only what cue needs: no Argo CD, git or cloud credentials reach it."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": cache_dir,
        "CUE_CACHE_DIR": cache_dir,
        "CUE_REGISTRY": "none",  # never fetch modules: user repos carry no cue.mod
        "GOMEMLIMIT": f"{max(64, DEFAULT_MEMORY_MB // 2)}MiB",
        "LANG": "C.UTF-8",
    }


def run_cue(args: Sequence[str], cwd: Path, *, timeout_s: float | None = None,
            memory_mb: int | None = None) -> CueResult:
    """Run `cue ARGS` in cwd within the budget; ToolFailure when cue cannot run or is cut off."""
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    memory = DEFAULT_MEMORY_MB if memory_mb is None else memory_mb
    binary = cue_binary()
    with scratch_dir("apprafter-cue-") as cache:
        try:
            proc = subprocess.Popen(
                [str(binary), *args], cwd=cwd, env=scrubbed_env(cache), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                preexec_fn=lambda: _limit_memory(memory),
            )
        except OSError as e:
            raise ToolFailure(f"cannot run cue at {binary}: {e.strerror}: run `make setup`") from e
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise Budget(f"cue evaluation did not finish within {timeout:g}s and was stopped "
                         "(raise APPRAFTER_CUE_TIMEOUT, or simplify the input)") from None
        except BaseException:
            _kill(proc)
            raise
    if proc.returncode < 0 or _out_of_memory(err):
        raise Budget(f"cue evaluation exceeded its memory budget of {memory} MiB and was stopped "
                     "(raise APPRAFTER_CUE_MEMORY_MB, or simplify the input)")
    return CueResult(proc.returncode, out, err)


def _out_of_memory(stderr: str) -> bool:
    """A Go runtime abort (the data limit was hit), as opposed to an evaluation error."""
    return "fatal error:" in stderr or "out of memory" in stderr or "cannot allocate memory" in stderr


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.communicate()
