"""A list+watch cache of one kind: resumes watches from the last resourceVersion, re-lists on 410 Gone and when a
watch stalls (open past its deadline with nothing received: controller_runtime.replies.watch_deadline)."""

from __future__ import annotations

import asyncio
import json
import logging
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from controller_runtime.client import ALL_NAMESPACES, Kube
from controller_runtime.errors import KubeError
from controller_runtime.kinds import GroupVersionKind, KindLike, gvk
from controller_runtime.objects import Key, controller_uid, key_of
from controller_runtime.replies import STALLED

__all__ = ["Handler", "IndexKey", "Informer"]


Handler = Callable[[str, dict[str, Any]], None]  # (ADDED|MODIFIED|DELETED, object)
# an object's value in an index, or its values (an HTTPRoute's hostnames); None or none: not in it
IndexKey = Callable[[Mapping[str, Any]], str | Sequence[str] | None]


_MAX_WRITTEN = 64  # written versions remembered per object


def _version(obj: Mapping[str, Any]) -> int | None:
    rv = obj.get("metadata", {}).get("resourceVersion")
    return _number(rv)


def _number(rv: Any) -> int | None:
    return int(rv) if isinstance(rv, str) and rv.isdigit() else None


class _Cached(NamedTuple):
    """One cached object: deflated compact JSON (_Codec) and what lookups need without decoding it."""

    blob: bytes
    version: str
    owner: str | None  # the controlling owner's uid


_WINDOW = 32768  # deflate's window: a preset dictionary's bytes beyond it are never referenced


class _Codec:
    """An object as compact JSON deflated with a preset dictionary: the first object this cache held (objects of one
    kind share most of their bytes: keys, managedFields' shape, labels). A dict's memory is several times its JSON;
    the JSON alone deflates 2.6x, with the kind's first object as the dictionary 7x (the renderer's children).
    Secrets get no dictionary: a past Secret's bytes are not kept once it is gone."""

    def __init__(self, kind: GroupVersionKind) -> None:
        self.keeps_first = (kind.api_version, kind.kind) != ("v1", "Secret")
        self.zdict = b""

    def encode(self, obj: Mapping[str, Any]) -> bytes:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        if self.keeps_first and not self.zdict:
            self.zdict = raw[-_WINDOW:]
        packer = zlib.compressobj(1, zdict=self.zdict) if self.zdict else zlib.compressobj(1)
        return packer.compress(raw) + packer.flush()

    def decode(self, blob: bytes) -> dict[str, Any]:
        unpacker = zlib.decompressobj(zdict=self.zdict) if self.zdict else zlib.decompressobj()
        obj: dict[str, Any] = json.loads(unpacker.decompress(blob) + unpacker.flush())
        return obj


