"""A Python that has imported the operator once and forks each operator process the tests start from there.

Starting `python -m apprafter operator` costs ≈ 1.8 s of CPU in imports (lightkube, httpx, jsonschema, oras and our
controllers), and the suite starts the operator ≈ 300 times (the kill test alone restarts it after each of its 200
kills): on two CPU-bound cores that was a tenth of the suite (docs/development.md "The suite's time budget"). The
forked process is the operator as a user runs it from there on: `python -m <entry> operator ...` through
runpy, in a session of its own, its output in its log, its environment and working directory the test's, killed
with SIGKILL by the kill test like any process; only its imports were done before the fork (no module of ours reads
the environment on import: tests/test_forkserver.py checks that the forked operator sees the environment it was
given). The images and node tiers run the operator from its image (the real start, imports and all).

Protocol, one JSON line each way per connection on a UNIX socket: {"spawn": [module, args...], "env", "cwd", "log"}
→ {"pid"}; {"status": pid} → {"returncode": int | null} (null: still running)."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = ["ForkServer", "ForkedPopen", "Reaper", "die_with_parent"]

PRELOAD = ("apprafter.entry", "apprafter.operator_cmd", "compatibility.inputs", "controller_runtime.client",
           "controller_runtime.kubeconfig", "controller_runtime.lease", "controller_runtime.manager",
           "controller_runtime.probes", "reconciler.application", "reconciler.openbao", "reconciler.platformstack",
           "reconciler.sourcecredential", "toolchain.tools", "asyncio", "httpx", "runpy")
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child: get SIGKILL when its parent dies, so a killed pytest leaves no servers behind."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


# --- the server (its own process) ---------------------------------------------------------------------------------

def _child(request: Mapping[str, Any], listener: socket.socket, conn: socket.socket) -> None:
    """In the forked child: become the requested process; never returns."""
    code = 1
    try:
        listener.close()
        conn.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        die_with_parent()  # the server's death (so the worker's) takes the child with it
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        # the search path `python -m` would have: the working directory first, then PYTHONPATH's entries
        extra = [entry for entry in request["env"].get("PYTHONPATH", "").split(os.pathsep) if entry]
        sys.path[0:1] = [os.getcwd(), *extra]
        module, *args = request["spawn"]
        sys.argv = [module, *args]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # printed to the child's log, as an interpreter would
        import traceback
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(path: str, modules: Sequence[str]) -> None:
    for module in modules:
        importlib.import_module(module)
    exits: dict[int, int] = {}

    def reap(*_: object) -> None:  # on SIGCHLD and before a status: one thread, so no lock
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            exits[pid] = os.waitstatus_to_exitcode(status)

    signal.signal(signal.SIGCHLD, reap)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    while True:
        try:
            conn, _ = listener.accept()
        except InterruptedError:
            continue
        with conn:
            request = json.loads(conn.makefile("rb").readline())
            if "spawn" in request:
                pid = os.fork()
                if pid == 0:
                    _child(request, listener, conn)
                reply: dict[str, Any] = {"pid": pid}
            else:
                reap()
                reply = {"returncode": exits.pop(int(request["status"]), None)}
            conn.sendall(json.dumps(reply).encode() + b"\n")


# --- the client (in the test process) ---------------------------------------------------------------------------

class ForkServer:
    """The server process, started on first use; one per pytest worker."""

    def __init__(self, workdir: Path, modules: Sequence[str] = PRELOAD) -> None:
        self.path = str(workdir / "forkserver.sock")
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.log = workdir / "forkserver.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.testbed.forkserver", self.path, *modules],
                                         stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=env,
                                         cwd=root, start_new_session=True, preexec_fn=die_with_parent)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"the fork server did not start: {self.log.read_text(errors='replace')[-3000:]}")

    def ask(self, request: Mapping[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(self.path)
            conn.sendall(json.dumps(request).encode() + b"\n")
            reply: dict[str, Any] = json.loads(conn.makefile("rb").readline())
            return reply

    def spawn(self, module: str, args: Sequence[str], env: Mapping[str, str], log: Path,
              cwd: Path | None = None) -> ForkedPopen:
        reply = self.ask({"spawn": [module, *args], "env": dict(env), "log": str(log),
                          "cwd": str(cwd) if cwd else None})
        return ForkedPopen(self, int(reply["pid"]))

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


class Reaper(Protocol):
    """Who tells a forked process's exit code: the fork server (`ForkServer.ask({"status": pid})`)."""

    def ask(self, request: Mapping[str, Any]) -> dict[str, Any]: ...


class ForkedPopen:
    """What tests use of subprocess.Popen (pid, poll, wait, returncode) for a process the fork server started: it
    is the server's child, so its exit is learnt from a pidfd and its code from the server."""

    def __init__(self, server: Reaper, pid: int) -> None:
        self.server = server
        self.pid = pid
        self.returncode: int | None = None
        try:
            self._fd = os.pidfd_open(pid)
        except ProcessLookupError:  # it exited, and the server reaped it, before the reply reached us
            self._fd = -1
            self.returncode = self._reaped()

    def _reaped(self) -> int:
        """The exit code, once the server has reaped the process (at once, on SIGCHLD: asked until it has)."""
        deadline = time.monotonic() + 10
        while (code := self.server.ask({"status": self.pid})["returncode"]) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the fork server never reaped {self.pid}")
            time.sleep(0.01)
        return int(code)

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._fd], [], [], 0)[0]:
            self.returncode = self._reaped()
            os.close(self._fd)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            ready = select.select([self._fd], [], [], timeout)[0]
            if not ready:
                raise subprocess.TimeoutExpired([str(self.pid)], timeout or 0)
        code = self.poll()
        assert code is not None
        return code


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
