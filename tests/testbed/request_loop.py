"""A bounded request loop through the node's Gateway (issue 43 item 5's measure): one thread inside the node's network
namespace asks `https://HOST/PATH` again and again, each request on a new TLS connection to the Gateway's address
(SNI and Host the app's hostname, verified with the bed's CA), each bounded by `BOUND` seconds, and records what
every one got: the status, or why there was none (a refused or reset connection, a timeout: a hung request)."""

from __future__ import annotations

import ctypes
import dataclasses
import http.client
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.testbed.netns import CLONE_NEWNET

# Longer than any answer of a healthy app through the Gateway (milliseconds), far shorter than the 10 s a request
# sent to a replaced pod hung before the drain (issue 43 item 5): a request that takes it is a failure.
BOUND = 5.0


@dataclasses.dataclass(frozen=True)
class Sent:
    """One request: when it left (seconds into the loop), how long it took, its status or its failure."""

    at: float
    took: float
    status: int | None
    failure: str = ""


@dataclasses.dataclass
class Loop:
    """What the loop has sent so far (appended by its thread)."""

    sent: list[Sent] = dataclasses.field(default_factory=list)
    error: BaseException | None = None

    def failed(self, ok: tuple[int, ...] = (200,)) -> list[Sent]:
        return [s for s in self.sent if s.status not in ok]

    def summary(self) -> str:
        took = sorted(s.took for s in self.sent) or [0.0]
        return (f"{len(self.sent)} requests, {len(self.failed())} failed, slowest {took[-1] * 1000:.0f} ms, "
                f"median {took[len(took) // 2] * 1000:.0f} ms")


class _Pinned(http.client.HTTPSConnection):
    """HTTPS to `host` with the TCP connection made to `address` (curl's --resolve)."""

    def __init__(self, host: str, address: str, context: ssl.SSLContext, port: int = 443) -> None:
        super().__init__(host, port, timeout=BOUND, context=context)
        self.address, self.tls = address, context

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), timeout=self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


def _one(host: str, address: str, path: str, context: ssl.SSLContext, started: float) -> Sent:
    at = time.monotonic()
    connection = _Pinned(host, address, context)
    try:
        connection.request("GET", path, headers={"Connection": "close"})
        response = connection.getresponse()
        response.read()
        return Sent(round(at - started, 3), round(time.monotonic() - at, 3), response.status)
    except (OSError, http.client.HTTPException) as exc:  # socket.timeout is an OSError
        return Sent(round(at - started, 3), round(time.monotonic() - at, 3), None, f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()


@contextmanager
def requests_through(netns: str, address: str, host: str, path: str, ca: Path, pause: float = 0.05) -> Iterator[Loop]:
    """Requests sent for as long as the block runs (one at a time, `pause` between them); the loop's record."""
    loop, stop = Loop(), threading.Event()
    context = ssl.create_default_context(cafile=str(ca))

    def run() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(netns, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns {netns}")
            finally:
                os.close(fd)
            started = time.monotonic()
            while not stop.is_set():
                loop.sent.append(_one(host, address, path, context, started))
                stop.wait(pause)
        except BaseException as exc:
            loop.error = exc

    thread = threading.Thread(target=run, name="request-loop", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        stop.set()
        thread.join(BOUND + 5)
    if loop.error is not None:
        raise loop.error
