"""The one wrapper around the `cue` binary: scrubbed environment, time, memory and output budget, no shell.

How cue ended is read from its exit status and signal, never from words in its output (a user's value can
say anything): exit 0 and 1 are results (1 carries cue's error report), a Go runtime crash exits 2 with
the runtime's own header on its first line, a kill is a signal.
"""

from __future__ import annotations

import os
import re
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from renderer.errors import ToolFailure
from renderer.scratch import scratch_dir
from renderer.settings import MEMORY_ENV, TIMEOUT_ENV, Limits, limits
from toolchain.record import Record
from toolchain.tools import remedy, resolve, scrubbed_env

__all__ = ["Budget", "CueResult", "run_cue"]

CUE_ERRORS_EXIT = 1  # cue's exit status for every evaluation, syntax or usage error
GO_CRASH_EXIT = 2  # the Go runtime's exit status after a fatal error or an unrecovered panic
# The first line of a Go runtime crash report; group "oom" when the runtime could not get memory (the data
# limit we set), which under our limit can also surface as a fault inside the allocator.
_GO_CRASH = re.compile(r"^(?:(?P<oom>fatal error: (?:runtime: )?(?:out of memory|cannot allocate memory)"
                       r"|runtime: out of memory|SIGSEGV: segmentation violation)|fatal error: |panic: |SIG[A-Z]+: )")


class CueResult(Record):
    """What cue printed and how it exited (0: success, 1: cue's error report on stderr)."""

    returncode: int
    stdout: str
    stderr: str


class Budget(ToolFailure):
    """cue ran out of its time, memory or output budget (the input's fault, but reported with a remedy)."""


def cue_binary() -> Path:
    """A supported cue (a ToolFailure naming the remedy when there is none)."""
    return resolve("cue")


def _limit_memory(megabytes: int) -> None:
    # RLIMIT_DATA, not RLIMIT_AS: Go reserves large PROT_NONE arenas at start-up that AS would count.
    limit = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    # cue stays in our process group on purpose: Argo CD's SIGTERM to the group reaches it too.


def cue_env(cache_dir: str, memory_mb: int) -> dict[str, str]:
    """Only what cue needs (toolchain.tools.scrubbed_env): no Argo CD, git or cloud credentials reach it."""
    return scrubbed_env(cache_dir, {
        "CUE_CACHE_DIR": cache_dir,
        "CUE_REGISTRY": "none",  # never fetch modules: user repos carry no cue.mod
        "GOMEMLIMIT": f"{max(64, memory_mb // 2)}MiB",
        "LANG": "C.UTF-8",
    })


def run_cue(args: Sequence[str], cwd: Path, *, timeout_s: float | None = None,
            memory_mb: int | None = None) -> CueResult:
    """Run `cue ARGS` in cwd within the budget (the environment's limits unless given); ToolFailure when cue
    cannot run, crashes, or is cut off."""
    configured = limits()
    budget = Limits(configured.timeout_s if timeout_s is None else timeout_s,
                    configured.memory_mb if memory_mb is None else memory_mb)
    binary = cue_binary()
    with scratch_dir("apprafter-cue-") as cache:
        try:
            proc = subprocess.Popen(
                [str(binary), *args], cwd=cwd, env=cue_env(cache, budget.memory_mb),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                preexec_fn=lambda: _limit_memory(budget.memory_mb),
            )
        except OSError as e:
            raise ToolFailure(f"cannot run cue at {binary}: {e.strerror}: {remedy('cue')}") from e
        try:
            out, err = _collect(proc, budget, configured.timeout_s)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return _judge(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), budget)


def _collect(proc: subprocess.Popen[bytes], budget: Limits, configured_s: float) -> tuple[bytes, bytes]:
    """Both pipes read to the end, each at most budget.output_bytes, within the time budget (what is left of
    the configured one, which messages name)."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + budget.timeout_s
    chunks: dict[int, list[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
    sizes = dict.fromkeys(chunks, 0)
    exited = _pidfd(proc)  # readable when cue has exited: waited for in the same loop, without polling
    try:
        _read_until_exit(chunks, sizes, exited, deadline, budget, configured_s)
    finally:
        if exited is not None:
            os.close(exited)
    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    return b"".join(chunks[proc.stdout.fileno()]), b"".join(chunks[proc.stderr.fileno()])


def _read_until_exit(chunks: dict[int, list[bytes]], sizes: dict[int, int], exited: int | None, deadline: float,
                     budget: Limits, configured_s: float) -> None:
    """Read every pipe in `chunks` to its end (each capped) and wait for `exited` (a pidfd) to turn readable."""
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        if exited is not None:
            selector.register(exited, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise Budget(f"cue evaluation did not finish within {configured_s:g}s and was stopped "
                             f"(raise {TIMEOUT_ENV}, or simplify the input)")
            for key, _ in selector.select(left):
                fd = key.fd
                if fd == exited:
                    selector.unregister(fd)
                    continue
                data = os.read(fd, 1 << 16)
                if not data:
                    selector.unregister(fd)
                    continue
                sizes[fd] += len(data)
                if sizes[fd] > budget.output_bytes:
                    raise Budget(f"cue printed more than {budget.output_bytes >> 20} MiB and was stopped: the "
                                 f"input evaluates to far more than it declares (raise {MEMORY_ENV}, or simplify "
                                 "the input)")
                chunks[fd].append(data)


def _pidfd(proc: subprocess.Popen[bytes]) -> int | None:
    """A pidfd for proc (Linux ≥ 5.3), else None (then Popen.wait polls, a few ms later)."""
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None


def _judge(code: int, out: str, err: str, budget: Limits) -> CueResult:
    """A result for exit 0 or 1; a ToolFailure for a crash, a kill or any other status."""
    if code in (0, CUE_ERRORS_EXIT):
        return CueResult(code, out, err)
    memory = (f"cue evaluation exceeded its memory budget of {budget.memory_mb} MiB and was stopped "
              f"(raise {MEMORY_ENV}, or simplify the input)")
    if code < 0:
        if -code == signal.SIGKILL:
            raise Budget(memory)  # the kernel's OOM killer (or an operator) sent SIGKILL
        raise ToolFailure(f"cue was stopped by signal {_signal_name(-code)}")
    crash = _GO_CRASH.match(err)
    if code == GO_CRASH_EXIT and crash:
        if crash["oom"]:
            raise Budget(memory)
        raise ToolFailure(f"cue crashed ({crash.group().rstrip(': ')}); this is a bug in cue, not in the "
                          "Application: run `apprafter doctor` and report it")
    raise ToolFailure(f"cue exited with status {code} without an error report")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
