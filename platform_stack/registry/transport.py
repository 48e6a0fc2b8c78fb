"""One registry host's HTTP on httpx: every request with connect/read timeouts under one deadline, every body read
within a cap, each 401 challenge answered once with the user's credential, every transport failure one line.

No retries: a failed request is the caller's answer (the CLI exits 2, the controller retries its check later).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.cookiejar
import ssl
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlencode, urlsplit

import httpx

from platform_stack.docker_config import Credential
from platform_stack.registry.challenge import parse_challenge, token_from
from platform_stack.registry.replies import MAX_BODY, REPLY_LIMITS, RegistryFailure, Reply, describe, short
from renderer.yaml_input import parse
from toolchain.errors import UserError

__all__ = ["CONNECT_TIMEOUT", "DEADLINE", "READ_TIMEOUT", "Bounds", "Transport", "tls_failure"]

CONNECT_TIMEOUT, READ_TIMEOUT = 5.0, 30.0  # per request: connecting, and each wait for bytes
DEADLINE = 300.0  # per command: every request of it, token requests included


@dataclasses.dataclass(frozen=True)
class Bounds:
    """How long one request may wait and how long all of a command's requests may take together (seconds)."""

    connect_s: float = CONNECT_TIMEOUT
    read_s: float = READ_TIMEOUT
    deadline_s: float = DEADLINE


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for the process: reading the CA bundle costs ≈ 20 ms, each client would pay it."""
    return httpx.create_ssl_context()


def tls_failure(error: BaseException) -> bool:
    """Whether an httpx failure was the TLS handshake (an SSLError in its chain)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class Transport:
    """Bounded, authenticated requests to one registry host (and to the token service its challenge names)."""

    def __init__(self, host: str, plain_http: bool, credential: Credential | None, bounds: Bounds,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.host, self.plain_http, self.credential, self.bounds, self.clock = (host, plain_http, credential, bounds,
                                                                                clock)
        self.base = f"{'http' if plain_http else 'https'}://{host}"
        self.deadline = clock() + bounds.deadline_s
        self.basic_only = False  # the registry asked for HTTP Basic: send it with every request
        self.token: str | None = None  # the last bearer token the registry's token service issued
        # No cookies (as oras-py): Harbor sets CSRF cookies for what it takes to be a browser.
        jar = http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        self.http = httpx.Client(follow_redirects=True, cookies=jar, verify=_tls_context())

    def close(self) -> None:
        self.http.close()

    # -- one request ----------------------------------------------------------------------------------------
    def send(self, method: str, url: str, headers: dict[str, str] | None = None, content: bytes | None = None,
             max_bytes: int = MAX_BODY) -> Reply:
        """`method url` with this host's credential; a 401 challenge is answered once (a fresh token for the
        scope it names, or HTTP Basic) and the request sent again. Transport failures raise RegistryFailure."""
        what = describe(method, url)
        reply = self.once(method, url, {**(headers or {}), **self.authorization(url)}, content, max_bytes, what)
        if reply.status == 401 and self.answer(reply, what):
            reply = self.once(method, url, {**(headers or {}), **self.authorization(url)}, content, max_bytes, what)
        return reply

    def authorization(self, url: str) -> dict[str, str]:
        """The header that proves who we are, for this registry's own URLs only (never another host's)."""
        if urlsplit(url).netloc != self.host:
            return {}
        if self.basic_only and self.credential is not None:
            return {"Authorization": f"Basic {self.credential.basic()}"}
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def answer(self, reply: Reply, what: str) -> bool:
        """Learn a credential the 401's challenge asks for; True when the request is worth sending again."""
        challenge = parse_challenge(reply.headers.get("Www-Authenticate", ""))
        if challenge is not None and challenge.scheme == "basic":
            retry = self.credential is not None and not self.basic_only
            self.basic_only = self.basic_only or retry
            return retry
        if challenge is None or challenge.scheme != "bearer":
            return False
        realm = challenge.token_url(self.plain_http)
        if realm is None:
            return False
        # Always a new token: the one we hold may lack this request's scope (pull, then push).
        token = self.request_token(realm, {k: v for k, v in challenge.params.items() if k in ("service", "scope")},
                                   what)
        self.token = token or self.token
        return token is not None

    def request_token(self, realm: str, query: dict[str, str], what: str) -> str | None:
        """A bearer token from the token service (with the credential, else anonymous); None when it refuses the
        credentials (the registry's 401 then says so), RegistryFailure when it fails or answers nonsense."""
        headers = {"Accept": "application/json"}
        if self.credential is not None:
            headers["Authorization"] = f"Basic {self.credential.basic()}"
        url = f"{realm}{'&' if '?' in realm else '?'}{urlencode(query)}" if query else realm
        issued = self.once("GET", url, headers, None, MAX_BODY, f"{what}: token request")
        if issued.status in (401, 403):
            return None
        service = short(urlsplit(realm).netloc, 80)
        if issued.status >= 500:
            raise RegistryFailure(f"registry {self.host}: {what}: the token service {service} answered HTTP "
                                  f"{issued.status}: retry later")
        try:
            data = parse(issued.body, "reply", json_only=True, limits=REPLY_LIMITS).data
        except UserError:
            data = None
        token = token_from(data) if issued.status == 200 else None
        if token is None:
            raise RegistryFailure(f"registry {self.host}: {what}: the token service {service} issued no token "
                                  f"(HTTP {issued.status})")
        return token

    def once(self, method: str, url: str, headers: dict[str, str], content: bytes | None, max_bytes: int,
             what: str) -> Reply:
        """One request, bounded: timeouts clipped to what is left of the deadline, the body read up to max_bytes."""
        left = self.deadline - self.clock()
        if left <= 0:
            raise RegistryFailure(f"registry {self.host}: {what}: not done within the {self.bounds.deadline_s:g}s "
                                  "deadline: retry later")
        connect, read = min(self.bounds.connect_s, left), min(self.bounds.read_s, left)
        timeout = httpx.Timeout(connect=connect, read=read, write=read, pool=connect)
        with self.guard(what, urlsplit(url).netloc, clipped=read < self.bounds.read_s), \
                self.http.stream(method, url, headers=headers, content=content, timeout=timeout) as response:
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise RegistryFailure(f"registry {self.host}: {what}: a reply larger than {max_bytes} bytes: refused")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise RegistryFailure(f"registry {self.host}: {what}: a reply larger than {max_bytes} bytes: "
                                          "refused")
                if self.clock() > self.deadline:
                    raise RegistryFailure(f"registry {self.host}: {what}: a reply not done within the "
                                          f"{self.bounds.deadline_s:g}s deadline: retry later")
            next_page = response.links.get("next", {}).get("url")
            return Reply(response.status_code, response.reason_phrase, response.headers, bytes(body), next_page)

    @contextlib.contextmanager
    def guard(self, what: str, netloc: str, clipped: bool) -> Iterator[None]:
        """httpx's failures as one RegistryFailure line naming the remedy (and the other host, for a request to the
        token service)."""
        scheme = "http" if self.plain_http else "https"
        unreachable = (f"registry {self.host} unreachable over {scheme}" if netloc == self.host else
                       f"registry {self.host}: {what}: {short(netloc, 80)} unreachable")
        remedy = "start the registry or check --plain-http" if netloc == self.host else "retry later"
        try:
            yield
        except httpx.TimeoutException as e:
            if clipped:
                raise RegistryFailure(f"registry {self.host}: {what}: not done within the "
                                      f"{self.bounds.deadline_s:g}s deadline: retry later") from None
            if isinstance(e, httpx.ConnectTimeout):
                raise RegistryFailure(f"registry {self.host}: {what}: no connection within "
                                      f"{self.bounds.connect_s:g}s: retry when it answers") from None
            raise RegistryFailure(f"registry {self.host}: {what}: no answer within {self.bounds.read_s:g}s: retry "
                                  "when it answers") from None
        except httpx.ConnectError as e:
            if tls_failure(e) and netloc == self.host:
                raise RegistryFailure(f"registry {self.host}: TLS handshake failed (a plain-HTTP registry? then "
                                      "--plain-http)") from None
            if tls_failure(e):
                raise RegistryFailure(f"registry {self.host}: {what}: TLS handshake with {short(netloc, 80)} "
                                      "failed") from None
            raise RegistryFailure(f"{unreachable} ({type(e).__name__}): {remedy}") from None
        except httpx.UnsupportedProtocol:
            raise RegistryFailure(f"registry {self.host}: {what}: the registry sent a URL that is not http(s)") \
                from None
        except httpx.TransportError as e:
            raise RegistryFailure(f"{unreachable} ({type(e).__name__}): {remedy}") from None
        except httpx.TooManyRedirects:
            raise RegistryFailure(f"registry {self.host}: {what}: too many redirects") from None
        except (httpx.RequestError, httpx.InvalidURL) as e:
            raise RegistryFailure(f"registry {self.host}: {what}: the reply could not be read "
                                  f"({type(e).__name__})") from None
