"""A TCP proxy on 127.0.0.1 in front of a server (TLS passes through untouched) that can go silent: `freeze()` makes
every connection open now forward nothing more in either direction while staying open — a watch that stops
delivering without closing. A frozen connection on which the client sends a new request is closed (so a client's
next request fails fast and reconnects, as it would past a dead connection); new connections work as before."""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.testbed.procs import free_port

__all__ = ["SilentProxy"]


class _Pair:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client, self.upstream = client, upstream
        self.frozen = False
        self.closed = False

    def close(self) -> None:
        self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class SilentProxy:
    """Listens on `port`, forwards to target_host:target_port."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self.frozen_connections = 0
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs = [p for p in self._pairs if not p.closed] + [pair]
            threading.Thread(target=self._pump, args=(pair, client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, upstream, client, False), daemon=True).start()

    def _pump(self, pair: _Pair, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    if pair.frozen and not from_client:
                        return  # the server hung up; the client is never told: held open, silent
                    break
                if pair.frozen:
                    if from_client:
                        break  # a new request on a silent connection: drop the connection
                    continue  # the server's bytes go nowhere
                sink.sendall(data)
        except OSError:
            pass
        pair.close()

    def freeze(self) -> int:
        """Every connection open now goes silent; how many there were."""
        with self._lock:
            live = [p for p in self._pairs if not p.closed]
            for pair in live:
                pair.frozen = True
        self.frozen_connections += len(live)
        return len(live)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for pair in self._pairs:
                pair.close()
