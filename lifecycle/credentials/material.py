"""A SourceCredential half's material as its backend yields it: the login (username and password), why there is none
(Present False), or why the backend could not tell (Present Unknown). Messages name keys and where they were looked
for, never a value."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["MATERIAL_KEYS", "Found", "Material", "Unreadable", "login_from", "material"]

MATERIAL_KEYS = ("username", "password")  # kubernetes.io/basic-auth's keys, in the Secret the backend yields


class Material(NamedTuple):
    """A half's login. Never logged, never in a message or an Event: only the objects derived from it carry it.
    `origin` says where it was read (an OpenBao path and version; empty for an unsealed Secret)."""

    username: str
    password: str
    origin: str = ""

    def __repr__(self) -> str:  # a traceback or a debug print never shows the password
        return "Material(<redacted>)"


class Unreadable(NamedTuple):
    """A backend that could not say whether the material is there (Present Unknown): the reason and why. What the
    half derived before stays as it was."""

    reason: str
    message: str


# A half's material, why there is none (Present False), why its backend cannot tell, or None: no such half.
Found = Material | Unreadable | str | None


def material(secret: Mapping[str, Any] | None, name: str) -> Material | str:
    """The login in the unsealed Secret `name`, or why there is none (which keys are missing or unreadable)."""
    if secret is None:
        return (f"Secret {name} not found (the SealedSecrets controller makes it from the SealedSecret of that name; "
                "on a cluster without it, nothing unseals the material)")
    data = secret.get("data") or {}
    values: dict[str, str | None] = {}
    for key in MATERIAL_KEYS:
        try:
            values[key] = base64.b64decode(str(data.get(key) or ""), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            values[key] = None
    return login_from(values, f"Secret {name}")


def login_from(values: Mapping[str, Any], where: str) -> Material | str:
    """The login in a backend's key-value map (the keys MATERIAL_KEYS, one line of text each), or which keys are
    missing or unusable in `where` (never their values)."""
    wrong = [key for key in MATERIAL_KEYS if not isinstance(values.get(key), str) or not values[key]
             or "\n" in values[key] or "\r" in values[key]]
    if wrong:
        return f"{where} lacks a usable {' and '.join(wrong)} (keys {', '.join(MATERIAL_KEYS)}: one line of UTF-8 each)"
    return Material(str(values["username"]), str(values["password"]))
