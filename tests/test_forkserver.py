"""The test bed's fork server (tests/testbed/forkserver.py) starts processes as `python -m` would: the environment
and working directory given (nothing of the server's), output in the log, the exit code, SIGKILL a death like any
other; and a forked `apprafter` says exactly what a fresh one says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.testbed.forkserver import PRELOAD, ForkedPopen, ForkServer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    started = ForkServer(tmp_path_factory.mktemp("fork"), PRELOAD)
    yield started
    started.stop()


def test_a_forked_process_gets_the_given_environment_directory_and_log_and_its_exit_code(
        server: ForkServer, tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(
        "import os, sys\n"
        "print(os.environ.get('GIVEN'), os.environ.get('SERVER_ONLY'), os.getcwd(), sys.argv[1:], flush=True)\n"
        "sys.exit(int(sys.argv[1]))\n")
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path), "GIVEN": "yes"}
    proc = server.spawn("probe", ["3", "x"], env, tmp_path / "probe.log", cwd=tmp_path)
    assert proc.wait(30) == 3 and proc.returncode == 3 and proc.poll() == 3
    assert (tmp_path / "probe.log").read_text() == f"yes None {tmp_path} ['3', 'x']\n"


def test_sigkill_ends_a_forked_process_and_its_session(server: ForkServer, tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text("import os, time\nprint(os.getpgid(0) == os.getpid(), flush=True)\n"
                                         "time.sleep(600)\n")
    proc = server.spawn("sleeper", [], {"PYTHONPATH": str(tmp_path)}, tmp_path / "sleeper.log")
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    assert (tmp_path / "sleeper.log").read_text() == "True\n"  # a session (process group) of its own


@pytest.mark.parametrize("args", [["operator", "--help"], ["--version"], ["operator", "--kubeconfig", "/nonexistent"]])
def test_a_forked_apprafter_says_what_a_fresh_one_says(server: ForkServer, tmp_path: Path, args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    fresh = subprocess.run([sys.executable, "-m", "apprafter", *args], capture_output=True, env=env, cwd=ROOT,
                           timeout=60)
    forked = server.spawn("apprafter", args, env, tmp_path / "forked.log", cwd=ROOT)
    code = forked.wait(60)
    assert (code, (tmp_path / "forked.log").read_bytes()) == (fresh.returncode, fresh.stdout + fresh.stderr)


def test_a_process_that_exited_before_the_client_looked_still_has_its_exit_code() -> None:
    # The server reaps on SIGCHLD: a process that fails at once can be gone before its pid reaches the client.
    class Reaped:
        def ask(self, request: Mapping[str, Any]) -> dict[str, Any]:
            return {"returncode": 2}

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process now
    forked = ForkedPopen(Reaped(), gone.pid)
    assert (forked.returncode, forked.poll(), forked.wait(1)) == (2, 2, 2)
