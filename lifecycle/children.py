"""An Application's children: stamped with its namespace and controlling owner reference, and which of the live
ones a pass prunes (an earlier apply made them, this render no longer has them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from renderer.names import INSTANCE_LABEL

__all__ = ["owned", "owner_reference", "prunable"]


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """A controlling ownerReference to `owner` (the garbage collector deletes the child with it)."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def owned(objects: Iterable[Mapping[str, Any]], owner: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rendered objects in the owner's namespace, each with a controlling reference to it."""
    reference, namespace = owner_reference(owner), owner["metadata"]["namespace"]
    out = []
    for obj in objects:
        child = dict(obj)
        child["metadata"] = {**obj["metadata"], "namespace": namespace, "ownerReferences": [reference]}
        out.append(child)
    return out


def prunable(live: Iterable[Mapping[str, Any]], desired: Sequence[Mapping[str, Any]], namespace: str,
             instance: str) -> list[Mapping[str, Any]]:
    """Live children (already filtered to this owner's uid) that the desired set no longer has, in this namespace
    and carrying this instance label: what an earlier apply of this Application made."""
    wanted = {(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in desired}
    out = []
    for obj in live:
        meta = obj.get("metadata", {})
        if (obj.get("apiVersion"), obj.get("kind"), meta.get("name")) in wanted:
            continue
        if meta.get("namespace") != namespace or (meta.get("labels") or {}).get(INSTANCE_LABEL) != instance:
            continue
        out.append(obj)
    return out
