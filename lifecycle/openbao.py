"""The OpenBao backend of a SourceCredential (spec §3.12), decided without I/O: the KV v2 request an `openBaoPath`
makes, OpenBao's replies to a read and to a Kubernetes login read into the material, why there is none, or why it
could not tell, and when to read again (no watch: on the check interval, with capped backoff while it cannot tell)
or log in anew. Messages name paths, keys, the role and OpenBao's own error words, never a token or a value."""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from controller_runtime.outcomes import NextCheck
from lifecycle.credential_checks import backoff_s
from lifecycle.credential_outputs import Material, Unreadable, login_from
from lifecycle.sourcecredential import BAO_PATH

__all__ = ["ACCESS_DENIED", "BACKEND_UNAVAILABLE", "MAX_REPLY", "RELOGIN_AT", "TOKEN_HEADER", "KvPath", "Read",
           "Token", "address_problem", "after_read", "kv_path", "login_reply", "login_request", "not_configured",
           "read_reply", "token_due", "unreachable", "wait_before_read"]

BACKEND_UNAVAILABLE = "BackendUnavailable"  # no address, no answer, a failing or sealed server: Present Unknown
ACCESS_DENIED = "AccessDenied"  # OpenBao refused the operator's login or token: Present Unknown
TOKEN_HEADER = "X-Vault-Token"  # OpenBao keeps Vault's header name (its API is Vault 1.14's)
MAX_REPLY = 64 << 10  # bytes of a reply read: a login or a KV secret of a username and a password is < 4 KiB
RELOGIN_AT = 0.8  # of a login's lease_duration: log in anew before the client token expires (no renewal calls)
WORDS = 300  # characters of OpenBao's words kept in a message
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


class KvPath(NamedTuple):
    """An `openBaoPath` read as `bao kv get` reads it: the first segment is the KV v2 mount, the rest the secret."""

    mount: str
    secret: str

    def __str__(self) -> str:
        return f"{self.mount}/{self.secret}"

    @property
    def api(self) -> str:
        """The HTTP path of the secret's current version: secret/myorg/github -> /v1/secret/data/myorg/github."""
        return f"/v1/{self.mount}/data/{self.secret}"


class Token(NamedTuple):
    """A client token and when (monotonic seconds) to log in anew; None: never (a token file is re-read instead)."""

    value: str
    relogin_at: float | None

    def __repr__(self) -> str:  # a traceback or a debug print never shows the token
        return "Token(<redacted>)"


class Read(NamedTuple):
    """The last read of one half's path (kept in the operator's memory only): what it found, when (monotonic), and
    how many reads in a row could not tell."""

    path: str
    found: Material | Unreadable | str
    at: float
    unreadable_runs: int


def kv_path(text: str) -> KvPath | None:
    """The mount and secret of an openBaoPath, or None when it is not one (the CRD and the webhook refuse it: a
    segment that is empty, `.` or `..`, starts with `.`, or a leading `/`)."""
    if not re.fullmatch(BAO_PATH, text):
        return None
    mount, _, secret = text.partition("/")
    return KvPath(mount, secret)


def address_problem(address: str) -> str | None:
    """Why `--openbao-address` is not an OpenBao address (http(s)://host[:port], no user, path, query or fragment)."""
    try:
        parts = urlsplit(address)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as e:
        return f"not a URL ({e})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "want http(s)://host[:port], e.g. https://openbao.openbao.svc:8200"
    if parts.username or parts.password or parts.query or parts.fragment or parts.path not in ("", "/"):
        return "want http(s)://host[:port] only: no user@, path, query or fragment (a token never goes in the URL)"
    return None


def words(text: str) -> str:
    return _UNPRINTABLE.sub("?", " ".join(text.split()))[:WORDS]


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _errors(body: bytes) -> str:
    """OpenBao's `errors` list, on one line ('' when there is none)."""
    reply = _json(body)
    listed = reply.get("errors") if isinstance(reply, dict) else None
    return words("; ".join(str(e) for e in listed)) if isinstance(listed, list) else ""


def not_configured() -> Unreadable:
    return Unreadable(BACKEND_UNAVAILABLE, "no OpenBao is configured: run the operator with --openbao-address and "
                                           "--openbao-auth-role or --openbao-token-file (docs/private-sources.md)")


def unreachable(address: str, what: str) -> Unreadable:
    """No answer (a refused connection, a timeout, a TLS failure, an oversized reply): read again with backoff."""
    return Unreadable(BACKEND_UNAVAILABLE, f"OpenBao {address}: {words(what)} (read again later)")


