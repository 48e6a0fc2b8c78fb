"""The API client controllers and commands share: plain dicts in and out, kinds resolved by discovery, every request
counted. lightkube does the requests (server-side apply, lists); raw paths (discovery, /version) and watches go
through httpx clients lightkube's client adapter builds from the same kubeconfig. A 429 with Retry-After holds every
request of this client until then and halves how many it sends at once (controller_runtime.throttle: API Priority and
Fairness throttling us, more would only be rejected too). Watches are plain HTTP streams with a server timeout and a
deadline. What a reply or a failed connection means (a KubeError with the server's words and its retry class, a
stalled watch) is controller_runtime.replies'; its names are importable from here too."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, Literal

import httpx
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.config import client_adapter
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import CascadeType, PatchType

from controller_runtime.discovery import Discovery, ResourceInfo, resource_list_path
from controller_runtime.errors import KubeConfigError, KubeError
from controller_runtime.kinds import KindLike, gvk, gvk_of
from controller_runtime.observers import after_write, before_write
from controller_runtime.replies import (
    STALLED,
    TRANSPORT_FAILURES,
    error_of,
    refusal,
    retry_after,
    stalled,
    watch_deadline,
    watch_event,
)
from controller_runtime.telemetry import DEFAULT, Telemetry
from controller_runtime.throttle import Throttle

__all__ = ["ALL_NAMESPACES", "CHANGED", "DELETED", "GONE", "STALLED", "Deletion", "Kube", "retry_after",
           "watch_deadline"]

ALL_NAMESPACES = "*"
Deletion = Literal["deleted", "gone", "changed"]  # what a delete with preconditions did
DELETED: Deletion = "deleted"
GONE: Deletion = "gone"
CHANGED: Deletion = "changed"


def _resource_class(info: ResourceInfo) -> type[Any]:
    """lightkube's generic (dict-backed) resource class for a discovered resource, with its Status subresource.
    Made once per kind here: lightkube 0.22 looks a core-group kind up under "/v1" but registers it under "v1", so a
    second create_namespaced_resource of one raises "already registered"."""
    return _generic(info.api_version, info.kind, info.plural, info.namespaced)


@functools.cache
def _generic(api_version: str, kind: str, plural: str, namespaced: bool) -> type[Any]:
    group, _, version = api_version.rpartition("/")
    create = create_namespaced_resource if namespaced else create_global_resource
    return create(group, version, kind, plural)


def _plain(obj: Any) -> dict[str, Any]:
    return dict(obj) if isinstance(obj, dict) else dict(obj.to_dict())


def _where(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Kube:
    """One API identity: a request client (HTTP/2 by default), a watch client and a raw client, with discovery."""

    def __init__(self, config: KubeConfig, field_manager: str, timeout: float = 15.0, max_requests: int = 16,
                 http2: bool = True, watch_timeout: float = 120.0, telemetry: Telemetry = DEFAULT) -> None:
        self.field_manager = field_manager
        self.telemetry = telemetry  # how this client, and the informers, elector and recorder on it, are named
        self.metrics = telemetry.metrics
        self.watch_timeout = watch_timeout
        self.status_field_manager = f"{field_manager}-status"
        self.client = AsyncClient(config=config, field_manager=field_manager, timeout=httpx.Timeout(timeout),
                                  http2=http2)
        single = config.get()
        if single is None:
            raise KubeConfigError("the kubeconfig has no current context: pass --context NAME")
        self.http = client_adapter.AsyncClient(single, client_adapter.ConnectionParams(
            timeout=httpx.Timeout(timeout), http2=http2))
        # Watches hold their connection for minutes: a pool of their own (one connection each) keeps them out of
        # the requests' pool; the read timeout is the watch's deadline, enforced per watch.
        self.watcher = client_adapter.AsyncClient(single, client_adapter.ConnectionParams(
            timeout=httpx.Timeout(timeout, read=None), http2=False))
        self.discovery = Discovery(self._get_json)
        # At most this many requests at once (their connections then stay within httpx's keep-alive pool, 20,
        # instead of being opened and closed, a TLS handshake each, at every burst), fewer while throttled.
        self.throttle = Throttle(max_requests, self.metrics.throttled)

    async def close(self) -> None:
        await self.client.close()
        await self.watcher.aclose()
        await self.http.aclose()

    async def _send(self, request: Awaitable[Any]) -> Any:
        """Await one request within the throttle's limit; a 429 tells the throttle to hold and slow down."""
        try:
            await self.throttle.acquire()
        except BaseException:
            if inspect.iscoroutine(request):  # never sent: no "coroutine was never awaited" at shutdown
                request.close()
            raise
        rejected, retry = False, None
        try:
            result = await request
            if isinstance(result, httpx.Response) and result.status_code == 429:  # a raw request's answer
                rejected, retry = True, retry_after(result)
            return result
        except ApiError as e:
            rejected, retry = e.status.code == 429, retry_after(e.response)
            raise
        except httpx.HTTPStatusError as e:
            rejected, retry = e.response.status_code == 429, retry_after(e.response)
            raise
        except TRANSPORT_FAILURES as e:  # the connection failed: said as httpx says it, which every caller handles
            raise httpx.TransportError(f"{type(e).__name__}: {e}") from e
        finally:
            self.throttle.release(rejected=rejected, retry_after=retry)

    async def _get_json(self, path: str) -> dict[str, Any] | None:
        """GET a raw path as JSON; None on 404."""
        try:
            response = await self._send(self._get_checked(path))
            self.metrics.requests.labels("GET", str(response.status_code)).inc()
            if response.status_code == 404:
                return None
            response.raise_for_status()
            data = response.json()
        except httpx.HTTPError as e:
            raise error_of(e, f"GET {path}") from e
        except ValueError as e:
            raise KubeError(f"GET {path}: the reply is not JSON ({e})") from e
        if not isinstance(data, dict):
            raise KubeError(f"GET {path}: the reply is not a JSON object")
        return data

    async def _get_checked(self, path: str) -> httpx.Response:
        response = await self.http.get(path)
        if response.status_code == 429:
            response.raise_for_status()
        return response

    async def resource(self, kind: KindLike) -> ResourceInfo:
        """How the server serves `kind` (KubeError 404 when it does not)."""
        return await self.discovery.resolve(kind)

    async def _class(self, kind: KindLike) -> type[Any]:
        return _resource_class(await self.resource(kind))

    async def version(self) -> str:
        """The API server's gitVersion (GET /version)."""
        data = await self._get_json("/version") or {}
        version = data.get("gitVersion")
        if not isinstance(version, str) or not version:
            raise KubeError("GET /version: no gitVersion in the reply")
        return version

    async def _call(self, method: str, what: str, request: Any, resource: str = "") -> Any:
        """One lightkube request under the concurrency cap, counted by method and status code; the process's write
        observers (controller_runtime.observers) are told of a write (of `resource`) before and after."""
        write = method not in ("GET", "LIST")
        try:
            if write:
                before_write(what, resource)
            result = await self._send(request)
        except ApiError as e:
            self.metrics.requests.labels(method, str(e.status.code or 0)).inc()
            raise error_of(e, what) from e
        except httpx.HTTPError as e:
            code = e.response.status_code if isinstance(e, httpx.HTTPStatusError) else 0
            self.metrics.requests.labels(method, str(code)).inc()
            raise error_of(e, what) from e
        self.metrics.requests.labels(method, "200").inc()
        if write:
            after_write(what, resource)
        return result

    async def get(self, kind: KindLike, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        res = await self._class(kind)
        try:
            return _plain(await self._call("GET", f"get {gvk(kind).kind} {_where(namespace, name)}",
                                           self.client.get(res, name, namespace=namespace)))
        except KubeError as e:
            if e.code == 404:
                return None
            raise

    async def list(self, kind: KindLike, namespace: str = ALL_NAMESPACES, labels: Mapping[str, str] | None = None,
                   fields: Mapping[str, str] | None = None) -> tuple[list[dict[str, Any]], str]:
        """Every object and the list's resourceVersion (to start a watch from)."""
        res = await self._class(kind)
        info = await self.resource(kind)
        where = namespace if info.namespaced else None

        async def collect() -> tuple[list[dict[str, Any]], str]:
            listing = self.client.list(res, namespace=where, labels=dict(labels or {}),
                                       fields=dict(fields) if fields else None, chunk_size=500)
            # list items carry no apiVersion/kind on the wire: every cached object names its kind
            items = [{"apiVersion": info.api_version, "kind": info.kind, **_plain(o)} async for o in listing]
            return items, str(listing.resourceVersion)

        result: tuple[list[dict[str, Any]], str] = await self._call("LIST", f"list {info.plural}", collect())
        return result

    async def watch(self, kind: KindLike, resource_version: str, namespace: str = ALL_NAMESPACES,
                    labels: Mapping[str, str] | None = None,
                    server_timeout: float | None = None) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Events from resource_version on (bookmarks included: they carry a newer resourceVersion) until the
        server closes the watch after `server_timeout` seconds; ends with KubeError (410 when the version is too
        old: re-list; reason STALLED when the watch outlived its deadline, watch_deadline())."""
        info = await self.resource(kind)
        timeout = int(server_timeout or self.watch_timeout)
        path = resource_list_path(info.api_version)
        if info.namespaced and namespace != ALL_NAMESPACES:
            path += f"/namespaces/{namespace}"
        params = {"watch": "true", "allowWatchBookmarks": "true", "resourceVersion": resource_version,
                  "timeoutSeconds": str(timeout)}
        if labels:
            params["labelSelector"] = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        what = f"watch {info.plural}"
        await self.throttle.hold()
        self.metrics.requests.labels("WATCH", "200").inc()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + watch_deadline(timeout)
        try:
            request = self.watcher.build_request("GET", f"{path}/{info.plural}", params=params)
            # asyncio.timeout, never asyncio.wait_for: on 3.11 the latter swallows a cancellation that comes as
            # its awaitable completes, and a busy watch then never stops (docs/development.md, conventions)
            async with asyncio.timeout_at(deadline):
                response = await self.watcher.send(request, stream=True)
            try:
                if response.status_code >= 300:
                    await response.aread()
                    response.raise_for_status()
                lines = response.aiter_lines()
                while True:  # each read bounded by what is left of the deadline (no timeout spans a yield)
                    try:
                        async with asyncio.timeout_at(deadline):
                            line = await anext(lines)
                    except StopAsyncIteration:
                        return
                    if line.strip():
                        yield watch_event(line, what)
            finally:
                await response.aclose()
        except TimeoutError as e:
            raise stalled(what, timeout) from e
        except TRANSPORT_FAILURES as e:
            raise error_of(e, what) from e
        except httpx.HTTPError as e:
            error = error_of(e, what)
            if error.code == 429:  # a watch holds no slot, but its rejection slows every request
                self.throttle.acquire_nowait()
                self.throttle.release(rejected=True, retry_after=error.retry_after)
            raise error from e

    async def apply(self, obj: Mapping[str, Any], *, status: bool = False, force: bool = True,
                    field_manager: str | None = None) -> dict[str, Any]:
        """Server-side apply under our field manager (the status subresource under its own)."""
        meta = obj["metadata"]
        info = await self.resource(gvk_of(obj))
        res = _resource_class(info)
        self.metrics.writes.labels("apply-status" if status else "apply", info.plural).inc()
        manager = field_manager or (self.status_field_manager if status else self.field_manager)
        what = f"apply {'status of ' if status else ''}{info.kind} {_where(meta.get('namespace'), meta['name'])}"
        result = await self._call("PATCH", what,
                                  self.client.patch(res.Status if status else res, meta["name"], dict(obj),
                                                    namespace=meta.get("namespace"), patch_type=PatchType.APPLY,
                                                    force=force, field_manager=manager), info.plural)
        return _plain(result)

    async def merge(self, kind: KindLike, name: str, namespace: str | None, patch: Mapping[str, Any], *,
                    resource_version: str | None = None, status: bool = False,
                    field_manager: str | None = None) -> dict[str, Any]:
        """A JSON merge patch (None removes a field) of the object or its status; with resource_version, only if the
        object is unchanged since (409 otherwise)."""
        info = await self.resource(kind)
        res = _resource_class(info)
        body = dict(patch)
        if resource_version:
            body["metadata"] = {**(body.get("metadata") or {}), "resourceVersion": resource_version}
        self.metrics.writes.labels("merge-status" if status else "merge", info.plural).inc()
        manager = field_manager or (self.status_field_manager if status else self.field_manager)
        what = f"{'status of ' if status else 'patch '}{info.kind} {_where(namespace, name)}"
        result = await self._call("PATCH", what, self.client.patch(res.Status if status else res, name, body,
                                                                   namespace=namespace, patch_type=PatchType.MERGE,
                                                                   field_manager=manager), info.plural)
        return _plain(result)

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST: 409 when it exists."""
        return await self._whole("create", obj)

    async def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT: fails with 409 when metadata.resourceVersion is no longer current (optimistic concurrency)."""
        return await self._whole("replace", obj)

    async def _whole(self, verb: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        info = await self.resource(gvk_of(obj))
        self.metrics.writes.labels(verb, info.plural).inc()
        body: Any = _resource_class(info)(dict(obj))
        send = self.client.create if verb == "create" else self.client.replace
        method = "POST" if verb == "create" else "PUT"
        return _plain(await self._call(method, f"{verb} {info.kind} {obj['metadata'].get('name')}", send(body),
                                      info.plural))

    async def delete(self, kind: KindLike, name: str, namespace: str | None, *,
                     cascade: CascadeType | None = None) -> None:
        """Delete if present (a 404 is success: someone was faster)."""
        info = await self.resource(kind)
        self.metrics.writes.labels("delete", info.plural).inc()
        try:
            await self._call("DELETE", f"delete {info.kind} {_where(namespace, name)}",
                             self.client.delete(_resource_class(info), name, namespace=namespace, cascade=cascade),
                             info.plural)
        except KubeError as e:
            if e.code != 404:
                raise

    # --- requests lightkube does not make: metadata only, deletes with a precondition ---------------------------

    def _path(self, info: ResourceInfo, name: str, namespace: str | None) -> str:
        where = f"/namespaces/{namespace}" if info.namespaced and namespace else ""
        return f"{resource_list_path(info.api_version)}{where}/{info.plural}/{name}"

    async def metadata(self, kind: KindLike, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """An object's metadata only (PartialObjectMetadata: its content never crosses the wire), None when absent."""
        info = await self.resource(kind)
        what = f"get metadata of {info.kind} {_where(namespace, name)}"
        try:
            response = await self._send(self.http.get(self._path(info, name, namespace), headers={
                "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}))
        except httpx.HTTPError as e:
            raise error_of(e, what) from e
        self.metrics.requests.labels("GET", str(response.status_code)).inc()
        if response.status_code == 404:
            return None
        if response.status_code >= 300:
            raise refusal(response, what)
        meta = response.json().get("metadata")
        return dict(meta) if isinstance(meta, dict) else {}

    async def delete_exactly(self, kind: KindLike, name: str, namespace: str | None, uid: str,
                             resource_version: str | None = None) -> Deletion:
        """Delete the object only if it is still the one with `uid` (and, given one, still at `resource_version`):
        preconditions the API server checks. DELETED, GONE (someone was faster) or CHANGED (another object under the
        name by now, or this one changed since it was read)."""
        info = await self.resource(kind)
        self.metrics.writes.labels("delete", info.plural).inc()
        what = f"delete {info.kind} {_where(namespace, name)}"
        preconditions = {"uid": uid, **({"resourceVersion": resource_version} if resource_version else {})}
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
        try:
            response = await self._send(self.http.request("DELETE", self._path(info, name, namespace), json=body))
        except httpx.HTTPError as e:
            raise error_of(e, what) from e
        self.metrics.requests.labels("DELETE", str(response.status_code)).inc()
        if response.status_code == 404:
            return GONE
        if response.status_code == 409:
            return CHANGED
        if response.status_code >= 300:
            raise refusal(response, what)
        return DELETED

