"""A node bed's agent: inside its network namespace, a tunnel from a unix socket to the API server and HTTP
requests made on the host's behalf; on the host, a TCP port on 127.0.0.1 forwarded to that tunnel.

  python -m tests.testbed.netns_agent inside --tunnel SOCK --target HOST:PORT --rpc SOCK   (under nsenter --net)
  python -m tests.testbed.netns_agent outside --socket SOCK   (prints "listening on 127.0.0.1:PORT")

The RPC is HTTP over the unix socket: POST /request {method, url, headers, body (base64), ca (PEM), timeout}
answers {status, headers, body (base64)} or {error}; POST /traffic/start {url, interval, ca, timeout,
connect_timeout, max_seconds} starts a bounded stream of requests (a new connection each, as a client of a Service
makes) and answers {id}; POST /traffic/stop {id} stops it and answers the counts.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import itertools
import json
import os
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import httpx


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _splice(client: tuple[asyncio.StreamReader, asyncio.StreamWriter], connect: Any) -> None:
    reader, writer = client
    try:
        upstream_reader, upstream_writer = await connect()
    except OSError:
        writer.close()
        return
    await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))


def _verify(ca: str | None) -> ssl.SSLContext | bool:
    if ca is None:
        return False  # as the kubelet probes: TLS without checking the certificate
    return ssl.create_default_context(cadata=ca)


def _request(spec: dict[str, Any]) -> dict[str, Any]:
    body = base64.b64decode(spec["body"]) if spec.get("body") else None
    try:
        with httpx.Client(verify=_verify(spec.get("ca")), timeout=spec.get("timeout", 10)) as client:
            resp = client.request(spec.get("method", "GET"), spec["url"], headers=spec.get("headers"), content=body)
    except httpx.HTTPError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"status": resp.status_code, "headers": dict(resp.headers),
            "body": base64.b64encode(resp.content).decode()}


class Traffic:
    """Requests to one URL, each on a new connection, until stopped (or max_seconds): counted per outcome.

    A request whose connection was never made is tried once more on a new connection, as a client of a Service
    does (Envoy's `connect-failure` retry, a browser's): nothing was sent, so a retry cannot hide an answer. A
    connection lost in the bed's own network (once in a few thousand on a busy machine) then costs a retry, not
    the test; a server that never answers (a read timeout) or a Service with no endpoint still fails. Each retry
    is listed with its errno and the namespace's neighbour table, to show where the first connection went."""

    CONNECT_FAILURES = (httpx.ConnectError, httpx.ConnectTimeout)

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.stopped = threading.Event()
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.bodies: collections.Counter[str] = collections.Counter()
        self.failures: list[str] = []
        self.retried = 0
        self.retries: list[str] = []
        self.slowest = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _get(self, client: httpx.Client, *, retry: bool = True) -> tuple[str, str]:
        """One request, tried once more when its connection was never made: (outcome, what the error said)."""
        started = time.monotonic()
        try:
            resp = client.get(self.spec["url"])
        except self.CONNECT_FAILURES as exc:
            said = f": {exc}"[:200]
            if not retry:
                return type(exc).__name__, said
            self.retried += 1
            if len(self.retries) < 20:
                self.retries.append(f"{time.time():.3f} {type(exc).__name__} after {time.monotonic() - started:.2f} s"
                                    f"{said}; neighbours: {_neighbours()}")
            return self._get(client, retry=False)
        except httpx.HTTPError as exc:
            return type(exc).__name__, f": {exc}"[:200]  # the errno: refused, no route, ...
        if len(self.bodies) < 50 or resp.text[:200] in self.bodies:
            self.bodies[resp.text[:200]] += 1
        return str(resp.status_code), ""

    def _run(self) -> None:
        deadline = time.monotonic() + float(self.spec.get("max_seconds", 300))
        interval = float(self.spec.get("interval", 0.02))
        limits = httpx.Limits(max_keepalive_connections=0)
        # The connect bound outlasts the kernel's first two SYN retransmits (1 s, then 3 s): a SYN dropped while
        # the machine is busy is retried as by any client, and only a server that never answers counts as down.
        timeout = httpx.Timeout(self.spec.get("timeout", 2), connect=self.spec.get("connect_timeout", 5))
        with httpx.Client(verify=_verify(self.spec.get("ca")), timeout=timeout, limits=limits) as client:
            while not self.stopped.is_set() and time.monotonic() < deadline:
                started = time.monotonic()
                outcome, said = self._get(client)
                took = time.monotonic() - started
                self.slowest = max(self.slowest, took)
                self.outcomes[outcome] += 1
                if outcome != "200" and len(self.failures) < 20:
                    self.failures.append(f"{time.time():.3f} {outcome} after {took:.2f} s{said}")
                self.stopped.wait(interval)

    def stop(self) -> dict[str, Any]:
        self.stopped.set()
        self.thread.join(10)
        total = sum(self.outcomes.values())
        return {"sent": total, "ok": self.outcomes["200"], "failed": total - self.outcomes["200"],
                "outcomes": dict(self.outcomes), "bodies": dict(self.bodies), "failures": self.failures,
                "retried": self.retried, "retries": self.retries, "slowest_seconds": round(self.slowest, 3)}


