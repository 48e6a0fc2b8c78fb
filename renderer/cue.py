"""The one wrapper around the `cue` binary: scrubbed environment, time, memory and output budget, no shell.

How cue ended is read from its exit status and signal, never from words in its output (a user's value can
say anything): exit 0 and 1 are results (1 carries cue's error report), a Go runtime crash exits 2 with
the runtime's own header on its first line, a kill is a signal.
"""

from __future__ import annotations

import os
import resource
import select
import time
from collections.abc import Sequence
from pathlib import Path

from renderer.errors import ToolFailure
from renderer.scratch import scratch_dir
from renderer.settings import MEMORY_ENV, TIMEOUT_ENV, Limits, limits
from toolchain.record import Record
from toolchain.regex import lazy
from toolchain.tools import remedy, resolve, scrubbed_env

__all__ = ["Budget", "CueResult", "run_cue"]

CUE_ERRORS_EXIT = 1  # cue's exit status for every evaluation, syntax or usage error
GO_CRASH_EXIT = 2  # the Go runtime's exit status after a fatal error or an unrecovered panic
SIGKILL = 9  # signal.SIGKILL (the same number on every Linux architecture), without importing signal
MAX_FD = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1 << 16  # closerange's end, as Popen's close_fds
# The first line of a Go runtime crash report; group "oom" when the runtime could not get memory (the data
# limit we set), which under our limit can also surface as a fault inside the allocator.
_GO_CRASH = lazy(r"^(?:(?P<oom>fatal error: (?:runtime: )?(?:out of memory|cannot allocate memory)"
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
            pid, out_fd, err_fd = _spawn([str(binary), *args], cwd, cue_env(cache, budget.memory_mb),
                                         budget.memory_mb)
        except OSError as e:
            raise ToolFailure(f"cannot run cue at {binary}: {e.strerror}: {remedy('cue')}") from e
        code: int | None = None
        deadline = time.monotonic() + budget.timeout_s
        try:
            out, err = _collect(pid, out_fd, err_fd, deadline, budget, configured.timeout_s)
            code = _wait(pid, max(deadline, time.monotonic() + 0.1), configured.timeout_s)
        finally:
            os.close(out_fd)
            os.close(err_fd)
            if code is None:  # cut off (budget, time) or interrupted: stop it and reap it
                os.kill(pid, SIGKILL)
                os.waitpid(pid, 0)
    return _judge(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), budget)


