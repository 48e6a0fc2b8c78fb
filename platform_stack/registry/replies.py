"""What a registry's reply means for the user: the one line for each failing status, in the user's words."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from platform_stack.docker_config import Credential
from platform_stack.errors import RegistryFailure
from renderer.yaml_input import Limits, parse
from toolchain.errors import UserError

__all__ = ["MAX_BODY", "REPLY_LIMITS", "RegistryFailure", "Reply", "describe", "failure_words", "short",
           "status_failure"]

MAX_BODY = 4 << 20  # a manifest is at most 4 MiB (OCI distribution); blobs have their own cap
REPLY_LIMITS = Limits(max_bytes=MAX_BODY, max_depth=16, max_nodes=100_000)
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


@dataclasses.dataclass(frozen=True)
class Reply:
    """One reply, its body read within the request's cap: what the client's calls look at."""

    status: int
    reason: str
    headers: Mapping[str, str]  # case-insensitive (httpx.Headers)
    body: bytes
    next_page: str | None  # the `Link: <...>; rel="next"` target, as sent


def short(text: object, limit: int = 120) -> str:
    """A registry's words, made safe to print on one line."""
    return _UNPRINTABLE.sub("?", str(text))[:limit]


def describe(method: str, url: str) -> str:
    """`GET manifest 0.2.0`, `POST blob upload`, ...: the request in a user's words (never a query string)."""
    path = urlsplit(url).path
    if "/manifests/" in path:
        return f"{method} manifest {path.rsplit('/manifests/', 1)[1]}"
    if "/blobs/uploads" in path:
        return f"{method} blob upload"
    if "/blobs/" in path:
        return f"{method} blob"
    return f"{method} {path or '/'}"


def failure_words(reply: Reply) -> str:
    """`HTTP 405 Method Not Allowed: <the registry's first error message>`: a status no caller expected."""
    detail = ""
    with contextlib.suppress(UserError):
        body = parse(reply.body, "reply", json_only=True, limits=REPLY_LIMITS).data
        errors = body.get("errors") if isinstance(body, dict) else None
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            detail = f": {short(errors[0].get('message', ''))}"
    return f"HTTP {reply.status} {short(reply.reason, 40)}{detail}"


def status_failure(host: str, what: str, reply: Reply, credential: Credential | None,
                   searched: Sequence[str]) -> str | None:
    """The line for a status no caller can use (401, 403, 429, 5xx); None for 2xx, 3xx, 404 and other 4xx, which
    the caller words itself."""
    status = reply.status
    if status < 400 or status == 404 or (400 <= status < 500 and status not in (401, 403, 429)):
        return None
    challenge = reply.headers.get("Www-Authenticate", "")
    if status == 401 and 'error="insufficient_scope"' in challenge and credential is not None:
        scope = re.search(r'scope="([^"]*)"', challenge)
        wanted = short(scope.group(1), 160) if scope else "this"
        return (f"registry {host}: {what}: 401 Unauthorized (insufficient_scope): the credentials from "
                f"{credential.source} may not do {wanted}")
    if status == 401:
        if credential is None:
            where = ", ".join(searched) or "no Docker or Helm registry config"
            remedy = (f"no credentials for {host} (looked in {where}): run `docker login {host}` or "
                      f"`helm registry login {host}`")
        else:
            remedy = f"the credentials for {host} from {credential.source} were refused: log in again"
        return f"registry {host}: {what}: 401 Unauthorized: {remedy}"
    if status == 403:
        who = f"the credentials from {credential.source}" if credential else "anonymous access"
        return (f"registry {host}: {what}: 403 Forbidden: {who} may not do this (check the account's access to the "
                "repository)")
    if status == 429:
        return f"registry {host}: {what}: 429 Too Many Requests: rate limited, retry later"
    return f"registry {host}: {what}: HTTP {status} {short(reply.reason, 40)}: the registry failed, retry later"