def _neighbours() -> str:
    """The namespace's neighbour table, one entry per `;` (what `ip neigh` says of each address)."""
    try:
        shown = subprocess.run(["ip", "neigh", "show"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"(ip neigh: {exc})"
    return "; ".join(line.strip() for line in shown.stdout.splitlines())[:1500]


class _Rpc(BaseHTTPRequestHandler):
    traffic: ClassVar[dict[str, Traffic]] = {}
    ids = itertools.count(1)

    def log_message(self, format: str, *args: Any) -> None:  # one line per request in the agent's log
        sys.stderr.write(f"rpc {self.command} {self.path} {args[1] if len(args) > 1 else ''}\n")

    def address_string(self) -> str:
        return "host"

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(200 if self.path == "/healthz" else 404, {})

    def do_POST(self) -> None:
        spec = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/request":
            self._answer(200, _request(spec))
        elif self.path == "/traffic/start":
            key = str(next(self.ids))
            self.traffic[key] = Traffic(spec)
            self._answer(200, {"id": key})
        elif self.path == "/traffic/stop" and spec.get("id") in self.traffic:
            self._answer(200, self.traffic.pop(spec["id"]).stop())
        else:
            self._answer(404, {"error": f"no {self.path}"})


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


async def _inside(tunnel: str, target: str, rpc: str) -> None:
    host, _, port = target.rpartition(":")
    for path in (tunnel, rpc):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    server = _UnixHTTPServer(rpc, _Rpc)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = await asyncio.start_unix_server(
        lambda r, w: _splice((r, w), lambda: asyncio.open_connection(host, int(port))), path=tunnel)
    print(f"tunnel on {tunnel} to {target}, requests on {rpc}", flush=True)
    async with api:
        await api.serve_forever()


async def _outside(socket_path: str) -> None:
    server = await asyncio.start_server(
        lambda r, w: _splice((r, w), lambda: asyncio.open_unix_connection(socket_path)), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(prog="netns_agent")
    sub = parser.add_subparsers(dest="side", required=True)
    inside = sub.add_parser("inside")
    inside.add_argument("--tunnel", required=True)
    inside.add_argument("--target", required=True)
    inside.add_argument("--rpc", required=True)
    outside = sub.add_parser("outside")
    outside.add_argument("--socket", required=True)
    args = parser.parse_args()
    if args.side == "inside":
        asyncio.run(_inside(args.tunnel, args.target, args.rpc))
    else:
        asyncio.run(_outside(args.socket))


if __name__ == "__main__":
    main()
