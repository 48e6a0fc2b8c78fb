"""reconciler.openbao's bounds, against a loopback server that misbehaves as no real OpenBao does: a reply larger
than the cap is refused before it is held in memory, a redirect is not followed (the token goes to the address
only), a closed port is BackendUnavailable; an unreadable token file says which file. The real server's answers
(KV v2, the Kubernetes login, 403 after a revocation) are tests/reconciler/test_openbao_cluster.py's."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.credentials import openbao as core
from lifecycle.credentials.material import Unreadable
from reconciler.openbao import OpenBao, OpenBaoSettings
from tests.testbed.procs import free_port

PATH = core.KvPath("secret", "myorg/login")
SEEN: list[dict[str, str]] = []  # the headers of each request the server got


class _Misbehaving(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        SEEN.append(dict(self.headers))
        if self.path.endswith("/huge"):
            self.send_response(200)
            self.send_header("Content-Length", str(core.MAX_REPLY * 4))
            self.end_headers()
            self.wfile.write(b"x" * core.MAX_REPLY * 4)
        else:
            self.send_response(307)
            self.send_header("Location", "http://127.0.0.1:1/v1/steal")
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Misbehaving)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _client(address: str, token_file: Path) -> OpenBao:
    return OpenBao(OpenBaoSettings(address, token_file=token_file))


def test_a_reply_over_the_cap_is_refused_and_a_redirect_not_followed(server: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s.client-token\n")
    client = _client(server, token)
    try:
        huge = client.read(core.KvPath("secret", "huge"))
        assert huge == Unreadable(core.BACKEND_UNAVAILABLE, f"OpenBao {server}: GET /v1/secret/data/huge: a reply "
                                  f"larger than {core.MAX_REPLY} bytes: refused (read again later)")
        SEEN.clear()
        moved = client.read(PATH)
        assert moved == Unreadable(core.BACKEND_UNAVAILABLE, "OpenBao: GET /v1/secret/data/myorg/login: HTTP 307 "
                                   "(read again later)")
        assert [h.get("X-Vault-Token") for h in SEEN] == ["s.client-token"]  # the token file's content, stripped
    finally:
        client.close()


def test_no_server_and_no_token_file_are_backend_unavailable(tmp_path: Path) -> None:
    address = f"http://127.0.0.1:{free_port()}"
    token = tmp_path / "token"
    token.write_text("s.client-token")
    client = _client(address, token)
    try:
        down = client.read(PATH)
        assert isinstance(down, Unreadable) and down.reason == core.BACKEND_UNAVAILABLE
        assert down.message.startswith(f"OpenBao {address}: GET /v1/secret/data/myorg/login: cannot connect")
        token.unlink()
        missing = client.read(PATH)
        assert missing == Unreadable(core.BACKEND_UNAVAILABLE, f"OpenBao {address}: the OpenBao token file {token} "
                                     "cannot be read (No such file or directory) (read again later)")
    finally:
        client.close()
