"""Registries that misbehave: 5xx, non-JSON or wrongly shaped replies, lying digests, huge or slow replies.

A registry under someone else's control answers `stack push`/`verify` (and the PlatformStack controller):
whatever it sends, the result is one line, exit 1 or 2, no traceback, nothing on stdout, and bounded time.
The replies come from a small HTTP server of this test (the hostile party); real registries are in
test_oci.py and test_registry_auth.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from platform_stack import registry
from platform_stack.oci import Reference, push, read_archive
from platform_stack.signing import resolve_digest
from tests.platform_stack.conftest import cli
from toolchain.errors import AppRafterError


@dataclasses.dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0


class Hostile:
    """Answers every request with `reply` (the same for every path and method)."""

    def __init__(self) -> None:
        self.reply = Reply()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                reply = owner.reply
                time.sleep(reply.delay)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = answer

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    server = Hostile()
    yield server
    server.server.shutdown()
    server.server.server_close()


def manifest_body(layers: Any = None, config: Any = None) -> bytes:
    return json.dumps({"schemaVersion": 2, "mediaType": registry.MANIFEST_MEDIA_TYPE,
                       "config": config if config is not None else {"digest": "sha256:" + "a" * 64},
                       "layers": layers if layers is not None else [{"digest": "sha256:" + "b" * 64}]}).encode()


def failure(call: Any) -> list[str]:
    """The lines of the AppRafterError `call` raises (anything else fails the test)."""
    with pytest.raises(AppRafterError) as err:
        call()
    return err.value.lines()


def test_5xx_is_one_line_with_retry(hostile: Hostile) -> None:
    hostile.reply = Reply(503, body=b"down for maintenance")
    (line,) = failure(lambda: resolve_digest(Reference(hostile.host, "acme/chart", "1.0.0"),
                                             registry.connect(hostile.host, True, [])))
    assert line == f"apprafter: registry {hostile.host}: GET /v2/: HTTP 503 Service Unavailable: the registry " \
                   "failed, retry later"


@pytest.mark.parametrize(("body", "says"), [
    (b"<html>not json</html>", "the reply is not JSON"),
    (b"[" * 5000 + b"]" * 5000, "the reply is not JSON"),
    (b'{"layers": "x"}', "is not an OCI image manifest"),
    (manifest_body(layers=[{"size": 1}]), "is not an OCI image manifest"),
    (manifest_body(config=[]), "is not an OCI image manifest"),
], ids=["html", "deep", "layers-string", "layer-without-digest", "config-list"])
def test_a_reply_that_is_not_a_manifest_is_one_line(hostile: Hostile, body: bytes, says: str) -> None:
    hostile.reply = Reply(200, {"Content-Type": registry.MANIFEST_MEDIA_TYPE}, body)
    client = registry.connect(hostile.host, True, [])
    (line,) = failure(lambda: client.manifest("acme/chart", "1.0.0"))
    assert line.startswith(f"apprafter: registry {hostile.host}: GET manifest 1.0.0: ") and says in line


def test_a_registry_cannot_name_the_digest_of_what_it_serves(hostile: Hostile) -> None:
    body = manifest_body()
    hostile.reply = Reply(200, {"Docker-Content-Digest": "sha256:" + "0" * 64}, body)
    client = registry.connect(hostile.host, True, [])
    (line,) = failure(lambda: client.manifest("acme/chart", "1.0.0"))
    assert "is not the digest of its content" in line
    hostile.reply = Reply(200, {}, body)
    wanted = "sha256:" + "1" * 64
    (line,) = failure(lambda: client.manifest("acme/chart", wanted))
    assert "served content with digest sha256:" + hashlib.sha256(body).hexdigest() in line
    assert client.manifest("acme/chart", "1.0.0") == ("sha256:" + hashlib.sha256(body).hexdigest(),
                                                       json.loads(body))


def test_replies_are_bounded_in_size_and_time(hostile: Hostile, monkeypatch: pytest.MonkeyPatch) -> None:
    hostile.reply = Reply(200, {}, b" " * (registry.MAX_BODY + 1))
    client = registry.connect(hostile.host, True, [])
    (line,) = failure(lambda: client.manifest("acme/chart", "1.0.0"))
    assert f"a reply larger than {registry.MAX_BODY} bytes: refused" in line
    monkeypatch.setattr(registry, "READ_TIMEOUT", 0.3)
    hostile.reply = Reply(200, {}, manifest_body(), delay=1.5)
    start = time.monotonic()
    (line,) = failure(lambda: registry.connect(hostile.host, True, []).manifest("acme/chart", "1.0.0"))
    assert "no answer within 0.3s" in line and time.monotonic() - start < 1.4
    hostile.reply = Reply(200, {}, manifest_body(), delay=0.2)
    slow = registry.RegistryClient(hostile.host, True, None, [], deadline_s=0.1)
    (line,) = failure(lambda: [slow.manifest("acme/chart", "1.0.0") for _ in range(3)])
    assert "deadline" in line


challenges = st.sampled_from(["", "Basic realm=x", 'Bearer realm="http://127.0.0.1:1/token",service="s"',
                              'Bearer realm="{host}/token",scope="repository:acme:pull"', "Bearer", "Negotiate"])
bodies = st.one_of(st.binary(max_size=64), st.just(manifest_body()),
                   st.just(b'{"errors": [{"message": "\\u001b[31m"}]}'),
                   st.recursive(st.none() | st.integers() | st.text(max_size=5),
                                lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                           max_size=3),
                                max_leaves=10).map(lambda v: json.dumps(v).encode()))
replies = st.builds(lambda status, challenge, digest, body: (status, challenge, digest, body),
                    st.sampled_from([200, 201, 202, 204, 301, 400, 401, 403, 404, 405, 429, 500, 502]), challenges,
                    st.sampled_from([None, "garbage", "sha256:" + "c" * 64]), bodies)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(replies)
def test_any_reply_gives_one_line_or_a_result(hostile: Hostile, stack_all: Path, reply: Any) -> None:
    status, challenge, digest, body = reply
    headers = {"Location": "/v2/acme/uploads/1"}
    if challenge:
        headers["Www-Authenticate"] = challenge.replace("{host}", f"http://{hostile.host}")
    if digest:
        headers["Docker-Content-Digest"] = digest
    hostile.reply = Reply(status, headers, body)
    archive = read_archive(stack_all)
    for call in (lambda: push(archive, f"oci://{hostile.host}/acme", True),
                 lambda: resolve_digest(Reference(hostile.host, "acme/chart", "1.0.0"),
                                        registry.connect(hostile.host, True, []))):
        try:
            call()
        except AppRafterError as e:
            assert len(e.lines()) == 1 and e.exit_code in (1, 2)
            assert all(ch.isprintable() for ch in e.lines()[0])


def test_the_cli_on_a_hostile_registry_prints_one_line_and_nothing_on_stdout(hostile: Hostile,
                                                                             stack_all: Path) -> None:
    replies = (Reply(200, {}, b"\x00\xff not json"), Reply(500, {}, b"{}"), Reply(401, {"Www-Authenticate": "Basic"}))
    for reply in replies:
        hostile.reply = reply
        proc = cli("stack", "push", str(stack_all), "--to", f"oci://{hostile.host}/acme", "--plain-http")
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
