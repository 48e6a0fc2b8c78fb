"""Registry credentials where users keep them: Docker's config.json (and its helpers) and Helm's registry config.

Reusable on its own: the PlatformStack controller reads a `kubernetes.io/dockerconfigjson` Secret with
`parse_docker_config` and looks a host up with `credential_for(..., helpers=False)`; the CLI reads the
local files with `local_configs()`. Secrets never leave a Credential's fields (its repr hides the password).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from renderer.yaml_input import Limits, YamlDocument, parse
from toolchain.errors import ToolFailure

__all__ = ["Credential", "DockerConfig", "config_paths", "credential_for", "docker_config_json", "local_configs",
           "parse_docker_config", "registry_key"]

DOCKER_HUB = "docker.io"
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"})
HELPER_TIMEOUT = 10.0
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


def config_paths(env: Mapping[str, str] | None = None) -> Iterator[Path]:
    """Docker's config (DOCKER_CONFIG, else ~/.docker), then Helm's registry config, as the tools look them up."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    docker_dir = env.get("DOCKER_CONFIG")
    yield (Path(docker_dir) if docker_dir else home / ".docker") / "config.json"
    helm = env.get("HELM_REGISTRY_CONFIG")
    if helm:
        yield Path(helm)
    else:
        yield Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "helm" / "registry" / "config.json"


def local_configs(env: Mapping[str, str] | None = None) -> list[DockerConfig]:
    """The configs present on this machine (a missing file is no config; an unreadable one is an error)."""
    env = os.environ if env is None else env
    out = []
    for path in config_paths(env):
        if not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ToolFailure(f"{path}: cannot read the registry credentials: {e.strerror}") from None
        out.append(parse_docker_config(data, str(path)))
    return out


def _run_helper(helper: str, host: str) -> Credential | None:
    """`docker-credential-<helper> get` for host, bounded; None when the helper knows no credentials for it."""
    binary = f"docker-credential-{helper}"
    server = "https://index.docker.io/v1/" if registry_key(host) == DOCKER_HUB else host  # as docker login stores it
    try:
        proc = subprocess.run([binary, "get"], input=server.encode(), capture_output=True, timeout=HELPER_TIMEOUT,
                              check=False)
    except FileNotFoundError:
        raise ToolFailure(f"{binary} not found: the Docker config names it for {host}; install it or log in "
                          f"with `docker login {host}` without a helper") from None
    except subprocess.TimeoutExpired:
        raise ToolFailure(f"{binary} did not answer within {HELPER_TIMEOUT:g}s for {host}") from None
    if proc.returncode != 0:
        return None  # "credentials not found in native keychain": as if none were configured
    try:
        reply = json.loads(proc.stdout)
        username, secret = reply["Username"], reply["Secret"]
    except (ValueError, KeyError, TypeError):
        raise ToolFailure(f"{binary} replied with something that is not a credential for {host}") from None
    if not isinstance(username, str) or not isinstance(secret, str) or username == "<token>":
        return None  # an identity (OAuth refresh) token: not a Basic credential
    return Credential(username, secret, binary)


def credential_for(configs: Sequence[DockerConfig], host: str, *, helpers: bool = True) -> Credential | None:
    """The first credential for host: per config, its inline auth, then its helper for the host, then its store."""
    key = registry_key(host)
    for config in configs:
        if key in config.auths:
            return config.auths[key]
        helper = config.helpers.get(key) or config.store
        if helpers and helper:
            found = _run_helper(helper, host)
            if found is not None:
                return found
    return None


def docker_config_json(host: str, credential: Credential) -> bytes:
    """A config.json holding only this host's credential: what cosign reads through DOCKER_CONFIG."""
    return json.dumps({"auths": {host: {"auth": credential.basic()}}}, sort_keys=True).encode()
