"""Reading any Kubernetes object: its key, its controlling owner, the primaries a watched object maps to."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controller_runtime.kinds import KindLike

__all__ = ["Key", "controller_owners", "controller_uid", "itself", "key_of"]

Key = tuple[str, str]  # (namespace, name); namespace "" for a cluster-scoped object


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata", {})
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of an object's controlling owner."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def controller_owners(kind: KindLike) -> Callable[[Mapping[str, Any]], Iterable[Key]]:
    """Primary keys of a watched object: its controlling owner of `kind` (same namespace)."""

    def owners(obj: Mapping[str, Any]) -> Iterable[Key]:
        meta = obj.get("metadata", {})
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == kind.kind and ref.get("apiVersion") == kind.api_version:
                yield str(meta.get("namespace", "")), str(ref.get("name", ""))

    return owners


def itself(obj: Mapping[str, Any]) -> Iterable[Key]:
    yield key_of(obj)
