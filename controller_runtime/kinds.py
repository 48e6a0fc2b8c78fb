"""Kinds as (apiVersion, kind): the runtime resolves plural and scope through discovery, so it needs no list."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

__all__ = ["GroupVersionKind", "KindLike", "gvk", "gvk_of"]


class KindLike(Protocol):
    """Anything naming a kind: the runtime's GroupVersionKind, a renderer Kind, a CrdSource."""

    @property
    def api_version(self) -> str: ...

    @property
    def kind(self) -> str: ...


class GroupVersionKind(NamedTuple):
    api_version: str
    kind: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def __str__(self) -> str:
        return f"{self.kind}.{self.group or 'core'}/{self.version}"


def gvk(kind: KindLike) -> GroupVersionKind:
    return kind if isinstance(kind, GroupVersionKind) else GroupVersionKind(kind.api_version, kind.kind)


def gvk_of(obj: Mapping[str, Any]) -> GroupVersionKind:
    """The kind an object names itself (ValueError when it names none)."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        raise ValueError("the object names no apiVersion and kind")
    return GroupVersionKind(api_version, kind)
