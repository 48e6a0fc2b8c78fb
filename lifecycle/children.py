"""An Application's children: stamped with its namespace and controlling owner reference, and which of the live
ones a pass prunes (an earlier apply made them, this render no longer has them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_runtime.objects import controller_uid

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
             uid: str) -> list[Mapping[str, Any]]:
    """Live children that the desired set no longer has and that this owner controls (its uid in their controlling
    ownerReference, never a label: a label anyone may write), in this namespace: what an earlier apply made."""
    wanted = {(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in desired}
    out = []
    for obj in live:
        meta = obj.get("metadata", {})
        if (obj.get("apiVersion"), obj.get("kind"), meta.get("name")) in wanted:
            continue
        if meta.get("namespace") != namespace or controller_uid(obj) != uid:
            continue
        out.append(obj)
    return out
