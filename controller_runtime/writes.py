"""The write steps of a reconcile, each writing nothing when the cluster already is what was decided and each
putting the server's answer in the cache: ensure an object (server-side apply unless the live one already is what
the apply makes of it), write a status (the one status writer), delete exactly the objects a core chose (prune)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, NamedTuple

from controller_runtime.client import Deletion, Kube
from controller_runtime.compare import status_up_to_date, up_to_date
from controller_runtime.informer import Informer
from controller_runtime.kinds import gvk_of

__all__ = ["Ensured", "Pruned", "delete_exactly", "ensure", "prune", "write_status"]


class Ensured(NamedTuple):
    """What ensure did: the object as the server holds it (the cached one when nothing was written), the live
    object it was compared with (None: the cache had none), and whether an apply was sent."""

    obj: dict[str, Any]
    before: dict[str, Any] | None
    written: bool


async def ensure(kube: Kube, cache: Informer, obj: Mapping[str, Any], *, force: bool = True,
                 field_manager: str | None = None) -> Ensured:
    """Server-side apply `obj` (under `field_manager`, else the client's) unless the object `cache` holds under its
    name already is what the apply would make of it (controller_runtime.compare); the reply goes into `cache`."""
    meta = obj["metadata"]
    live = cache.get(str(meta.get("namespace") or ""), meta["name"])
    if live is not None and up_to_date(live, obj, field_manager or kube.field_manager):
        return Ensured(live, live, False)
    result = await kube.apply(obj, force=force, field_manager=field_manager)
    cache.update(result)
    return Ensured(result, live, True)


async def write_status(kube: Kube, cache: Informer, obj: dict[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` after applying `status` as its whole status through the /status subresource under the client's status
    field manager (a field it applied before and `status` leaves out is removed); nothing is written when the status
    already is that (then `obj` itself is returned). The reply goes into `cache`."""
    if status_up_to_date(obj, status, kube.status_field_manager):
        return obj
    meta = obj["metadata"]
    body = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "status": dict(status),
            "metadata": {"name": meta["name"], **({"namespace": meta["namespace"]} if meta.get("namespace") else {})}}
    written = await kube.apply(body, status=True)
    cache.update(written)
    return written


class Pruned(NamedTuple):
    """One object a prune was asked to delete, and what the delete did (controller_runtime.client.Deletion)."""

    obj: Mapping[str, Any]
    deletion: Deletion


async def delete_exactly(kube: Kube, cache: Informer, obj: Mapping[str, Any], *, unchanged: bool = False) -> Deletion:
    """Delete `obj` (as read) only while it is still that object (its uid: one made under the name since is left
    alone) and, when `unchanged`, still as it was read (its resourceVersion: a change since makes the decision
    stale). The cache forgets it (a newer object under its name stays)."""
    meta = obj["metadata"]
    namespace, name, uid = meta.get("namespace"), meta["name"], str(meta["uid"])
    deletion = await kube.delete_exactly(gvk_of(obj), name, namespace, uid,
                                         str(meta["resourceVersion"]) if unchanged else None)
    cached = cache.get(namespace or "", name)
    if cached is not None and cached["metadata"].get("uid") == uid:
        cache.forget(namespace or "", name)
    return deletion


async def prune(kube: Kube, cache: Informer, chosen: Iterable[Mapping[str, Any]], *,
                unchanged: bool = False) -> AsyncIterator[Pruned]:
    """Delete exactly the objects `chosen` (by a core, from what it read), one after the other (delete_exactly);
    yields each as it is done."""
    for obj in chosen:
        yield Pruned(obj, await delete_exactly(kube, cache, obj, unchanged=unchanged))
