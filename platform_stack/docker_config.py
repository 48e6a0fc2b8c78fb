"""A Docker config.json read (pure): the inline credential per registry, the helpers it names, and the one-host
config cosign is given. The same reader serves a local file and a `kubernetes.io/dockerconfigjson` Secret; a
Credential's repr hides its password."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from renderer.yaml_input import Limits, YamlDocument, parse

__all__ = ["DOCKER_HUB", "Credential", "DockerConfig", "docker_config_json", "parse_docker_config", "registry_key"]

DOCKER_HUB = "docker.io"
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"})
_LIMITS = Limits(max_bytes=1 << 20, max_depth=16, max_nodes=20_000)


@dataclasses.dataclass(frozen=True)
class Credential:
    """A username and password (or token) for one registry, and where it was found (for messages)."""

    username: str
    password: str = dataclasses.field(repr=False)
    source: str = ""

    def basic(self) -> str:
        """The base64 `user:password` of an HTTP Basic header and of a config.json `auth` entry."""
        return base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


@dataclasses.dataclass(frozen=True)
class DockerConfig:
    """What one config.json says: inline credentials per registry, per-registry helpers, a default store."""

    display: str
    auths: Mapping[str, Credential]
    helpers: Mapping[str, str]
    store: str | None


def registry_key(server: str) -> str:
    """The registry a config key or a reference host names: scheme and path dropped, Docker Hub's names as one."""
    host = server.strip()
    for scheme in ("https://", "http://"):
        if host.lower().startswith(scheme):
            host = host[len(scheme):]
    host = host.split("/", 1)[0].lower()
    return DOCKER_HUB if host in _HUB_ALIASES else host


def _text(doc: YamlDocument, entry: Mapping[str, Any], path: tuple[str, ...], key: str) -> str | None:
    value = entry.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise doc.error((*path, key), "expected a string")
    return value


def _credential(doc: YamlDocument, server: str, entry: Any) -> Credential | None:
    path = ("auths", server)
    if not isinstance(entry, dict):
        raise doc.error(path, "expected a mapping with auth (or username and password)")
    auth = _text(doc, entry, path, "auth")
    if auth is not None:
        try:
            username, sep, password = base64.b64decode(auth, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise doc.error((*path, "auth"), "not base64 of user:password") from None
        if not sep:
            raise doc.error((*path, "auth"), "not base64 of user:password")
        return Credential(username, password, doc.display)
    user, secret = _text(doc, entry, path, "username"), _text(doc, entry, path, "password")
    if user is not None and secret is not None:
        return Credential(user, secret, doc.display)
    return None  # e.g. only an identitytoken (OAuth refresh token), or a placeholder for a helper


def parse_docker_config(text: str | bytes, display: str) -> DockerConfig:
    """A Docker config.json (or a Secret's .dockerconfigjson, Helm's registry config): UserError at the field."""
    doc = parse(text, display, json_only=True, limits=_LIMITS)
    data = doc.data if doc.data is not None else {}
    if not isinstance(data, dict):
        raise doc.error((), "a Docker config is a JSON object (auths, credHelpers, credsStore)")
    auths: dict[str, Credential] = {}
    raw_auths = data.get("auths", {})
    if not isinstance(raw_auths, dict):
        raise doc.error(("auths",), "expected a mapping of registry -> {auth}")
    for server, entry in raw_auths.items():
        credential = _credential(doc, server, entry)
        if credential is not None:
            auths.setdefault(registry_key(server), credential)
    raw_helpers = data.get("credHelpers", {})
    if not isinstance(raw_helpers, dict) or not all(isinstance(v, str) for v in raw_helpers.values()):
        raise doc.error(("credHelpers",), "expected a mapping of registry -> helper name")
    store = data.get("credsStore")
    if store is not None and not isinstance(store, str):
        raise doc.error(("credsStore",), "expected a helper name")
    helpers = {registry_key(k): v for k, v in raw_helpers.items()}
    return DockerConfig(display, auths, helpers, store or None)


def docker_config_json(host: str, credential: Credential) -> bytes:
    """A config.json holding only this host's credential: what cosign reads through DOCKER_CONFIG."""
    return json.dumps({"auths": {host: {"auth": credential.basic()}}}, sort_keys=True).encode()