def read_reply(path: KvPath, status: int, body: bytes) -> Material | Unreadable | str:
    """A KV v2 read's reply: 200 the material (keys username and password of `data.data`) or which key it lacks;
    404 no such secret, or its current version deleted (Present False); 403 refused (Unknown: the material may well
    be there); anything else, a sealed or failing server, Unknown."""
    said = _errors(body)
    reply = _json(body)
    data = reply.get("data") if isinstance(reply, dict) else None
    metadata = data.get("metadata") if isinstance(data, dict) else None
    version = metadata.get("version") if isinstance(metadata, dict) else None
    at = f"OpenBao secret {path}" + (f" (version {version})" if isinstance(version, int) else "")
    if status == 200 and isinstance(data, dict) and isinstance(data.get("data"), dict):
        found = login_from(data["data"], at)
        origin = f"OpenBao {path}" + (f", version {version}" if isinstance(version, int) else "")
        return found if isinstance(found, str) else found._replace(origin=origin)
    if status == 404:
        if isinstance(metadata, dict) and (metadata.get("deletion_time") or metadata.get("destroyed")):
            return f"{at} is deleted (`bao kv undelete` or a new version brings it back)"
        return f"OpenBao has no secret {path} (GET {path.api}: KV v2 mount {path.mount!r}, secret {path.secret!r})"
    if status == 403:
        return Unreadable(ACCESS_DENIED, f"OpenBao refused to read {path}: {said or 'permission denied'} (HTTP 403): "
                                         f"the operator's policy needs `read` on {path.mount}/data/{path.secret}")
    if status == 200:
        return Unreadable(BACKEND_UNAVAILABLE, f"OpenBao answered GET {path.api} with no KV v2 secret (is "
                                               f"{path.mount!r} a KV version 2 mount?)")
    return Unreadable(BACKEND_UNAVAILABLE, f"OpenBao: GET {path.api}: HTTP {status}" + (f": {said}" if said else "")
                      + " (read again later)")


def login_request(mount: str, role: str, jwt: str) -> tuple[str, bytes]:
    """The Kubernetes auth method's login: POST /v1/auth/<mount>/login with the role and the ServiceAccount token."""
    return f"/v1/auth/{mount}/login", json.dumps({"role": role, "jwt": jwt}).encode()


def login_reply(role: str, status: int, body: bytes, now: float) -> Token | Unreadable:
    """A login's reply: the client token (logged in anew at RELOGIN_AT of its lease), or why there is none."""
    reply = _json(body)
    auth = reply.get("auth") if isinstance(reply, dict) else None
    token = auth.get("client_token") if isinstance(auth, dict) else None
    if status == 200 and isinstance(token, str) and token:
        lease = auth.get("lease_duration") if isinstance(auth, dict) else None
        seconds = float(lease) if isinstance(lease, int | float) and lease > 0 else 0.0
        return Token(token, now + RELOGIN_AT * seconds if seconds else None)
    said = _errors(body) or f"HTTP {status}"
    if status in (400, 401, 403):
        return Unreadable(ACCESS_DENIED, f"OpenBao refused the operator's Kubernetes login as role {role!r}: {said} "
                                         f"(HTTP {status}): check the role's bound ServiceAccount and namespace")
    return Unreadable(BACKEND_UNAVAILABLE, f"OpenBao's Kubernetes login as role {role!r} failed: {said}"
                                           + ("" if said.startswith("HTTP") else f" (HTTP {status})")
                                           + " (read again later)")


def token_due(token: Token | None, now: float) -> bool:
    """Whether to log in (again) before the next request."""
    return token is None or (token.relogin_at is not None and now >= token.relogin_at)


def wait_before_read(last: Read | None, path: str, now: float, interval_s: float, cap_s: float) -> NextCheck:
    """When the half's path is due for a read: now when never read or the path changed; else `interval_s` after an
    answer (OpenBao is not watched: a new KV version is seen at the next read), or a backoff doubling up to `cap_s`
    after each read that could not tell."""
    if last is None or last.path != path:
        return NextCheck.now()
    wait = backoff_s(last.unreadable_runs, cap_s) if isinstance(last.found, Unreadable) else interval_s
    return NextCheck.after_last(last.at, wait, now)


def after_read(last: Read | None, path: str, found: Material | Unreadable | str, now: float) -> Read:
    """The memory of a read just made (the count of reads in a row that could not tell)."""
    runs = 0
    if isinstance(found, Unreadable):
        runs = (last.unreadable_runs if last is not None and last.path == path else 0) + 1
    return Read(path, found, now, runs)
