"""Serves the webhook: uvicorn (httptools, uvloop) over TLS with the reloading certificate, and the metrics port.

uvicorn over hypercorn: with the same app and TLS, uvicorn's own CPU per request is about a third of
hypercorn's (scripts/bench_webhook.py --servers; docs/development.md), and it takes our own SSLContext
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
from prometheus_client import start_http_server

from admission import review
from admission.app import make_app
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


async def _watch(cert: ReloadingCertificate, server: uvicorn.Server, interval: float) -> None:
    """Re-read the certificate files every `interval` seconds, on the event loop (handshakes run there too)."""
    while not server.should_exit:
        await asyncio.sleep(interval)
        cert.reload_if_changed()


async def _serve(server: uvicorn.Server, cert: ReloadingCertificate, interval: float) -> None:
    watcher = asyncio.create_task(_watch(cert, server, interval))
    try:
        await server.serve()
    finally:
        watcher.cancel()


def config(options: Options, settings: review.Settings, cert: ReloadingCertificate) -> uvicorn.Config:
    """The uvicorn configuration: our TLS context, no access log (the app logs one line per review)."""
    def context_factory(_config: uvicorn.Config, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return cert.context

    return uvicorn.Config(
        make_app(settings, ready=cert.valid), host=options.host, port=options.port,
        ssl_context_factory=context_factory, http="httptools", loop="uvloop", lifespan="off",
        access_log=False, log_config=None, server_header=False, timeout_graceful_shutdown=10,
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
    server = uvicorn.Server(config(options, settings, cert))
    log.info("serving https://%s:%d (validate, mutate), certificate serial %x", options.host, options.port,
             cert.loaded.serial)
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(_serve(server, cert, options.cert_poll_seconds))
