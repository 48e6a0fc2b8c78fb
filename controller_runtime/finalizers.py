"""A finalizer added to or removed from an object by merge patch under the client's own field manager (never the
status one: a finalizer is the object's, not its status'), with the object's resourceVersion as a precondition (a
change since it was read fails the write with 409, and the pass starts over); nothing is written when the object
already is so. The one place finalizers are handled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_runtime.client import Kube
from controller_runtime.informer import Informer
from controller_runtime.kinds import gvk_of

__all__ = ["add_finalizer", "has_finalizer", "remove_finalizer"]


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or [])


async def add_finalizer(kube: Kube, cache: Informer | None, obj: dict[str, Any], finalizer: str) -> dict[str, Any]:
    """`obj` with `finalizer` last in its list (the reply goes into `cache` when one is given)."""
    present = list(obj["metadata"].get("finalizers") or [])
    if finalizer in present:
        return obj
    return await _set(kube, cache, obj, [*present, finalizer])


async def remove_finalizer(kube: Kube, cache: Informer | None, obj: dict[str, Any],
                           finalizer: str) -> dict[str, Any]:
    """`obj` without `finalizer` (the last one gone, the server deletes an object being deleted)."""
    present = list(obj["metadata"].get("finalizers") or [])
    if finalizer not in present:
        return obj
    return await _set(kube, cache, obj, [f for f in present if f != finalizer])


async def _set(kube: Kube, cache: Informer | None, obj: dict[str, Any], finalizers: list[str]) -> dict[str, Any]:
    meta = obj["metadata"]
    updated = await kube.merge(gvk_of(obj), meta["name"], meta.get("namespace"),
                               {"metadata": {"finalizers": finalizers}}, resource_version=meta["resourceVersion"])
    if cache is not None:
        cache.update(updated)
    return updated
