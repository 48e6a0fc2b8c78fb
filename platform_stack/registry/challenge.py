"""A registry's `Www-Authenticate` challenge read (RFC 7235), and the token request it asks for (the Docker token
protocol ghcr.io, Docker Hub and Harbor speak)."""

from __future__ import annotations

import dataclasses
import re
from urllib.parse import urlsplit

__all__ = ["Challenge", "parse_challenge", "token_from"]

# auth-param = token "=" ( token / quoted-string ); a quoted scope holds commas ("repository:a:pull,push").
_PARAM = re.compile(r'([A-Za-z][A-Za-z0-9_-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)')


@dataclasses.dataclass(frozen=True)
class Challenge:
    """`Basic realm=...` or `Bearer realm=...,service=...,scope=...`: the scheme (lower case) and its parameters."""

    scheme: str
    params: dict[str, str]

    @property
    def realm(self) -> str | None:
        return self.params.get("realm")

    def token_url(self, plain_http: bool) -> str | None:
        """The token service's URL, None when the challenge names none we may use: an absolute http(s) URL, and
        plain HTTP only when the registry itself is spoken to over plain HTTP (credentials never go in clear to
        a TLS registry's token service)."""
        realm = self.realm
        if not realm:
            return None
        parts = urlsplit(realm)
        if parts.scheme not in ("http", "https") or not parts.netloc or (parts.scheme == "http" and not plain_http):
            return None
        return realm


def parse_challenge(header: str) -> Challenge | None:
    """The first challenge of a `Www-Authenticate` header, None when there is none."""
    scheme, _, rest = header.strip().partition(" ")
    if not scheme or "=" in scheme:
        return None
    params: dict[str, str] = {}
    for name, value in _PARAM.findall(rest):
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params.setdefault(name.lower(), value)
    return Challenge(scheme.lower(), params)


def token_from(data: object) -> str | None:
    """The bearer token of a token service's JSON reply (`token`, or OAuth2's `access_token`)."""
    if not isinstance(data, dict):
        return None
    token = data.get("token") or data.get("access_token")
    return token if isinstance(token, str) and token and token.isprintable() and " " not in token else None
