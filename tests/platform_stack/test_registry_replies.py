"""Registries that misbehave: 5xx, non-JSON or wrongly shaped replies, lying digests, huge or slow replies.

A registry under someone else's control answers `stack push`/`verify` (and the PlatformStack controller):
whatever it sends, the result is one line, exit 1 or 2, no traceback, nothing on stdout, and bounded time (no
request is sent twice, none waits past its timeout or the command's deadline; the clock is the test's).
The replies come from a small HTTP server of this test (the hostile party); real registries are in
test_oci.py and test_registry_auth.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from platform_stack import registry
from platform_stack.credentials import Credential
from platform_stack.oci import Reference, push, read_archive
from platform_stack.signing import resolve_digest
from tests.platform_stack.conftest import cli
from toolchain.errors import AppRafterError


@dataclasses.dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""
    hold: threading.Event | None = None  # the reply waits until the test sets it


class Hostile:
    """Answers every request with `reply` (the same for every path and method), or with what `reply(method, path,
    authorization)` returns."""

    def __init__(self) -> None:
        self.reply: Reply | Callable[[str, str, str | None], Reply] = Reply()
        self.requests: list[str] = []  # `METHOD path` of every request, as it arrived
        self.authorizations: list[str | None] = []  # the Authorization header of each
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                authorization = self.headers.get("Authorization")
                reply = owner.reply if isinstance(owner.reply, Reply) else owner.reply(self.command, self.path,
                                                                                       authorization)
                owner.requests.append(f"{self.command} {self.path}")
                owner.authorizations.append(authorization)
                if reply.hold is not None:
                    reply.hold.wait(timeout=60)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = answer

            def log_message(self, format: str, *args: Any) -> None:
                return

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                return  # a client that hung up on a reply it refused (too large, too late) is no error here

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"


def serve() -> Iterator[Hostile]:
    server = Hostile()
    yield server
    server.server.shutdown()
    server.server.server_close()


hostile = pytest.fixture(scope="module")(serve)
elsewhere = pytest.fixture(scope="module", name="elsewhere")(serve)  # another host


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


def test_replies_are_bounded_in_size(hostile: Hostile) -> None:
    hostile.reply = Reply(200, {}, b" " * (registry.MAX_BODY + 1))
    client = registry.connect(hostile.host, True, [])
    (line,) = failure(lambda: client.manifest("acme/chart", "1.0.0"))
    assert f"a reply larger than {registry.MAX_BODY} bytes: refused" in line


def test_a_registry_that_does_not_answer_gets_one_request_and_a_timeout(hostile: Hostile) -> None:
    """The reply is held until the client has given up: the client's read timeout ends the wait, and the request
    is not sent again (oras-py's own loop would send it five more times, sleeping up to 83 s in between)."""
    released = threading.Event()
    hostile.reply, hostile.requests[:] = Reply(200, {}, manifest_body(), hold=released), []
    client = registry.RegistryClient(hostile.host, True, None, [], registry.Bounds(read_s=0.2))
    try:
        with pytest.raises(registry.RegistryFailure) as err:
            client.manifest("acme/chart", "1.0.0")
    finally:
        released.set()
    assert err.value.lines() == [f"apprafter: registry {hostile.host}: GET manifest 1.0.0: no answer within 0.2s: "
                                 "retry when it answers"]
    assert err.value.exit_code == 2
    assert hostile.requests == ["GET /v2/acme/chart/manifests/1.0.0"]


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_commands_deadline_bounds_every_request(hostile: Hostile) -> None:
    """A request waits at most what is left of the deadline (here 0.3 s of the read timeout's 30), and none
    starts after it."""
    clock = Clock()
    deadline = "not done within the 60s deadline: retry later"
    hostile.reply = Reply(200, {}, manifest_body())
    client = registry.RegistryClient(hostile.host, True, None, [], registry.Bounds(read_s=30, deadline_s=60),
                                     clock=clock)
    assert client.manifest("acme/chart", "1.0.0") is not None
    clock.now += 59.7
    released = threading.Event()
    hostile.reply, hostile.requests[:] = Reply(200, {}, manifest_body(), hold=released), []
    try:
        (line,) = failure(lambda: client.manifest("acme/chart", "1.0.0"))
    finally:
        released.set()
    assert line.endswith(f"GET manifest 1.0.0: {deadline}")
    clock.now += 1
    hostile.reply = Reply(200, {}, manifest_body())
    (line,) = failure(lambda: client.manifest("acme/chart", "1.0.0"))
    assert line.endswith(f"GET manifest 1.0.0: {deadline}")
    assert hostile.requests == ["GET /v2/acme/chart/manifests/1.0.0"]  # the held one; the late one was never sent


def test_credentials_go_to_the_registry_alone(hostile: Hostile, elsewhere: Hostile, tmp_path: Path) -> None:
    """HTTP Basic once the registry asks for it, on every request to it, and never to the host an upload's
    Location names (S3-style upload URLs are another party)."""
    upload = f"http://{elsewhere.host}/upload?session=1"

    def registry_reply(method: str, path: str, authorization: str | None) -> Reply:
        if authorization is None:
            return Reply(401, {"Www-Authenticate": 'Basic realm="registry"'})
        if method == "HEAD":
            return Reply(404)
        if method == "POST":
            return Reply(202, {"Location": upload})
        return Reply(201 if method == "PUT" else 200)

    hostile.reply, hostile.requests[:], hostile.authorizations[:] = registry_reply, [], []
    elsewhere.reply, elsewhere.requests[:], elsewhere.authorizations[:] = Reply(201), [], []
    layer, config = tmp_path / "chart.tgz", tmp_path / "config.json"
    layer.write_bytes(b"chart")
    config.write_bytes(b"{}")
    client = registry.RegistryClient(hostile.host, True, Credential("alice", "s3cret", "test"), [])
    client.check()
    client.push_artifact(f"{hostile.host}/acme/chart:1.0.0", [f"{layer}:application/x-layer"],
                         f"{config}:application/x-config", {"a": "b"})
    basic = "Basic " + Credential("alice", "s3cret").basic()
    assert hostile.authorizations == [None, *[basic] * (len(hostile.authorizations) - 1)]
    assert hostile.requests[-1] == "PUT /v2/acme/chart/manifests/1.0.0"
    digests = ["sha256:" + hashlib.sha256(data).hexdigest() for data in (b"chart", b"{}")]
    assert elsewhere.requests == [f"PUT /upload?session=1&digest={d}" for d in digests]
    assert elsewhere.authorizations == [None, None]


def test_a_failing_token_service_is_not_called_refused_credentials(hostile: Hostile) -> None:
    challenge = f'Bearer realm="http://{hostile.host}/token",service="registry",scope="repository:acme/chart:pull"'

    def replies(method: str, path: str, authorization: str | None) -> Reply:
        if path.startswith("/token"):
            return Reply(503, body=b"token service down")
        return Reply(401, {"Www-Authenticate": challenge})

    hostile.reply, hostile.requests[:] = replies, []
    client = registry.RegistryClient(hostile.host, True, Credential("alice", "s3cret", "test"), [])
    (line,) = failure(lambda: client.manifest("acme/chart", "1.0.0"))
    assert line == (f"apprafter: registry {hostile.host}: GET manifest 1.0.0: the token service {hostile.host} "
                    "answered HTTP 503: retry later")
    assert hostile.requests == ["GET /v2/acme/chart/manifests/1.0.0",
                                "GET /token?service=registry&scope=repository%3Aacme%2Fchart%3Apull"]


def test_tls_to_a_plain_http_registry_and_an_unreachable_token_service_are_named(hostile: Hostile) -> None:
    hostile.reply = Reply(200, {}, b"{}")
    (line,) = failure(lambda: registry.connect(hostile.host, False, []).check())
    assert line == (f"apprafter: registry {hostile.host}: TLS handshake failed (a plain-HTTP registry? then "
                    "--plain-http)")
    with socket.create_server(("127.0.0.1", 0)) as closed:
        nowhere = f"127.0.0.1:{closed.getsockname()[1]}"
    hostile.reply = Reply(401, {"Www-Authenticate": f'Bearer realm="http://{nowhere}/token"'})
    (line,) = failure(lambda: registry.connect(hostile.host, True, []).check())
    assert line == (f"apprafter: registry {hostile.host}: GET /v2/: token request: {nowhere} unreachable "
                    "(ConnectError): retry later")


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
