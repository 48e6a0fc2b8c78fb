"""An Application's children: stamped with its namespace and controlling owner reference, and which of the live
ones a pass prunes (an earlier apply made them, this render no longer has them) and when."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_runtime.objects import controller_uid

__all__ = ["in_use", "owned", "owner_reference", "prunable", "secrets_read"]


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


def secrets_read(pod: Mapping[str, Any]) -> set[str]:
    """The Secrets a pod's (or a pod template's) containers read: env secretKeyRef, envFrom secretRef, secret
    volumes."""
    spec = pod.get("spec") or {}
    names: set[str] = set()
    for container in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        for env in container.get("env") or ():
            ref = ((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
            if ref:
                names.add(str(ref))
        for source in container.get("envFrom") or ():
            ref = (source.get("secretRef") or {}).get("name")
            if ref:
                names.add(str(ref))
    for volume in spec.get("volumes") or ():
        ref = (volume.get("secret") or {}).get("secretName")
        if ref:
            names.add(str(ref))
    return names


def in_use(claims: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """The claims (by name) whose connection Secret a pod still reads, terminating pods included: a need removed
    from the app keeps its claim (and the backend its credentials) until the last pod started with it is gone, so
    that the old pods answer with their backend while the rollout and the Gateway's drain replace them."""
    read = set().union(*(secrets_read(p) for p in pods))
    out = set()
    for claim in claims:
        secret = (((claim.get("status") or {}).get("connection") or {}).get("secretName"))
        if secret and secret in read:
            out.add(str(claim["metadata"]["name"]))
    return out
