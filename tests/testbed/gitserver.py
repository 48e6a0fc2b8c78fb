"""`git daemon` serving work repositories read-only (git:// URLs Argo CD clones): on a free loopback port, or on a
node bed's address inside its network namespace, where pods reach it."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tests.testbed.procs import ManagedProcess, free_port, system_tool, wait_for

_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "AppRafter Test", "GIT_AUTHOR_EMAIL": "test@apprafter.dev",
            "GIT_COMMITTER_NAME": "AppRafter Test", "GIT_COMMITTER_EMAIL": "test@apprafter.dev"}


class GitServer:
    """Repositories under `base`, each served as git://HOST:PORT/<name>; commits go straight into them."""

    def __init__(self, base: Path, port: int, process: ManagedProcess, home: Path, host: str = "127.0.0.1") -> None:
        self.base = base
        self.port = port
        self.host = host
        self.process = process
        self._env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **_GIT_ENV}

    def url(self, name: str) -> str:
        return f"git://{self.host}:{self.port}/{name}"

    def git(self, name: str, *args: str) -> str:
        """Run git in repository `name`; returns stdout."""
        proc = subprocess.run([_git(), *args], cwd=self.base / name, env=self._env, capture_output=True, text=True,
                              timeout=60, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} in {name}: exit {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def create(self, name: str, files: Mapping[str, str], message: str = "initial") -> str:
        """A new repository on branch main holding `files`; returns the commit sha."""
        (self.base / name).mkdir(parents=True)
        self.git(name, "init", "--quiet", "--initial-branch=main")
        return self.commit(name, files, message)

    def commit(self, name: str, files: Mapping[str, str], message: str) -> str:
        """Write `files` (path -> text) into repository `name` and commit them; returns the commit sha."""
        for path, text in files.items():
            target = self.base / name / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        self.git(name, "add", "--all")
        self.git(name, "commit", "--quiet", "-m", message)
        return self.git(name, "rev-parse", "HEAD").strip()

    def stop(self) -> None:
        self.process.stop()


def _git() -> str:
    return system_tool("git", "install it (apt-get install git)")


def start_git_server(workdir: Path, timeout: float = 20.0, *, host: str = "127.0.0.1",
                     wrap: Callable[..., Sequence[str]] | None = None) -> GitServer:
    """Start `git daemon --export-all` on `host` over workdir/repos and wait until it accepts connections. With
    `wrap` (e.g. NodeTestBed.nsenter) it runs as wrap(*argv), in a network namespace; it is ready when it says so."""
    base, home = workdir / "repos", workdir / "home"
    base.mkdir(parents=True, exist_ok=True)
    home.mkdir(exist_ok=True)
    port = free_port()
    argv = [_git(), "daemon", "--reuseaddr", f"--listen={host}", f"--port={port}", f"--base-path={base}",
            "--export-all", "--informative-errors", "--verbose", str(base)]
    proc = ManagedProcess("git daemon", list(wrap(*argv)) if wrap else argv, workdir / "git-daemon.log",
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **_GIT_ENV})
    try:
        if wrap is None:
            wait_for("git daemon to accept connections", lambda: _accepts(port), timeout, proc)
        else:  # not reachable from here: its own log line (--verbose) says it listens
            wait_for("git daemon to listen", lambda: True if "Ready to rumble" in proc.log_text() else None,
                     timeout, proc)
        return GitServer(base, port, proc, home, host)
    except BaseException:
        proc.stop()
        raise


def _accepts(port: int) -> bool | None:
    with socket.socket() as s:
        s.settimeout(0.5)
        return True if s.connect_ex(("127.0.0.1", port)) == 0 else None
