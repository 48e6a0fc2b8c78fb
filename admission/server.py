"""Serves the webhook: uvicorn (httptools, uvloop) over TLS with the reloading certificate, reviews in worker
processes (admission.pool), bounded connections (a cap, a deadline for each request head), and the metrics port.

uvicorn over hypercorn: with the same app and TLS, uvicorn's own CPU per request is about a third of
hypercorn's (scripts/bench_webhook.py --servers; docs/measurements.md), and it takes our own SSLContext
(`ssl_context_factory`), which the certificate reload swaps in place.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
from collections.abc import Callable
from pathlib import Path

import uvicorn
from prometheus_client import Gauge, start_http_server
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from admission import review
from admission.app import Bounds, make_app
from admission.pool import Limits, ReviewPool
from admission.tls import ReloadingCertificate
from renderer.errors import ToolFailure

log = logging.getLogger("apprafter.webhook")


@dataclasses.dataclass(frozen=True)
class Options:
    """`apprafter webhook` flags."""

    cert_file: Path
    key_file: Path
    host: str = "0.0.0.0"  # a pod serves the API server on its pod IP
    port: int = 9443
    metrics_port: int | None = None
    cert_poll_seconds: float = 2.0
    limits: Limits = dataclasses.field(default_factory=Limits)
    bounds: Bounds = dataclasses.field(default_factory=Bounds)
    max_connections: int = 128  # open connections; past it, requests are answered 503 at once (uvicorn)
    head_seconds: float = 10.0  # a request head (line and headers) must arrive within this of the connection's
    # opening or of the answer before it


CONNECTIONS = Gauge("apprafter_webhook_connections", "Open connections (TLS done).")


class _HeadDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for each request head: a connection that sends none in time
    (a slow-loris client, or one that opens and waits) is closed, so it cannot hold a place under the cap."""

    head_seconds = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        CONNECTIONS.set(len(self.connections))
        self._head_timer: asyncio.TimerHandle | None = None
        self._await_head()

    def _await_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.head_seconds, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def on_headers_complete(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport is not None and not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)
        CONNECTIONS.set(len(self.connections))


async def _watch(cert: ReloadingCertificate, server: uvicorn.Server, interval: float) -> None:
    """Re-read the certificate files every `interval` seconds, on the event loop (handshakes run there too)."""
    while not server.should_exit:
        await asyncio.sleep(interval)
        cert.reload_if_changed()


async def _serve(server: uvicorn.Server, cert: ReloadingCertificate, interval: float, pool: ReviewPool) -> None:
    try:
        await pool.start()
    except (OSError, RuntimeError, TimeoutError, EOFError, asyncio.IncompleteReadError) as e:
        raise ToolFailure(f"the review workers did not start ({type(e).__name__}: {e}): see the lines above") from e
    watcher = asyncio.create_task(_watch(cert, server, interval))
    try:
        await server.serve()
    finally:
        watcher.cancel()
        pool.close()


def config(options: Options, settings: review.Settings, cert: ReloadingCertificate, pool: ReviewPool) -> uvicorn.Config:
    """The uvicorn configuration: our TLS context and protocol, the connection cap, no access log (the app logs
    one line per review)."""
    def context_factory(_config: uvicorn.Config, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return cert.context

    protocol = type("HeadDeadline", (_HeadDeadline,), {"head_seconds": options.head_seconds})
    return uvicorn.Config(
        make_app(settings, ready=lambda: cert.valid() and pool.ready(), bounds=options.bounds, pool=pool),
        host=options.host, port=options.port, ssl_context_factory=context_factory, http=protocol, loop="uvloop",
        lifespan="off", access_log=False, log_config=None, server_header=False, timeout_graceful_shutdown=10,
        limit_concurrency=options.max_connections,
    )


def serve(options: Options, settings: review.Settings) -> None:
    """Warm the rules (the Application schema comes from cue, once), then serve until SIGTERM/SIGINT."""
    try:
        cert = ReloadingCertificate(options.cert_file, options.key_file)
    except (OSError, ValueError, ssl.SSLError) as e:
        raise ToolFailure(f"cannot serve with --cert-file {options.cert_file} and --key-file {options.key_file}: "
                          f"{e} (both PEM, the key matching the certificate)") from e
    review.warm_up()
    if options.metrics_port is not None:
        start_http_server(options.metrics_port, addr=options.host)
    pool = ReviewPool(settings, options.limits)
    server = uvicorn.Server(config(options, settings, cert, pool))
    log.info("serving https://%s:%d (validate, mutate), certificate serial %x, %d review workers", options.host,
             options.port, cert.loaded.serial, options.limits.workers)
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(_serve(server, cert, options.cert_poll_seconds, pool))
