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

__all__ = ["PROTOCOL", "forward"]

PROTOCOL = "v4.channel.k8s.io"
DATA, ERROR = 0, 1
CHUNK = 64 * 1024


async def _pump(kube: Kube, namespace: str, pod: str, port: int, reader: asyncio.StreamReader,
                writer: asyncio.StreamWriter) -> None:
    """One local connection carried to the pod's port until either side closes."""
    from httpx_ws import AsyncWebSocketSession, WebSocketDisconnect, aconnect_ws

    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/portforward"
    seen: set[int] = set()
    try:
        connection: Any = aconnect_ws(path, kube.http, subprotocols=[PROTOCOL], params={"ports": str(port)},
                                      keepalive_ping_interval_seconds=None)  # the library's TypeVar: no type here
        async with connection as session:
            ws: AsyncWebSocketSession = session
            async def upstream() -> None:
                while data := await reader.read(CHUNK):
                    await ws.send_bytes(bytes([DATA]) + data)

            sending = asyncio.create_task(upstream())
            try:
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
            except WebSocketDisconnect:
                pass
            finally:
                sending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await sending
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def forward(kube: Kube, namespace: str, pod: str, port: int, local_port: int = 0,
                  on_error: asyncio.Queue[BaseException] | None = None) -> asyncio.Server:
    """Listen on 127.0.0.1:`local_port` (0: any free port; the server's socket says which) and carry each connection
    to `pod`:`port`; a connection's failure goes to `on_error` (the caller says it), the listener stays."""

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _pump(kube, namespace, pod, port, reader, writer)
        except Exception as e:  # one connection's failure; the next may work (the pod restarted)
            if on_error is not None:
                on_error.put_nowait(e)

    return await asyncio.start_server(accepted, "127.0.0.1", local_port)
