"""The PlatformStack's Secrets read (pure): a `kubernetes.io/dockerconfigjson` Secret as a registry login, a
Secret's `*.pub` entries as the cosign public keys a chart must verify with."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any

from platform_stack.docker_config import DockerConfig, parse_docker_config
from platform_stack.errors import StackError

__all__ = ["DOCKER_CONFIG_KEY", "MAX_KEYS", "PublicKeys", "docker_config_from_secret", "keys_from_secret"]

DOCKER_CONFIG_KEY = ".dockerconfigjson"
# Each key costs a cosign run per candidate: whoever can write the Secret must not make a check run cosign without
# bound (platform_stack.upstream tries at most MAX_CANDIDATES versions).
MAX_KEYS = 8


@dataclasses.dataclass(frozen=True)
class PublicKeys:
    """The cosign public keys of the verify Secret: (file name, PEM) of each `*.pub` entry."""

    secret: str  # "apprafter-system/platform-stack-keys", for messages
    keys: tuple[tuple[str, bytes], ...]

    @property
    def fingerprint(self) -> str:
        """Which keys these are: a verification is cached for one key set only."""
        digest = hashlib.sha256()
        for name, pem in sorted(self.keys):
            digest.update(f"{len(name)}:{name}:{len(pem)}:".encode() + pem)
        return digest.hexdigest()


def docker_config_from_secret(secret: Mapping[str, Any], display: str) -> DockerConfig:
    """The login of a kubernetes.io/dockerconfigjson Secret (its data is base64); StackError or UserError naming the
    Secret and the key when it cannot be read."""
    where = f"Secret {display} {DOCKER_CONFIG_KEY}"
    raw = (secret.get("data") or {}).get(DOCKER_CONFIG_KEY)
    if not isinstance(raw, str):
        raise StackError(f"{where}: missing (a kubernetes.io/dockerconfigjson Secret has it)")
    try:
        text = base64.b64decode(raw, validate=True)
    except binascii.Error:
        raise StackError(f"{where}: not base64") from None
    return parse_docker_config(text, where)


def keys_from_secret(secret: Mapping[str, Any], display: str) -> PublicKeys:
    """The `*.pub` entries of a Secret (data is base64); StackError naming the Secret when there is none."""
    keys: list[tuple[str, bytes]] = []
    for name, value in sorted((secret.get("data") or {}).items()):
        if not str(name).endswith(".pub"):
            continue
        try:
            keys.append((str(name), base64.b64decode(str(value), validate=True)))
        except binascii.Error:
            raise StackError(f"Secret {display}: {name}: not base64") from None
    if not keys:
        raise StackError(f"Secret {display}: no *.pub entry (cosign public keys)")
    if len(keys) > MAX_KEYS:
        raise StackError(f"Secret {display}: {len(keys)} *.pub entries, at most {MAX_KEYS} (each is tried in turn)")
    return PublicKeys(display, tuple(keys))
