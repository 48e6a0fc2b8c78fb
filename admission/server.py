"""Serves the webhook: uvicorn's HTTP protocol (httptools, uvloop) over TLS with the reloading certificate, each
connection admitted and its handshake done by admission.connections first, reviews in worker processes
(admission.pool), a deadline for each request head, and the metrics port.

uvicorn over hypercorn: with the same app and TLS, uvicorn's own CPU per request is about a third of
hypercorn's (scripts/bench_webhook.py --servers; docs/measurements.md). The listener is ours, not uvicorn's: a
client's place is decided before any TLS work (admission.connections), which uvicorn's own listener cannot do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import ssl
from pathlib import Path
from typing import cast

import uvicorn
from prometheus_client import start_http_server
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from admission import memory, review
from admission.app import Bounds, make_app
from admission.connections import OPEN, Connection, Listener, Registry, limit_read_ahead
from admission.connections import Limits as ConnectionLimits
from admission.policies import PolicySource, in_cluster
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
    connections: ConnectionLimits = dataclasses.field(default_factory=ConnectionLimits)
    kubeconfig: Path | None = None  # where HostnamePolicies are read (else the pod's account; else none)
    head_seconds: float = 10.0  # a request head (line and headers) must arrive within this of the connection's
    # opening or of the answer before it


class _HeadDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for each request head: a connection that sends none in time
    (a slow-loris client, or one that opens and waits) is closed, so it cannot hold a place under the cap; it tells
    its Connection when it has a request in hand (busy) and when it waits for the next (idle)."""

    head_seconds = 10.0
    limits = ConnectionLimits()
    conn: Connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        limit_read_ahead(transport, self.limits)
        super().connection_made(transport)
        self.conn.closer = transport.abort
        OPEN.set(len(self.connections))
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
        self.conn.state = "busy"
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport is not None and not self.transport.is_closing():
            self.conn.state = "idle"
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if self.conn.registry is not None:
            self.conn.registry.forget(self.conn)  # its place, given back
        super().connection_lost(exc)
        OPEN.set(len(self.connections))


async def _watch(cert: ReloadingCertificate, server: uvicorn.Server, interval: float) -> None:
    """Re-read the certificate files every `interval` seconds, on the event loop (handshakes run there too)."""
    while not server.should_exit:
        await asyncio.sleep(interval)
        cert.reload_if_changed()


class _Server(uvicorn.Server):
    """uvicorn's server with our listener: connections pass admission.connections before TLS and HTTP."""

    def __init__(self, config: uvicorn.Config, options: Options, cert: ReloadingCertificate) -> None:
        super().__init__(config)
        self.options = options
        self.cert = cert
        self.registry = Registry(options.connections)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # no listener of uvicorn's own
        config = self.config

        def inner(conn: Connection) -> asyncio.Protocol:
            protocol = cast(_HeadDeadline, config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state))
            protocol.conn = conn
            return protocol

        listener = Listener(self.registry, lambda: self.cert.context, inner)
        await listener.start(self.options.host, self.options.port, config.backlog)
        self.servers.append(listener)  # type: ignore[arg-type]  # closed like a Server at shutdown


async def _serve(server: uvicorn.Server, cert: ReloadingCertificate, interval: float, pool: ReviewPool,
                 policies: PolicySource | None) -> None:
    try:
        await pool.start()
    except (OSError, RuntimeError, TimeoutError, EOFError, asyncio.IncompleteReadError) as e:
        raise ToolFailure(f"the review workers did not start ({type(e).__name__}: {e}): see the lines above") from e
    if policies is not None:
        await policies.start()
    watcher = asyncio.create_task(_watch(cert, server, interval))
    try:
        await server.serve()
    finally:
        watcher.cancel()
        pool.close()
        if policies is not None:
            policies.close()


def config(options: Options, settings: review.Settings, cert: ReloadingCertificate, pool: ReviewPool,
           policies: PolicySource | None = None) -> uvicorn.Config:
    """The uvicorn configuration: our HTTP protocol, no TLS of uvicorn's own (admission.connections does it), no
    access log (the app logs one line per review)."""
    protocol = type("HeadDeadline", (_HeadDeadline,), {"head_seconds": options.head_seconds,
                                                       "limits": options.connections})

    def ready() -> bool:
        return cert.valid() and pool.ready() and (policies is None or policies.ready())

    return uvicorn.Config(
        make_app(settings, ready=ready, bounds=options.bounds, pool=pool),
        host=options.host, port=options.port, http=protocol, loop="uvloop", lifespan="off", access_log=False,
        log_config=None, server_header=False, timeout_graceful_shutdown=10,
    )


def serve(options: Options, settings: review.Settings) -> None:
    """Warm the rules (the Application schema comes from cue, once), then serve until SIGTERM/SIGINT."""
    try:
        cert = ReloadingCertificate(options.cert_file, options.key_file)
    except (OSError, ValueError, ssl.SSLError) as e:
        raise ToolFailure(f"cannot serve with --cert-file {options.cert_file} and --key-file {options.key_file}: "
                          f"{e} (both PEM, the key matching the certificate)") from e
    memory.tune()
    review.warm_up()
    if options.metrics_port is not None:
        start_http_server(options.metrics_port, addr=options.host)
    policies = PolicySource(options.kubeconfig) if options.kubeconfig is not None or in_cluster() else None
    if policies is None:
        log.warning("no cluster to read HostnamePolicies from (no --kubeconfig, not in a pod): only the apps' default "
                    "hostnames are allowed")
    pool = ReviewPool(settings, options.limits, policies)
    server = _Server(config(options, settings, cert, pool, policies), options, cert)
    log.info("serving https://%s:%d (validate, mutate), certificate serial %x, %d review workers", options.host,
             options.port, cert.loaded.serial, options.limits.workers)
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(_serve(server, cert, options.cert_poll_seconds, pool, policies))
