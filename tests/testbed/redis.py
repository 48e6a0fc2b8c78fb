"""redis-server (Debian) on a free loopback port, no persistence: the cache Argo CD's components share."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

from tests.testbed.procs import ManagedProcess, free_port, system_tool, wait_for


@dataclasses.dataclass
class RedisServer:
    """A running redis-server; `address` is "127.0.0.1:PORT", what Argo CD's `--redis` takes."""

    port: int
    process: ManagedProcess

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.stop()


def start_redis(workdir: Path, timeout: float = 20.0, password: str | None = None,
                extra: tuple[str, ...] = ()) -> RedisServer:
    """Start redis-server on 127.0.0.1 without persistence and wait until it accepts connections; with `password`,
    its default user (the admin) needs it (given in a config file of mode 0600, never on the command line); `extra`:
    more of its options."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    binary = system_tool("redis-server", "run `make setup` (tools/setup-gitops.sh installs it)")
    config = workdir / "redis.conf"
    config.touch(mode=0o600)
    config.write_text(f"requirepass {password}\n" if password else "")
    argv = [binary, str(config), "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
            "--dir", str(workdir), "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning", *extra]
    proc = ManagedProcess("redis-server", argv, workdir / "redis.log", env={"PATH": "/usr/bin:/bin"})
    try:
        wait_for("redis-server to answer PING", lambda: _pong(port, password), timeout, proc)
        return RedisServer(port, proc)
    except BaseException:
        proc.stop()
        raise


def _pong(port: int, password: str | None) -> bool | None:
    with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
        if password:
            conn.sendall(f"AUTH {password}\r\n".encode())
            if not conn.recv(16).startswith(b"+OK"):
                return None
        conn.sendall(b"PING\r\n")
        return True if conn.recv(16).startswith(b"+PONG") else None
