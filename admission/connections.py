"""Who may hold a connection to the webhook, decided before any TLS work: each client (by address) a few connections
that have sent no request yet (its TLS handshakes among them, each with a deadline), and all connections together a
cap whose room the client holding the most gives up first (an idle connection of its own is closed), so a flood of
half-open or silent connections from one client never shuts another out (issue 34: 300 half-open TLS and 300 raw TCP
connections from one client made every review answer 503 for ~30 s). TLS is started here, per connection, once the
client has its place; the HTTP protocol (admission.server) takes the connection over after the handshake."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import logging
import socket
import ssl
import struct
from collections.abc import Callable, Coroutine
from typing import Literal

from prometheus_client import Gauge

from admission.pool import REFUSED

__all__ = ["OPEN", "Connection", "Limits", "Listener", "Registry", "limit_read_ahead"]

log = logging.getLogger("apprafter.webhook")
OPEN = Gauge("apprafter_webhook_connections", "Open connections (TLS done).")
HANDSHAKES = Gauge("apprafter_webhook_handshakes", "Connections in their TLS handshake.")
State = Literal["fresh", "busy", "idle"]


@dataclasses.dataclass(frozen=True)
class Limits:
    """What connections may take (docs/admission.md "Bounds")."""

    max_connections: int = 128  # all connections at once, handshakes included
    fresh_per_client: int = 64  # a client's connections that have sent no request head yet, handshakes included
    handshake_seconds: float = 5.0  # TLS handshake, from the connection's opening
    shutdown_seconds: float = 2.0  # how long a closing TLS connection waits for the client's close_notify
    read_buffer: int = 64 << 10  # TLS bytes read ahead of the HTTP protocol, per connection (limit_read_ahead)


_order = itertools.count()


class Connection:
    """One client connection: whose, in which state (fresh: no request yet; busy: a request in hand; idle: between
    requests), and how to close it (its handshake cancelled, or its transport aborted)."""

    def __init__(self, client: str) -> None:
        self.client = client
        self.state: State = "fresh"
        self.order = next(_order)  # oldest first when one must go
        self.registry: Registry | None = None
        self.closer: Callable[[], object] | None = None

    def close(self) -> None:
        if self.registry is not None:
            self.registry.forget(self)
        if self.closer is not None:
            self.closer()


class Registry:
    """The connections by client; `admit` says whether a new one gets a place (and which idle one gives it up)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.clients: dict[str, set[Connection]] = collections.defaultdict(set)
        self.count = 0

    def fresh(self, client: str) -> int:
        return sum(1 for c in self.clients.get(client, ()) if c.state == "fresh")

    def admit(self, conn: Connection) -> tuple[bool, Connection | None]:
        """(whether `conn` gets a place, the connection to close to make room for it)."""
        if self.fresh(conn.client) >= self.limits.fresh_per_client:
            return False, None
        victim = None
        if self.count >= self.limits.max_connections:
            victim = self._victim(conn.client)
            if victim is None:
                return False, None
            self.forget(victim)
        self.clients[conn.client].add(conn)
        conn.registry = self
        self.count += 1
        return True, victim

    def _victim(self, client: str) -> Connection | None:
        """The oldest connection not in a request of the client holding the most, if it holds more than `client`."""
        mine = len(self.clients.get(client, ()))
        for other in sorted(self.clients, key=lambda c: len(self.clients[c]), reverse=True):
            if len(self.clients[other]) <= mine:
                return None
            waiting = [c for c in self.clients[other] if c.state != "busy"]
            if waiting:
                return min(waiting, key=lambda c: c.order)
        return None

    def forget(self, conn: Connection) -> None:
        held = self.clients.get(conn.client)
        if held is not None and conn in held:
            held.discard(conn)
            self.count -= 1
            if not held:
                del self.clients[conn.client]
        conn.registry = None


def limit_read_ahead(transport: asyncio.BaseTransport, limits: Limits) -> None:
    """Bound the TLS bytes read ahead of the HTTP protocol (256 KiB by default): called as the handshake ends, before
    the first application bytes are decrypted."""
    read_ahead = getattr(transport, "set_read_buffer_limits", None)  # TLS transports have it (asyncio's, uvloop's)
    if read_ahead is not None:
        read_ahead(high=limits.read_buffer)


def _reset(sock: socket.socket) -> None:
    """Close a connection refused at once with a reset: no TLS, no lingering."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Listener:
    """Accepts connections and gives each its place (or closes it) before any TLS work; an admitted one gets its
    TLS handshake (within the deadline) and then the HTTP protocol `inner(conn)` makes. Closed like an asyncio
    Server (uvicorn closes its servers at shutdown)."""

    def __init__(self, registry: Registry, context: Callable[[], ssl.SSLContext],
                 inner: Callable[[Connection], asyncio.Protocol]) -> None:
        self.registry = registry
        self.context = context
        self.inner = inner
        self.sock: socket.socket | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int, backlog: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.create_server((host, port), family=family, backlog=backlog)
        self.sock.setblocking(False)
        self._spawn(self._accept(self.sock))

    def _spawn(self, work: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(listening)
            except OSError as e:  # out of file descriptors, a connection reset before it was accepted: go on
                log.warning("accept failed: %s", e)
                await asyncio.sleep(0.05)
                continue
            conn = Connection(str(peer[0]) if peer else "-")
            admitted, victim = self.registry.admit(conn)
            if victim is not None:
                REFUSED.labels("client").inc()
                victim.close()
            if not admitted:
                REFUSED.labels("client").inc()
                _reset(sock)
                continue
            # The kernel's receive buffer bounds what one read takes (and so what the TLS layer's 256 KiB read
            # buffer ever holds of a connection); Linux doubles the value given.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.registry.limits.read_buffer // 2)
            conn.closer = self._spawn(self._handshake(sock, conn)).cancel

    async def _handshake(self, sock: socket.socket, conn: Connection) -> None:
        limits = self.registry.limits
        HANDSHAKES.inc()
        try:
            transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
                lambda: self.inner(conn), sock, ssl=self.context(), ssl_handshake_timeout=limits.handshake_seconds,
                ssl_shutdown_timeout=limits.shutdown_seconds)
        except (Exception, asyncio.CancelledError):  # late, failed, or closed to make room: the socket is closed
            self.registry.forget(conn)
            sock.close()
            return
        finally:
            HANDSHAKES.dec()
        conn.closer = transport.abort

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        for task in list(self.tasks):
            task.cancel()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self.tasks, return_exceptions=True)
