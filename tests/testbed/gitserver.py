"""`git daemon` serving work repositories read-only (git:// URLs Argo CD clones): on a free loopback port, or on a
node bed's address inside its network namespace, where pods reach it; and the same repositories over HTTP behind
Basic auth (a private repository)."""

from __future__ import annotations

import base64
import hmac
import http.server
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

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


class GitHttpServer:
    """The same repositories over smart HTTP (`git http-backend` as CGI) behind HTTP Basic auth: every request
    without `user`/`password` gets 401, as a private forge answers. Requests are logged without any header."""

    def __init__(self, server: http.server.ThreadingHTTPServer, log: Path) -> None:
        self.server = server
        self.port = server.server_address[1]
        self.log = log

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _http_handler(base: Path, user: str, password: str, log: Path) -> type:
    expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.serve()

        def do_POST(self) -> None:
            self.serve()

        def serve(self) -> None:
            given = self.headers.get("Authorization", "")
            allowed = hmac.compare_digest(given.encode(), expected.encode())
            with log.open("a") as out:
                out.write(f"{self.command} {self.path} {'authorized' if allowed else 'refused'}\n")
            if not allowed:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="apprafter test git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_PROJECT_ROOT": str(base),
                   "GIT_HTTP_EXPORT_ALL": "1", "REQUEST_METHOD": self.command, "PATH_INFO": path,
                   "QUERY_STRING": query, "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                   "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": user, "REMOTE_ADDR": "127.0.0.1",
                   "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""), **_GIT_ENV}
            proc = subprocess.run([_git(), "http-backend"], input=body, env=env, capture_output=True, timeout=60,
                                  check=False)
            head, _, payload = proc.stdout.partition(b"\r\n\r\n")
            headers = [line.split(":", 1) for line in head.decode("latin-1").split("\r\n") if ":" in line]
            status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
            self.send_response(status)
            for name, value in headers:
                if name.lower() != "status":
                    self.send_header(name, value.strip())
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def start_git_http_server(base: Path, workdir: Path, user: str, password: str) -> GitHttpServer:
    """Serve the repositories under `base` (a GitServer's) over HTTP on 127.0.0.1 behind Basic auth."""
    log = workdir / "git-http.log"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _http_handler(base, user, password, log))
    threading.Thread(target=server.serve_forever, name="git-http", daemon=True).start()
    return GitHttpServer(server, log)
