"""Process plumbing for the loopback test bed: pinned binaries, free ports, bounded waits, log tails."""

from __future__ import annotations

import collections
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from tests.parallel import port_range
from tests.testbed.forkserver import ForkedPopen, ForkServer, die_with_parent
from toolchain.tools import ToolError, resolve

T = TypeVar("T")


class BedError(RuntimeError):
    """A test-bed server failed to start or misbehaved; the message carries its log tail."""


def tool(name: str, version: str | None = None) -> Path:
    """The pinned binary for `name` (or at `version`, another version the set-up installs); fails the test (never
    skips) with the set-up remedy."""
    try:
        return resolve(name, version)
    except ToolError as exc:
        pytest.fail(f"test bed needs {name}: {exc}", pytrace=False)


def system_tool(name: str, remedy: str) -> str:
    """A binary from PATH that the set-up installs from the distribution (not pinned); fails with `remedy`."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"test bed needs {name}: {remedy}", pytrace=False)
    return found


# The ports free_port handed out lately: a port is free until its server binds it, so two calls before either
# server starts (etcd's and the API server's ports, picked together) must not get the same one (a CI run failed on
# "bind: address already in use" so).
_HANDED: collections.deque[int] = collections.deque(maxlen=400)
_HANDING = threading.Lock()


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now, from this pytest worker's own range (tests/parallel.py): a
    port the kernel picked (bind to 0) could be picked again by another worker before our server binds it; never one
    this process handed out among the last 400."""
    with _HANDING:
        ports = [port for port in port_range() if port not in _HANDED]
        random.shuffle(ports)
        for port in ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                _HANDED.append(port)
                return port
    raise BedError(f"no free port in this worker's range on 127.0.0.1 ({len(ports)} not handed out lately)")


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout: float,
    proc: ManagedProcess | None = None,
    interval: float = 0.05,
) -> T:
    """Call `probe` until it returns non-None; on timeout or process death raise with the log tail."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = probe()
            if result is not None:
                return result
        except Exception as exc:
            last = exc
        if proc is not None and proc.popen.poll() is not None:
            raise BedError(
                f"{proc.name} exited with {proc.popen.returncode} while waiting for {what}\n{proc.tail()}"
            )
        if time.monotonic() > deadline:
            detail = f" (last error: {last})" if last else ""
            tail = f"\n{proc.tail()}" if proc is not None else ""
            raise BedError(f"timed out after {timeout:.0f}s waiting for {what}{detail}{tail}")
        time.sleep(interval)


def log_files(*roots: str | os.PathLike[str]) -> list[Path]:
    """Every *.log file under `roots`, sorted: walked tolerantly (a live containerd or kubelet removes its task
    directories while the walk is in them, which pathlib's rglob raises on)."""
    found: set[Path] = set()
    for root in roots:
        for directory, _, files in os.walk(root):  # os.walk skips a directory that vanished under it
            found.update(Path(directory) / name for name in files if name.endswith(".log"))
    return sorted(found)


class ManagedProcess:
    """A server in its own process group with its output in a log file; stop() kills the whole group.

    Start it from the main thread: the child is tied to the starting thread's life (PR_SET_PDEATHSIG).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str | os.PathLike[str]],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        forkserver: ForkServer | None = None,
    ) -> None:
        """With `forkserver`, `argv` is `python -m MODULE ARGS...` and the process is forked from that server's
        pre-imported Python (tests/testbed/forkserver.py), not started afresh."""
        self.name = name
        self.log_path = log_path
        self.argv = [str(a) for a in argv]  # kept so that a test bed can restart the server as it was
        self.env = dict(env) if env is not None else None
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen: subprocess.Popen[bytes] | ForkedPopen
        if forkserver is not None:
            assert self.argv[1] == "-m", self.argv
            self.popen = forkserver.spawn(self.argv[2], self.argv[3:], dict(env if env is not None else os.environ),
                                          log_path, cwd)
            return
        self.popen = subprocess.Popen(
            [str(a) for a in argv],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )

    def tail(self, lines: int = 40) -> str:
        """The last lines of the process's output, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"({self.name}: no log at {self.log_path})"
        return f"--- last {min(lines, len(text))} lines of {self.log_path} ---\n" + "\n".join(text[-lines:])

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the process group, SIGKILL it after `grace` seconds."""
        try:
            if self.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(grace)
            with contextlib.suppress(ProcessLookupError, PermissionError):  # stray children too
                os.killpg(self.popen.pid, signal.SIGKILL)
            if self.popen.poll() is None:
                self.popen.wait(grace)
        finally:
            self._log.close()