class Informer:
    """Objects of one kind (optionally one label selector) in the watched namespaces, kept current by watches.
    Every read hands out a fresh copy: callers may change what they get."""

    def __init__(self, kube: Kube, kind: KindLike, namespaces: Sequence[str] = (ALL_NAMESPACES,),
                 labels: Mapping[str, str] | None = None, max_delay: float = 5.0) -> None:
        self.kube = kube
        self.kind: GroupVersionKind = gvk(kind)
        self.namespaces = tuple(namespaces) or (ALL_NAMESPACES,)
        self.labels = dict(labels or {})
        self.max_delay = max_delay
        self._store: dict[Key, _Cached] = {}
        self._codec = _Codec(self.kind)
        self._owned: dict[str, set[Key]] = {}  # controller owner uid -> keys: a pass finds its children directly
        # name -> (how an object's value is made, value -> keys): a pass reads the few objects it needs, not a
        # namespace's every object (decoding each is the cost; thousands per namespace are common)
        self._indexes: dict[str, tuple[IndexKey, dict[str, set[Key]]]] = {}
        self._values: dict[Key, tuple[tuple[str, str], ...]] = {}  # key -> its (index, value) pairs
        # key -> the resourceVersions our own writes put here (write-through) whose watch events have not come yet:
        # only those events are ours to skip. An event older than the cached version but not ours is someone
        # else's change that our later write jumped over (a status apply carries no precondition, so its reply
        # already holds a spec patched a moment before): its handlers must still hear of it.
        self._written: dict[Key, set[int]] = {}
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self._listed: set[str] = set()
        self.not_served: str | None = None  # why the kind cannot be listed (e.g. its CRD is not installed)
        self.failure: Exception | None = None  # why the last list failed (None once one succeeds)

    @property
    def name(self) -> str:
        return str(self.kind)

    @property
    def log(self) -> logging.Logger:
        return self.kube.telemetry.logger("informer")

    def _restarted(self, cause: str) -> None:
        self.kube.telemetry.metrics.watch_restarts.labels(self.name, cause).inc()

    def cached_keys(self) -> list[Key]:
        return list(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def stored_bytes(self) -> int:
        """What its objects take as stored: their deflated JSON and the codec's dictionary."""
        return sum(len(c.blob) for c in self._store.values()) + len(self._codec.zdict)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        cached = self._store.get((namespace, name))
        return self._codec.decode(cached.blob) if cached else None

    def items(self, namespace: str | None = None) -> list[dict[str, Any]]:
        decode = self._codec.decode
        return [decode(o.blob) for (ns, _), o in self._store.items() if namespace is None or ns == namespace]

    def owned_by(self, uid: str) -> list[dict[str, Any]]:
        """Objects whose controlling owner has this uid."""
        return [self._codec.decode(self._store[k].blob) for k in self._owned.get(uid, ()) if k in self._store]

    def add_index(self, name: str, value_of: IndexKey) -> None:
        """Keep the objects findable by `value_of(object)` (`indexed`); adding an index of that name again is a
        no-op."""
        if name in self._indexes:
            return
        self._indexes[name] = (value_of, {})
        for key, cached in self._store.items():
            self._index(key, self._codec.decode(cached.blob), (name,))

    def indexed(self, name: str, value: str) -> list[dict[str, Any]]:
        """The cached objects whose value in index `name` is `value` (add_index first)."""
        keys = sorted(self._indexes[name][1].get(value, ()))
        return [self._codec.decode(self._store[k].blob) for k in keys if k in self._store]

    def _index(self, key: Key, obj: Mapping[str, Any], names: Sequence[str]) -> None:
        pairs = list(self._values.get(key, ()))
        for name in names:
            found = self._indexes[name][0](obj)
            for value in (found,) if isinstance(found, str) else found or ():
                self._indexes[name][1].setdefault(value, set()).add(key)
                pairs.append((name, value))
        if pairs:
            self._values[key] = tuple(pairs)

    def _put(self, key: Key, obj: Mapping[str, Any]) -> None:
        self._drop(key)
        uid = controller_uid(obj)
        self._store[key] = _Cached(self._codec.encode(obj),
                                   str(obj.get("metadata", {}).get("resourceVersion") or ""), uid)
        if uid:
            self._owned.setdefault(uid, set()).add(key)
        if self._indexes:
            self._index(key, obj, tuple(self._indexes))

    def _drop(self, key: Key) -> _Cached | None:
        old = self._store.pop(key, None)
        uid = old.owner if old else None
        if uid and uid in self._owned:
            self._owned[uid].discard(key)
            if not self._owned[uid]:
                del self._owned[uid]
        for name, value in self._values.pop(key, ()):
            keys = self._indexes[name][1]
            keys[value].discard(key)
            if not keys[value]:
                del keys[value]
        return old

    def update(self, obj: Mapping[str, Any]) -> None:
        """Write-through: what our own write returned, unless the cache already holds a newer version."""
        key = key_of(obj)
        old = self._store.get(key)
        new_v, old_v = _version(obj), _number(old.version) if old else None
        if new_v is not None:
            written = self._written.setdefault(key, set())
            written.add(new_v)
            if len(written) > _MAX_WRITTEN:  # events that never come (a watch re-listed past them) are not kept
                written.discard(min(written))
        if old_v is not None and new_v is not None and new_v < old_v:
            return
        self._put(key, obj)

    def _ours(self, key: Key, version: int | None) -> bool:
        """Whether the event of `version` is one of our own writes; written versions up to it are settled."""
        written = self._written.get(key)
        if not written or version is None:
            return False
        ours = version in written
        written.difference_update([v for v in written if v <= version])
        if not written:
            del self._written[key]
        return ours

    def forget(self, namespace: str, name: str) -> None:
        self._drop((namespace, name))
        self._written.pop((namespace, name), None)

    def _notify(self, event: str, obj: dict[str, Any]) -> None:
        for handler in self.handlers:
            handler(event, obj)

    def _replace(self, namespace: str, items: list[dict[str, Any]]) -> None:
        """A fresh list: add/modify what it holds, delete what it lost (for this namespace scope)."""
        fresh = {key_of(o): o for o in items}
        for key in [k for k in self._store if namespace == ALL_NAMESPACES or k[0] == namespace]:
            if key not in fresh:
                self._written.pop(key, None)
                gone = self._drop(key)
                if gone is not None:
                    self._notify("DELETED", self._codec.decode(gone.blob))
        for key, obj in fresh.items():
            self._ours(key, _version(obj))  # a list settles the writes it already holds
            old = self._store.get(key)
            self._put(key, obj)
            if old is None or old.version != str(obj["metadata"].get("resourceVersion") or ""):
                self._notify("MODIFIED" if old else "ADDED", obj)

    def _event(self, event: str, obj: dict[str, Any]) -> None:
        key = key_of(obj)
        new_v = _version(obj)
        ours = self._ours(key, new_v)
        if event == "DELETED":
            self._drop(key)
            self._written.pop(key, None)
        else:
            old = self._store.get(key)
            old_v = _number(old.version) if old else None
            if old is not None and old_v is not None and new_v is not None and new_v <= old_v:
                if not ours:  # someone else's change, already held by the reply of a later write of ours
                    self._notify("MODIFIED", self._codec.decode(old.blob))
                return  # the cache holds this version or a newer one
            self._put(key, obj)
        self._notify(event, obj)

    async def run(self) -> None:
        await asyncio.gather(*(self._run_scope(ns) for ns in self.namespaces))

    async def _run_scope(self, namespace: str) -> None:
        """List, then watch; again after every failure, whatever it was: a cache that stopped would leave every
        controller reading it blind until the process restarts (client-go's reflector never gives up either)."""
        delay = 0.5
        while True:
            try:
                await self._list_and_watch(namespace)
                delay = 0.5
                continue
            except KubeError as e:
                if e.code == 404:  # its CRD is not installed (KEDA left out, say): said once, looked for again
                    if self.not_served is None:
                        self.log.info("not served: looking for it again every few seconds",
                                 extra={"resource": self.name, "error": str(e)})
                    self.not_served = str(e)
                    self._mark_listed(namespace)  # nothing to wait for: reported when an object of it is applied
                else:
                    self.not_served = None
                    self.failure = e
                    self.log.warning("list failed, retrying", extra={"resource": self.name, "error": str(e),
                                                                "retry_in": delay})
            except Exception as e:  # an error the client did not classify (a bug, say): logged, then listed again
                self.failure = e
                self._restarted("error")
                self.log.error("list or watch failed unexpectedly, listing again",
                          extra={"resource": self.name, "error": f"{type(e).__name__}: {e}", "retry_in": delay},
                          exc_info=True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.max_delay)

    async def _list_and_watch(self, namespace: str) -> None:
        """One list, then its watch until it must be listed again (a KubeError from the list goes to the caller)."""
        items, version = await self.kube.list(self.kind, namespace, self.labels)
        self.not_served = self.failure = None
        self._restarted("relist")
        self._replace(namespace, items)
        self._mark_listed(namespace)
        await self._watch(namespace, version)

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
                    self.log.info("watch expired (410 Gone): re-listing", extra={"resource": self.name})
                    return
                if e.reason == STALLED:
                    self._restarted("stalled")
                    self.log.warning("watch stalled: re-listing", extra={"resource": self.name, "error": str(e)})
                    return
                self._restarted("resume")
                self.log.warning("watch failed, resuming from the last resourceVersion",
                            extra={"resource": self.name, "resource_version": version, "error": str(e),
                                   "retry_in": delay})
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_delay)
                continue
            self._restarted("resume")  # the server closed it: carry on
