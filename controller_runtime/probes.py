"""`/healthz` and `/readyz` on the health port, `/metrics` (prometheus_client) on the metrics port."""

from __future__ import annotations

import dataclasses
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import start_http_server

__all__ = ["Health", "Servers"]

STALL_SECONDS = 30.0  # the event loop beats every second; this long without a beat is a stuck process


@dataclasses.dataclass
class Health:
    """What the probes report, written by the event loop, read by the probe thread."""

    beat: float = dataclasses.field(default_factory=time.monotonic)
    ready: bool = False
    state: str = "starting"

    def alive(self) -> bool:
        return time.monotonic() - self.beat < STALL_SECONDS


def _handler(health: Health) -> type[BaseHTTPRequestHandler]:
    class Probe(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
                ok, body = health.alive(), "ok" if health.alive() else "event loop stalled"
            elif self.path == "/readyz":
                ok, body = health.ready, health.state
            else:
                self.send_error(404)
                return
            data = (body + "\n").encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: not worth a log line
            return

    return Probe


class Servers:
    """The probe and metrics servers, each in its own thread; port 0 disables one."""

    def __init__(self, health: Health, bind: str, health_port: int, metrics_port: int) -> None:
        self._servers: list[Any] = []
        if health_port:
            probe = ThreadingHTTPServer((bind, health_port), _handler(health))
            probe.daemon_threads = True
            threading.Thread(target=probe.serve_forever, name="probes", daemon=True).start()
            self._servers.append(probe)
        if metrics_port:
            metrics, _ = start_http_server(metrics_port, bind)
            self._servers.append(metrics)

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
