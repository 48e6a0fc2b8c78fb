"""API discovery: which plural and scope the server serves a kind under, read from the group-version's resource
list (GET /api/v1, /apis/GROUP/VERSION) and kept; a kind not found is looked up again (a CRD installed later),
at most once per group-version every few seconds."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from controller_runtime.errors import KubeError
from controller_runtime.kinds import GroupVersionKind, KindLike, gvk

__all__ = ["Discovery", "ResourceInfo", "parse_resource_list", "resource_list_path"]

REFRESH_SECONDS = 5.0


class ResourceInfo(NamedTuple):
    """How the API serves one kind."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: frozenset[str]


def resource_list_path(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def parse_resource_list(api_version: str, doc: Mapping[str, Any]) -> dict[str, ResourceInfo]:
    """kind -> ResourceInfo from a v1 APIResourceList (subresources are the `plural/sub` entries)."""
    entries = [r for r in doc.get("resources") or [] if isinstance(r, Mapping) and isinstance(r.get("name"), str)]
    subs: dict[str, set[str]] = {}
    for entry in entries:
        plural, _, sub = entry["name"].partition("/")
        if sub:
            subs.setdefault(plural, set()).add(sub)
    out: dict[str, ResourceInfo] = {}
    for entry in entries:
        name, kind = entry["name"], entry.get("kind")
        if "/" in name or not isinstance(kind, str):
            continue
        out[kind] = ResourceInfo(api_version, kind, name, bool(entry.get("namespaced")), frozenset(subs.get(name, ())))
    return out


Fetch = Callable[[str], Awaitable[Mapping[str, Any] | None]]  # GET path -> JSON, None on 404


class Discovery:
    """Resolves kinds to resources, caching each group-version's list."""

    def __init__(self, fetch: Fetch, clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._clock = clock
        self._lists: dict[str, dict[str, ResourceInfo]] = {}
        self._fetched_at: dict[str, float] = {}

    async def resolve(self, kind: KindLike) -> ResourceInfo:
        """The resource serving `kind`; KubeError 404 when the server does not serve it (now)."""
        key = gvk(kind)
        found = self._lists.get(key.api_version, {}).get(key.kind)
        if found is not None:
            return found
        last = self._fetched_at.get(key.api_version)
        if last is None or self._clock() - last >= REFRESH_SECONDS:
            await self._refresh(key)
            found = self._lists.get(key.api_version, {}).get(key.kind)
            if found is not None:
                return found
        raise KubeError(f"the server does not serve {key}", 404, "NotFound")

    def known(self, kind: KindLike) -> ResourceInfo | None:
        key = gvk(kind)
        return self._lists.get(key.api_version, {}).get(key.kind)

    async def _refresh(self, key: GroupVersionKind) -> None:
        doc = await self._fetch(resource_list_path(key.api_version))
        self._lists[key.api_version] = parse_resource_list(key.api_version, doc or {})
        self._fetched_at[key.api_version] = self._clock()
