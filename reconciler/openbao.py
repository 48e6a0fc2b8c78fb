"""The I/O of the OpenBao backend (blocking, run in a thread, every step bounded): a KV v2 read over OpenBao's HTTP
API with the operator's client token, from the Kubernetes auth method (its ServiceAccount token, logged in anew
before the lease ends and after a 403) or from a token file (re-read for every request). What OpenBao answered is
read by lifecycle.credentials.openbao. The token and the material are never logged."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import httpx

from lifecycle.credentials import openbao as core
from lifecycle.credentials.material import Material, Unreadable
from platform_stack.registry.transport import tls_failure
from toolchain.errors import ToolFailure

__all__ = ["JWT_FILE", "OpenBao", "OpenBaoSettings"]

JWT_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")  # the pod's projected ServiceAccount token
CONNECT_S, READ_S, DEADLINE_S = 5.0, 10.0, 20.0  # one request; all requests of one read, a login included
MAX_TOKEN_FILE = 16 << 10  # bytes of a token file or ServiceAccount token read


class OpenBaoSettings(NamedTuple):
    """The operator's OpenBao flags: where it is, how to log in (a Kubernetes auth role or a token file), its CA."""

    address: str
    role: str | None = None
    auth_mount: str = "kubernetes"
    jwt_file: Path = JWT_FILE
    token_file: Path | None = None
    ca_file: Path | None = None


class _Reply(NamedTuple):
    status: int
    body: bytes


class _NoAnswer(ToolFailure):
    """A request that got no usable reply (its message names why, never a token); read as BackendUnavailable."""


def _read_file(path: Path, what: str) -> str:
    try:
        with path.open("rb") as handle:
            text = handle.read(MAX_TOKEN_FILE + 1)
    except OSError as e:
        raise _NoAnswer(f"the {what} {path} cannot be read ({e.strerror or type(e).__name__})") from None
    if len(text) > MAX_TOKEN_FILE:
        raise _NoAnswer(f"the {what} {path} is larger than {MAX_TOKEN_FILE} bytes")
    value = text.decode("utf-8", "replace").strip()
    if not value:
        raise _NoAnswer(f"the {what} {path} is empty")
    return value


class OpenBao:
    """Bounded KV v2 reads from one OpenBao server (one connection pool for the process, shared by threads)."""

    def __init__(self, settings: OpenBaoSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self.base = settings.address.rstrip("/")
        verify = ssl.create_default_context(cafile=str(settings.ca_file)) if settings.ca_file else True
        self.http = httpx.Client(verify=verify, follow_redirects=False, trust_env=False)
        self.lock = threading.Lock()  # one login at a time; the token is shared by every read
        self.token: core.Token | None = None

    def close(self) -> None:
        self.http.close()

    def read(self, path: core.KvPath) -> Material | Unreadable | str:
        """The material at `path`, why there is none (Present False) or why OpenBao could not tell (Unknown)."""
        deadline = self.clock() + DEADLINE_S
        try:
            token = self._token(deadline, fresh=False)
            if isinstance(token, Unreadable):
                return token
            reply = self._send("GET", path.api, token, None, deadline)
            if reply.status == 403 and self.settings.role:  # the client token expired or was revoked: log in again
                token = self._token(deadline, fresh=True)
                if isinstance(token, Unreadable):
                    return token
                reply = self._send("GET", path.api, token, None, deadline)
        except _NoAnswer as e:
            return core.unreachable(self.base, str(e))
        return core.read_reply(path, reply.status, reply.body)

    def _token(self, deadline: float, fresh: bool) -> str | Unreadable:
        """The client token to send: the token file's content, or a Kubernetes login's (cached until due)."""
        if self.settings.role is None:
            assert self.settings.token_file is not None
            return _read_file(self.settings.token_file, "OpenBao token file")
        with self.lock:
            if fresh:
                self.token = None
            if core.token_due(self.token, self.clock()):
                jwt = _read_file(self.settings.jwt_file, "ServiceAccount token file")
                where, body = core.login_request(self.settings.auth_mount, self.settings.role, jwt)
                reply = self._send("POST", where, None, body, deadline)
                found = core.login_reply(self.settings.role, reply.status, reply.body, self.clock())
                if isinstance(found, Unreadable):
                    return found
                self.token = found
            assert self.token is not None
            return self.token.value

    def _send(self, method: str, where: str, token: str | None, body: bytes | None, deadline: float) -> _Reply:
        """One request within what is left of the deadline, its reply read up to core.MAX_REPLY bytes."""
        left = deadline - self.clock()
        if left <= 0:
            raise _NoAnswer(f"no answer within {DEADLINE_S:g}s")
        timeout = httpx.Timeout(connect=min(CONNECT_S, left), read=min(READ_S, left), write=min(READ_S, left),
                                pool=min(CONNECT_S, left))
        headers = {core.TOKEN_HEADER: token} if token else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
        what = f"{method} {where}"
        try:
            with self.http.stream(method, self.base + where, headers=headers, content=body,
                                  timeout=timeout) as response:
                received = bytearray()
                for chunk in response.iter_bytes():
                    received += chunk
                    if len(received) > core.MAX_REPLY:
                        raise _NoAnswer(f"{what}: a reply larger than {core.MAX_REPLY} bytes: refused")
                    if self.clock() > deadline:
                        raise _NoAnswer(f"{what}: no whole reply within {DEADLINE_S:g}s")
                return _Reply(response.status_code, bytes(received))
        except httpx.TimeoutException:
            raise _NoAnswer(f"{what}: no answer within {min(READ_S, left):g}s") from None
        except httpx.ConnectError as e:
            reason = "TLS handshake failed (--openbao-ca-file?)" if tls_failure(e) else "cannot connect"
            raise _NoAnswer(f"{what}: {reason} ({type(e).__name__})") from None
        except (httpx.TransportError, httpx.InvalidURL) as e:
            raise _NoAnswer(f"{what}: {type(e).__name__}") from None

