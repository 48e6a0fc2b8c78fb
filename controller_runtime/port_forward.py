"""A local TCP port forwarded to a pod's port through the API server (`pods/portforward`, as `kubectl
port-forward`), over a WebSocket with the channel protocol the kubelet's streaming server speaks (one WebSocket per
local connection; channel 0 the data, channel 1 the kubelet's error; each channel's first frame the port number)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from controller_runtime.errors import KubeError

if TYPE_CHECKING:
    from controller_runtime.client import Kube

__all__ = ["PROTOCOL", "Forward", "forward"]

PROTOCOL = "v4.channel.k8s.io"
DATA, ERROR = 0, 1
CHUNK = 64 * 1024
CLOSE_SECONDS = 2.0  # a connection's close, and every connection's at a stop, waited for at most this long


async def _pump(kube: Kube, namespace: str, pod: str, port: int, reader: asyncio.StreamReader,
                writer: asyncio.StreamWriter) -> None:
    """One local connection carried to the pod's port until either side closes (the local side closing ends it,
    as `kubectl port-forward` does: the pod's side is then not read further)."""
    from httpx_ws import AsyncWebSocketSession, WebSocketDisconnect, aconnect_ws

    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/portforward"
    seen: set[int] = set()

    async def downstream(ws: AsyncWebSocketSession) -> None:
        while True:
            message = await ws.receive_bytes()
            if not message:
                continue
            channel, payload = message[0], message[1:]
            if channel not in seen:  # the port number, once per channel
                seen.add(channel)
                payload = payload[2:]
            if channel == DATA and payload:
                writer.write(payload)
                await writer.drain()
            elif channel == ERROR and payload:
                raise KubeError(f"port-forward to {namespace}/{pod}:{port}: "
                                f"{payload.decode('utf-8', 'replace').strip()}")

    async def upstream(ws: AsyncWebSocketSession) -> None:
        while data := await reader.read(CHUNK):
            await ws.send_bytes(bytes([DATA]) + data)

    try:
        connection: Any = aconnect_ws(path, kube.http, subprotocols=[PROTOCOL], params={"ports": str(port)},
                                      keepalive_ping_interval_seconds=None)  # the library's TypeVar: no type here
        async with connection as session:
            directions = [asyncio.create_task(upstream(session)), asyncio.create_task(downstream(session))]
            try:
                done, _ = await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in directions:
                    task.cancel()
                await asyncio.gather(*directions, return_exceptions=True)
            for task in done:
                error = task.exception()
                if error is not None and not isinstance(error, WebSocketDisconnect):
                    raise error
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_SECONDS):
                await writer.wait_closed()


class Forward:
    """A listener on 127.0.0.1 carrying each connection to a pod's port; `port` is the one it listens on; `close`
    stops it and every connection within a bound."""

    def __init__(self, server: asyncio.Server, connections: set[asyncio.Task[None]]) -> None:
        self.server = server
        self.connections = connections
        self.port: int = server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self.server.close()
        for task in list(self.connections):
            task.cancel()
        if self.connections:
            await asyncio.wait(list(self.connections), timeout=CLOSE_SECONDS)


async def forward(kube: Kube, namespace: str, pod: str, port: int, local_port: int = 0,
                  on_error: asyncio.Queue[BaseException] | None = None) -> Forward:
    """Listen on 127.0.0.1:`local_port` (0: any free port) and carry each connection to `pod`:`port`; a
    connection's failure goes to `on_error` (the caller says it), the listener stays."""
    connections: set[asyncio.Task[None]] = set()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            connections.add(task)
        try:
            await _pump(kube, namespace, pod, port, reader, writer)
        except Exception as e:  # one connection's failure; the next may work (the pod restarted)
            if on_error is not None:
                on_error.put_nowait(e)
        finally:
            if task is not None:
                connections.discard(task)

    return Forward(await asyncio.start_server(accepted, "127.0.0.1", local_port), connections)
