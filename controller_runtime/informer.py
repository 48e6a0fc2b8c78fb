"""A list+watch cache of one kind: resumes watches from the last resourceVersion, re-lists on 410 Gone and when a
watch stalls (open past its deadline with nothing received: the client's watch_deadline)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from controller_runtime.client import ALL_NAMESPACES, STALLED, Kube
from controller_runtime.errors import KubeError
from controller_runtime.kinds import GroupVersionKind, KindLike, gvk
from controller_runtime.metrics import WATCH_RESTARTS
from controller_runtime.objects import Key, controller_uid, key_of

__all__ = ["Handler", "Informer"]

log = logging.getLogger("apprafter.informer")

Handler = Callable[[str, dict[str, Any]], None]  # (ADDED|MODIFIED|DELETED, object)


def _version(obj: Mapping[str, Any]) -> int | None:
    rv = obj.get("metadata", {}).get("resourceVersion")
    return int(rv) if isinstance(rv, str) and rv.isdigit() else None


class Informer:
    """Objects of one kind (optionally one label selector) in the watched namespaces, kept current by watches."""

    def __init__(self, kube: Kube, kind: KindLike, namespaces: Sequence[str] = (ALL_NAMESPACES,),
                 labels: Mapping[str, str] | None = None, max_delay: float = 5.0) -> None:
        self.kube = kube
        self.kind: GroupVersionKind = gvk(kind)
        self.namespaces = tuple(namespaces) or (ALL_NAMESPACES,)
        self.labels = dict(labels or {})
        self.max_delay = max_delay
        self.store: dict[Key, dict[str, Any]] = {}
        self._owned: dict[str, set[Key]] = {}  # controller owner uid -> keys: a pass finds its children directly
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self._listed: set[str] = set()
        self.not_served: str | None = None  # why the kind cannot be listed (e.g. its CRD is not installed)

    @property
    def name(self) -> str:
        return str(self.kind)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get((namespace, name))

    def items(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o for (ns, _), o in self.store.items() if namespace is None or ns == namespace]

    def owned_by(self, uid: str) -> list[dict[str, Any]]:
        """Objects whose controlling owner has this uid."""
        return [self.store[k] for k in self._owned.get(uid, ()) if k in self.store]

    def _put(self, key: Key, obj: dict[str, Any]) -> None:
        self._drop(key)
        self.store[key] = obj
        uid = controller_uid(obj)
        if uid:
            self._owned.setdefault(uid, set()).add(key)

    def _drop(self, key: Key) -> dict[str, Any] | None:
        old = self.store.pop(key, None)
        uid = controller_uid(old) if old else None
        if uid and uid in self._owned:
            self._owned[uid].discard(key)
            if not self._owned[uid]:
                del self._owned[uid]
        return old

    def update(self, obj: Mapping[str, Any]) -> None:
        """Write-through: what our own write returned, unless the cache already holds a newer version."""
        key = key_of(obj)
        old = self.store.get(key)
        new_v, old_v = _version(obj), _version(old) if old else None
        if old_v is not None and new_v is not None and new_v < old_v:
            return
        self._put(key, dict(obj))

    def forget(self, namespace: str, name: str) -> None:
        self._drop((namespace, name))

    def _notify(self, event: str, obj: dict[str, Any]) -> None:
        for handler in self.handlers:
            handler(event, obj)

    def _replace(self, namespace: str, items: list[dict[str, Any]]) -> None:
        """A fresh list: add/modify what it holds, delete what it lost (for this namespace scope)."""
        fresh = {key_of(o): o for o in items}
        for key in [k for k in self.store if namespace == ALL_NAMESPACES or k[0] == namespace]:
            if key not in fresh:
                gone = self._drop(key)
                if gone is not None:
                    self._notify("DELETED", gone)
        for key, obj in fresh.items():
            old = self.store.get(key)
            self._put(key, obj)
            if old is None or old.get("metadata", {}).get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self._notify("MODIFIED" if old else "ADDED", obj)

    def _event(self, event: str, obj: dict[str, Any]) -> None:
        key = key_of(obj)
        if event == "DELETED":
            self._drop(key)
        else:
            old = self.store.get(key)
            new_v, old_v = _version(obj), _version(old) if old else None
            if old_v is not None and new_v is not None and new_v <= old_v:
                return  # our own write already put this version (or a newer one) here: nothing new to react to
            self._put(key, obj)
        self._notify(event, obj)

    async def run(self) -> None:
        await asyncio.gather(*(self._run_scope(ns) for ns in self.namespaces))

    async def _run_scope(self, namespace: str) -> None:
        delay = 0.5
        while True:
            try:
                items, version = await self.kube.list(self.kind, namespace, self.labels)
            except KubeError as e:
                self.not_served = str(e) if e.code == 404 else None
                if e.code == 404:
                    self._mark_listed(namespace)  # nothing to wait for: reported when an object of it is applied
                log.warning("list failed, retrying", extra={"resource": self.name, "error": str(e),
                                                            "retry_in": delay})
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_delay)
                continue
            self.not_served = None
            WATCH_RESTARTS.labels(self.name, "relist").inc()
            self._replace(namespace, items)
            self._mark_listed(namespace)
            await self._watch(namespace, version)
            delay = 0.5

    def _mark_listed(self, namespace: str) -> None:
        self._listed.add(namespace)
        if self._listed >= set(self.namespaces):
            self.synced.set()

    async def _watch(self, namespace: str, version: str) -> None:
        """Watch from `version`, resuming after any failure from the last version seen; returns (to re-list) on 410
        Gone and on a stalled watch, whose events may have been lost on the way."""
        delay = 0.5
        while True:
            try:
                async for event, obj in self.kube.watch(self.kind, version, namespace, self.labels):
                    version = str(obj.get("metadata", {}).get("resourceVersion") or version)
                    delay = 0.5
                    if event in ("ADDED", "MODIFIED", "DELETED"):
                        self._event(event, obj)
            except KubeError as e:
                if e.code == 410:
                    log.info("watch expired (410 Gone): re-listing", extra={"resource": self.name})
                    return
                if e.reason == STALLED:
                    WATCH_RESTARTS.labels(self.name, "stalled").inc()
                    log.warning("watch stalled: re-listing", extra={"resource": self.name, "error": str(e)})
                    return
                WATCH_RESTARTS.labels(self.name, "resume").inc()
                log.warning("watch failed, resuming from the last resourceVersion",
                            extra={"resource": self.name, "resource_version": version, "error": str(e),
                                   "retry_in": delay})
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_delay)
                continue
            WATCH_RESTARTS.labels(self.name, "resume").inc()  # the server closed it: carry on
