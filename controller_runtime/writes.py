"""The write steps of a reconcile, each writing nothing when the cluster already is what was decided and each
putting the server's answer in the cache when one is given: ensure an object (server-side apply unless the live one
already is what the apply makes of it; the live one from an informer's cache, from the caller's own fresh read, or
read fresh here), create one once (a 409 reads the winner), write a status (the one status writer), delete exactly
the objects a core chose (prune). Nothing outside this module compares a live object with a desired one before a
write (tests/test_layers.py holds that)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Final, Literal, NamedTuple

from controller_runtime.client import CHANGED, Deletion, Kube
from controller_runtime.compare import status_up_to_date, up_to_date
from controller_runtime.errors import KubeError
from controller_runtime.informer import Informer
from controller_runtime.kinds import gvk_of

__all__ = ["CREATED", "UNCHANGED", "UNREAD", "UPDATED", "Ensured", "Pruned", "create_once", "delete_exactly", "ensure",
           "prune", "write_status"]

Result = Literal["unchanged", "created", "updated"]
UNCHANGED: Final[Result] = "unchanged"
CREATED: Final[Result] = "created"
UPDATED: Final[Result] = "updated"


class _Unread:
    """The live object was not read by the caller: ensure reads it (from the cache, else fresh)."""

    def __repr__(self) -> str:
        return "UNREAD"


UNREAD: Final = _Unread()


class Ensured(NamedTuple):
    """What ensure did: the object as the server holds it (the live one when nothing was written), the live object
    it was compared with (None: there was none), and what the write was (unchanged, created or updated)."""

    obj: dict[str, Any]
    before: dict[str, Any] | None
    result: Result

    @property
    def written(self) -> bool:
        return self.result != UNCHANGED


async def ensure(kube: Kube, cache: Informer | None, obj: Mapping[str, Any], *,
                 live: Mapping[str, Any] | _Unread | None = UNREAD, force: bool = True,
                 field_manager: str | None = None, over: str | None = None) -> Ensured:
    """Server-side apply `obj` (under `field_manager`, else the client's) unless the live object already is what the
    apply would make of it (controller_runtime.compare). The live object is `live` when the caller read it fresh
    (None: it does not exist), else the one `cache` holds, else read fresh here; the reply goes into `cache`.
    `over`: only over that resourceVersion of the object (the one a decision was made on): a newer one is a 409."""
    if over is not None:
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": over}}
    meta = obj["metadata"]
    namespace = str(meta.get("namespace") or "")
    current: Mapping[str, Any] | None
    if not isinstance(live, _Unread):
        current = live
    elif cache is not None:
        current = cache.get(namespace, meta["name"])
    else:
        current = await kube.get(gvk_of(obj), meta["name"], namespace or None)
    before = dict(current) if current is not None else None
    if before is not None and up_to_date(before, obj, field_manager or kube.field_manager):
        return Ensured(before, before, UNCHANGED)
    result = await kube.apply(obj, force=force, field_manager=field_manager)
    if cache is not None:
        cache.update(result)
    return Ensured(result, before, CREATED if before is None else UPDATED)


async def create_once(kube: Kube, cache: Informer | None, obj: Mapping[str, Any]) -> Ensured:
    """`obj` created if nothing of its name exists, never changed after (a generated password: whoever made it
    first wins): a 409 means another pass made it meanwhile, and the winner is read and returned (UNCHANGED, the
    winner as `before`; CREATED: ours)."""
    meta = obj["metadata"]
    try:
        made, before, result = await kube.create(obj), None, CREATED
    except KubeError as e:
        if e.code != 409:
            raise
        winner = await kube.get(gvk_of(obj), meta["name"], meta.get("namespace"))
        if winner is None:  # made and deleted again in between: the pass starts over
            raise KubeError(f"create {obj['kind']} {meta['name']}: made by another pass and deleted since", 409) from e
        made, before, result = winner, winner, UNCHANGED
    if cache is not None:
        cache.update(made)
    return Ensured(made, before, result)


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


async def delete_exactly(kube: Kube, cache: Informer | None, obj: Mapping[str, Any], *,
                         unchanged: bool = False) -> Deletion:
    """Delete `obj` (as read) only while it is still that object (its uid: one made under the name since is left
    alone) and, when `unchanged`, still as it was read (its resourceVersion: a change since makes the decision
    stale). Once it is gone the cache forgets it (a newer object under its name stays); one that changed stays
    cached (the watch has brought, or brings, its new version)."""
    meta = obj["metadata"]
    namespace, name, uid = meta.get("namespace"), meta["name"], str(meta["uid"])
    deletion = await kube.delete_exactly(gvk_of(obj), name, namespace, uid,
                                         str(meta["resourceVersion"]) if unchanged else None)
    cached = cache.get(namespace or "", name) if cache is not None else None
    if cache is not None and deletion != CHANGED and cached is not None and cached["metadata"].get("uid") == uid:
        cache.forget(namespace or "", name)
    return deletion


async def prune(kube: Kube, cache: Informer, chosen: Iterable[Mapping[str, Any]], *,
                unchanged: bool = False) -> AsyncIterator[Pruned]:
    """Delete exactly the objects `chosen` (by a core, from what it read), one after the other (delete_exactly);
    yields each as it is done."""
    for obj in chosen:
        yield Pruned(obj, await delete_exactly(kube, cache, obj, unchanged=unchanged))
