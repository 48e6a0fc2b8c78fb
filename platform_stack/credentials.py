"""Registry credentials where users keep them: Docker's config.json (and its helpers) and Helm's registry config.

Reusable on its own: the PlatformStack controller reads a `kubernetes.io/dockerconfigjson` Secret with
`parse_docker_config` (platform_stack.docker_config, pure) and looks a host up with `credential_for(...,
helpers=False)`; the CLI reads the local files with `local_configs()`. A helper is a process run here (I/O).
Secrets never leave a Credential's fields (its repr hides the password).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from platform_stack.docker_config import (
    DOCKER_HUB,
    Credential,
    DockerConfig,
    docker_config_json,
    parse_docker_config,
    registry_key,
)
from toolchain.errors import ToolFailure

__all__ = ["Credential", "DockerConfig", "config_paths", "credential_for", "docker_config_json", "local_configs",
           "parse_docker_config", "registry_key"]

HELPER_TIMEOUT = 10.0


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
