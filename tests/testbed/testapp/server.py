"""The node tier's test workload: an HTTP server whose behaviour MODE (or --mode) chooses.

  serve    GET / answers MESSAGE (default "hello"), /ready 200 "ready", /host the pod's hostname, /echo...
           the path it was asked for and the Host header (what a Gateway's rewrite sent), /ws a WebSocket that
           echoes each text or binary message
  unready  like serve, but /ready answers 503 (a readiness probe never passes)
  hang     listens on PORT and never answers (a probe times out)
  crash    exits 3 at start (a crash loop)
  oom      allocates memory until the kernel kills it (OOMKilled at its memory limit)

PORT (default 8080) and MESSAGE come from the environment or --port/--message. SIGTERM exits 0 at once.
"""

import argparse
import base64
import hashlib
import os
import signal
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    ready = True
    message = "hello"

    def do_GET(self):
        if self.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            self.websocket()
            return
        if self.path.startswith("/echo"):
            status, body = 200, f"path {self.path} host {self.headers.get('Host', '')}"
        elif self.path == "/ready":
            status, body = (200, "ready") if self.ready else (503, "not ready")
        elif self.path == "/host":
            status, body = 200, socket.gethostname()
        elif self.path == "/":
            status, body = 200, self.message
        else:
            status, body = 404, "not found"
        data = (body + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


    def websocket(self):
        """RFC 6455's handshake, then echo every text or binary frame until the client closes."""
        accept = base64.b64encode(hashlib.sha1(
            self.headers["Sec-WebSocket-Key"].encode() + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()).decode()
        self.wfile.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Accept: {accept}\r\n\r\n").encode())
        self.wfile.flush()
        self.close_connection = True
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = int.from_bytes(self.rfile.read(2), "big")
            elif length == 127:
                length = int.from_bytes(self.rfile.read(8), "big")
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
            if opcode == 0x8:  # close: answer it, then end
                self.wfile.write(b"\x88\x00")
                self.wfile.flush()
                return
            reply = 0xA if opcode == 0x9 else opcode  # a ping gets its pong; text and binary come back as sent
            size = len(payload)
            header = bytes([0x80 | reply, size]) if size < 126 else bytes([0x80 | reply, 126]) + size.to_bytes(2, "big")
            self.wfile.write(header + payload)
            self.wfile.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default=os.environ.get("MODE", "serve"),
                        choices=["serve", "unready", "hang", "crash", "oom"])
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    parser.add_argument("--message", default=os.environ.get("MESSAGE", "hello"))
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # PID 1 ignores SIGTERM without a handler
    print(f"testapp: mode {args.mode}, port {args.port}", flush=True)
    if args.mode == "crash":
        print("testapp: crashing at start, as asked", file=sys.stderr, flush=True)
        sys.exit(3)
    if args.mode == "oom":
        hoard = []
        while True:
            chunk = bytearray(8 << 20)
            for i in range(0, len(chunk), 4096):  # touch every page, so it counts against the limit
                chunk[i] = 1
            hoard.append(chunk)
            print(f"testapp: holding {len(hoard) * 8} MiB", flush=True)
    if args.mode == "hang":
        listener = socket.create_server(("", args.port))
        listener.listen(64)
        while True:  # connections queue in the backlog and never get an answer
            time.sleep(3600)
    Handler.ready = args.mode == "serve"
    Handler.message = args.message
    ThreadingHTTPServer(("", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