def _spawn(argv: list[str], cwd: Path, env: dict[str, str], memory_mb: int) -> tuple[int, int, int]:
    """Start cue as subprocess.Popen(stdin=DEVNULL, stdout=PIPE, stderr=PIPE, cwd, env, preexec_fn=the data
    limit) did, without importing subprocess (with its selectors and signal: ≈ 16 M instructions, 5 ms of every
    render's start-up): fork; in the child stdio, no other descriptor, SIGPIPE and SIGXFSZ back to their default,
    cwd, the limit, exec. (pid, stdout's read end, stderr's); OSError when cue cannot be started, as Popen."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    check_r, check_w = os.pipe()  # close-on-exec: EOF on a successful exec, else the child's error
    pid = os.fork()
    if pid == 0:  # the child: only calls into C until exec, as Popen's preexec_fn did
        try:
            _exec_child(argv, cwd, env, memory_mb, (os.open(os.devnull, os.O_RDONLY), out_w, err_w), check_w)
        finally:
            os._exit(127)
    for fd in (out_w, err_w, check_w):
        os.close(fd)
    with open(check_r, "rb") as check:
        failed = check.read()
    if failed:
        os.waitpid(pid, 0)
        os.close(out_r)
        os.close(err_r)
        number, _, text = failed.decode("utf-8", "replace").partition(":")
        raise OSError(int(number) if number.isdigit() else 0, text)
    return pid, out_r, err_r


def _exec_child(argv: list[str], cwd: Path, env: dict[str, str], memory_mb: int, stdio: tuple[int, int, int],
                check_w: int) -> None:
    """In the forked child: stdio as given, every other descriptor closed, exec; on failure `errno:message` to
    check_w."""
    try:
        try:  # the C half of `signal`, whose enums would cost the child 3 M instructions (1 ms of CPU)
            import _signal  # type: ignore[import-not-found]
        except ImportError:
            import signal as _signal

        moved = []
        for fd in stdio:
            while fd < 3:  # out of the way of the dup2 below (a parent started with stdio closed)
                fd = os.dup(fd)
            moved.append(fd)
        for target, fd in enumerate(moved):
            os.dup2(fd, target)  # inheritable
        os.closerange(3, check_w)
        os.closerange(check_w + 1, MAX_FD)
        for number in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores them; cue gets the default back
            _signal.signal(number, _signal.SIG_DFL)
        os.chdir(cwd)
        _limit_memory(memory_mb)
        os.execve(argv[0], argv, env)
    except OSError as e:
        os.write(check_w, f"{e.errno}:{e.strerror}".encode())
    except BaseException as e:  # whatever it was, the parent says it and the child exits
        os.write(check_w, f"0:{e}".encode())


def _collect(pid: int, out_fd: int, err_fd: int, deadline: float, budget: Limits,
             configured_s: float) -> tuple[bytes, bytes]:
    """Both pipes read to the end, each at most budget.output_bytes, by the deadline (the time budget: what is
    left of the configured one, which messages name)."""
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    sizes = dict.fromkeys(chunks, 0)
    exited = _pidfd(pid)  # readable when cue has exited: waited for in the same loop, without polling
    try:
        _read_until_exit(chunks, sizes, exited, deadline, budget, configured_s)
    finally:
        if exited is not None:
            os.close(exited)
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd])


def _timed_out(configured_s: float) -> Budget:
    return Budget(f"cue evaluation did not finish within {configured_s:g}s and was stopped (raise {TIMEOUT_ENV}, or "
                  "simplify the input)")


def _read_until_exit(chunks: dict[int, list[bytes]], sizes: dict[int, int], exited: int | None, deadline: float,
                     budget: Limits, configured_s: float) -> None:
    """Read every pipe in `chunks` to its end (each capped) and wait for `exited` (a pidfd) to turn readable."""
    poller = select.poll()
    waiting = {*chunks, *(() if exited is None else (exited,))}
    for fd in waiting:
        poller.register(fd, select.POLLIN)
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(configured_s)
        for fd, _ in poller.poll(left * 1000):
            data = b"" if fd == exited else os.read(fd, 1 << 16)
            if not data:  # cue exited, or closed this pipe
                poller.unregister(fd)
                waiting.discard(fd)
                continue
            sizes[fd] += len(data)
            if sizes[fd] > budget.output_bytes:
                raise Budget(f"cue printed more than {budget.output_bytes >> 20} MiB and was stopped: the "
                             f"input evaluates to far more than it declares (raise {MEMORY_ENV}, or simplify "
                             "the input)")
            chunks[fd].append(data)


def _wait(pid: int, deadline: float, configured_s: float) -> int:
    """cue's exit status as Popen.returncode says it (-N: killed by signal N), waiting until deadline."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG if time.monotonic() < deadline else 0)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            raise _timed_out(configured_s)
        time.sleep(0.005)  # only without a pidfd (Linux < 5.3): the pipes are closed, cue is exiting


def _pidfd(pid: int) -> int | None:
    """A pidfd for pid (Linux ≥ 5.3), else None (then _wait polls, a few ms later)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _judge(code: int, out: str, err: str, budget: Limits) -> CueResult:
    """A result for exit 0 or 1; a ToolFailure for a crash, a kill or any other status."""
    if code in (0, CUE_ERRORS_EXIT):
        return CueResult(code, out, err)
    memory = (f"cue evaluation exceeded its memory budget of {budget.memory_mb} MiB and was stopped "
              f"(raise {MEMORY_ENV}, or simplify the input)")
    if code < 0:
        if -code == SIGKILL:
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
    import signal  # only to name a signal that stopped cue

    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
