"""Kubernetes access for the edges: kubeconfig resolution like kubectl, and a lightkube client that works on
plain dicts (server-side apply with one field manager, status writes, lists and watches), counting writes."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, cast

import httpx
import yaml
from lightkube import ApiError, AsyncClient, Client, ConfigError, KubeConfig
from lightkube.core import resource as lk_resource
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericGlobalStatus,
    GenericNamespacedResource,
    GenericNamespacedStatus,
    create_api_info,
)
from lightkube.types import PatchType
from prometheus_client import Counter

from compatibility.crd import MIGRATION_PLAN
from platform_stack import umbrella
from platform_stack.resource import PLATFORM_STACK
from renderer.crds import APPLICATION
from renderer.errors import ToolFailure
from renderer.manifests import KINDS, Kind
from renderer.names import API_VERSION

FIELD_MANAGER = "apprafter-operator"
ALL_NAMESPACES = "*"
IN_CLUSTER = Path("/var/run/secrets/kubernetes.io/serviceaccount")

APPLICATION_KIND = Kind(API_VERSION, APPLICATION.kind, APPLICATION.plural)
MIGRATION_PLAN_KIND = Kind(API_VERSION, MIGRATION_PLAN.kind, MIGRATION_PLAN.plural)
LEASE_KIND = Kind("coordination.k8s.io/v1", "Lease", "leases")
EVENT_KIND = Kind("events.k8s.io/v1", "Event", "events")
NAMESPACE_KIND = Kind("v1", "Namespace", "namespaces")
PLATFORM_STACK_KIND = Kind(API_VERSION, PLATFORM_STACK.kind, PLATFORM_STACK.plural)
SECRET_KIND = Kind("v1", "Secret", "secrets")
ARGO_APPLICATION_KIND = Kind(umbrella.API_VERSION, umbrella.KIND, "applications")
CLUSTER_SCOPED = frozenset({"Namespace"})

WRITES = Counter("apprafter_kube_writes", "Write requests sent to the API server", ["verb", "resource"])


class KubeConfigError(ToolFailure):
    """No usable kubeconfig (exit 2: an environment problem, with what was tried)."""


class KubeError(Exception):
    """The API server refused a request or could not be reached; `code` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, code: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason

    @property
    def retryable(self) -> bool:
        """Worth retrying as is: no answer, a conflict, throttling, a server-side failure."""
        return self.code in (0, 409, 429) or self.code >= 500


def _merge_kubeconfigs(paths: list[Path]) -> dict[str, Any]:
    """kubectl's KUBECONFIG merge: the first file to name a cluster, user, context or current-context wins."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for path in paths:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise KubeConfigError(f"cannot read kubeconfig {path}: {e}") from None
        if not isinstance(data, dict):
            raise KubeConfigError(f"kubeconfig {path} is not a mapping")
        for key in ("clusters", "users", "contexts"):
            seen = {entry.get("name") for entry in merged[key]}
            for entry in data.get(key) or []:
                if isinstance(entry, dict) and entry.get("name") not in seen:
                    # relative certificate paths are relative to the file that names them
                    merged[key].append(_absolute_paths(entry, path.parent))
        if "current-context" not in merged and data.get("current-context"):
            merged["current-context"] = data["current-context"]
    return merged


def _absolute_paths(entry: dict[str, Any], base: Path) -> dict[str, Any]:
    out = dict(entry)
    for section in ("cluster", "user"):
        inner = out.get(section)
        if isinstance(inner, dict):
            out[section] = {k: (str(base / v) if k in ("certificate-authority", "client-certificate", "client-key",
                                                         "tokenFile") and isinstance(v, str) and not os.path.isabs(v)
                                else v) for k, v in inner.items()}
    return out


def load_config(kubeconfig: Path | None = None, context: str | None = None) -> KubeConfig:
    """The cluster to talk to, resolved as kubectl does: --kubeconfig, else KUBECONFIG (a path list, merged),
    else ~/.kube/config, else the in-cluster service account."""
    tried: list[str] = []
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            raise KubeConfigError(f"--kubeconfig {kubeconfig}: no such file")
        paths = [kubeconfig]
    elif os.environ.get("KUBECONFIG"):
        paths = [Path(p).expanduser() for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
        paths = [p for p in paths if p.is_file()]
        tried.append("KUBECONFIG (no listed file exists)")
    else:
        default = Path("~/.kube/config").expanduser()
        paths = [default] if default.is_file() else []
        tried.append(f"{default} (absent)")
    if paths:
        config = KubeConfig.from_dict(_merge_kubeconfigs(paths), fname=paths[0])
        if context is not None and context not in config.contexts:
            raise KubeConfigError(f"--context {context}: not in {', '.join(map(str, paths))}")
        if context is not None:
            config.current_context = context
        return config
    try:
        return KubeConfig.from_service_account(IN_CLUSTER)
    except (ConfigError, KeyError):
        tried.append("in-cluster service account (not in a pod)")
    raise KubeConfigError("no cluster configured: pass --kubeconfig PATH or set KUBECONFIG; tried "
                          + ", ".join(tried))


def default_namespace(config: KubeConfig) -> str:
    """The current context's namespace, as kubectl uses it when -n is not given."""
    single = config.get()
    return single.namespace if single is not None and single.namespace else "default"


@dataclasses.dataclass(frozen=True)
class Ref:
    """Where one object lives."""

    kind: Kind
    name: str
    namespace: str | None = None


_CLASSES: dict[tuple[str, str], type[Any]] = {}


def resource_class(kind: Kind) -> type[Any]:
    """A dict-backed lightkube resource class for any kind (not registered globally: no clash with lightkube's
    typed models, and responses stay plain dicts)."""
    key = (kind.api_version, kind.kind)
    if key not in _CLASSES:
        group, _, version = kind.api_version.rpartition("/")
        info = create_api_info(group, version, kind.kind, kind.plural)
        namespaced = kind.kind not in CLUSTER_SCOPED
        base = GenericNamespacedResource if namespaced else GenericGlobalResource
        status_base = GenericNamespacedStatus if namespaced else GenericGlobalStatus
        status_info = lk_resource.ApiInfo(resource=info.resource, parent=info.resource, plural=kind.plural,
                                          verbs=["get", "patch", "put"], action="status")
        status = type(f"{kind.kind}Status", (status_base,), {"_api_info": status_info})
        _CLASSES[key] = type(kind.kind, (base,), {"_api_info": info, "Status": status})
    return _CLASSES[key]


def kind_of(obj: Mapping[str, Any]) -> Kind:
    """The Kind of an object we handle (its plural from the lists above)."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    for kind in (*KINDS, APPLICATION_KIND, MIGRATION_PLAN_KIND, LEASE_KIND, EVENT_KIND, PLATFORM_STACK_KIND,
                 SECRET_KIND, ARGO_APPLICATION_KIND):
        if (kind.api_version, kind.kind) == key:
            return kind
    raise ValueError(f"not a kind the operator handles: {key[0]} {key[1]}")


def _error(e: Exception, what: str) -> KubeError:
    if isinstance(e, ApiError):
        status = e.status
        return KubeError(f"{what}: {status.message or status.reason}", int(status.code or 0), status.reason or "")
    if isinstance(e, httpx.HTTPStatusError):  # a reply that is no Status, e.g. the 404 of an API group not served
        code = e.response.status_code
        return KubeError(f"{what}: HTTP {code} {e.response.reason_phrase}", code)
    return KubeError(f"{what}: {type(e).__name__}: {e}", 0)


def _plain(obj: Any) -> dict[str, Any]:
    return dict(obj) if isinstance(obj, dict) else dict(obj.to_dict())


class Kube:
    """The operator's API client: plain dicts in and out, errors as KubeError, every write counted."""

    def __init__(self, config: KubeConfig, field_manager: str = FIELD_MANAGER, timeout: float = 15.0,
                 max_requests: int = 16, http2: bool = True) -> None:
        self.field_manager = field_manager
        self.status_field_manager = f"{field_manager}-status"
        self.client = AsyncClient(config=config, field_manager=field_manager, timeout=httpx.Timeout(timeout),
                                  http2=http2)
        # Watches hold their connection for minutes: a pool of their own keeps them out of the requests' pool.
        self.watcher = AsyncClient(config=config, timeout=httpx.Timeout(timeout))
        # At most this many requests at once: their connections then stay within httpx's keep-alive pool (20)
        # instead of being opened and closed (a TLS handshake each) at every burst.
        self._slots = asyncio.Semaphore(max_requests)

    async def close(self) -> None:
        await self.client.close()
        await self.watcher.close()

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            async with self._slots:
                return _plain(await self.client.get(resource_class(kind), name, namespace=namespace))
        except ApiError as e:
            if e.status.code == 404:
                return None
            raise _error(e, f"get {kind.kind} {name}") from e
        except httpx.HTTPError as e:
            raise _error(e, f"get {kind.kind} {name}") from e

    async def list(self, kind: Kind, namespace: str = ALL_NAMESPACES,
                   labels: Mapping[str, str] | None = None) -> tuple[list[dict[str, Any]], str]:
        """Every object and the list's resourceVersion (to start a watch from)."""
        try:
            async with self._slots:
                listing = self.client.list(resource_class(kind), namespace=namespace, labels=dict(labels or {}),
                                           chunk_size=500)
                items = [_plain(o) for o in [o async for o in listing]]
                return items, str(listing.resourceVersion)
        except (ApiError, httpx.HTTPError) as e:
            raise _error(e, f"list {kind.plural}") from e

    async def watch(self, kind: Kind, resource_version: str, namespace: str = ALL_NAMESPACES,
                    labels: Mapping[str, str] | None = None) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Events from resource_version on; ends with KubeError (410 when the version is too old: re-list)."""
        stream = self.watcher.watch(resource_class(kind), namespace=namespace, labels=dict(labels or {}),
                                   resource_version=resource_version, server_timeout=300)
        try:
            async for event, obj in stream:
                yield event, _plain(obj)
        except (ApiError, httpx.HTTPError) as e:
            raise _error(e, f"watch {kind.plural}") from e
        finally:
            close = getattr(stream, "aclose", None)  # lightkube's watch is an async generator: end its request
            if close is not None:
                await close()

    async def apply(self, obj: Mapping[str, Any], *, status: bool = False, force: bool = True) -> dict[str, Any]:
        """Server-side apply under our field manager (the status subresource under its own)."""
        kind, meta = kind_of(obj), obj["metadata"]
        res = resource_class(kind)
        WRITES.labels("apply-status" if status else "apply", kind.plural).inc()
        try:
            async with self._slots:
                result = await self.client.patch(
                    res.Status if status else res, meta["name"], dict(obj), namespace=meta.get("namespace"),
                    patch_type=PatchType.APPLY, force=force,
                    field_manager=self.status_field_manager if status else self.field_manager)
        except (ApiError, httpx.HTTPError) as e:
            raise _error(e, f"apply {kind.kind} {meta.get('namespace', '')}/{meta['name']}") from e
        return _plain(result)

    async def merge_status(self, kind: Kind, name: str, namespace: str | None, status: Mapping[str, Any],
                           resource_version: str | None = None, field_manager: str | None = None) -> dict[str, Any]:
        """A JSON merge patch of status (None removes a field); with resource_version, only if unchanged since."""
        body: dict[str, Any] = {"status": dict(status)}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        WRITES.labels("merge-status", kind.plural).inc()
        try:
            async with self._slots:
                result = await self.client.patch(resource_class(kind).Status, name, body, namespace=namespace,
                                                 patch_type=PatchType.MERGE,
                                                 field_manager=field_manager or self.status_field_manager)
        except (ApiError, httpx.HTTPError) as e:
            raise _error(e, f"status of {kind.kind} {namespace or ''}/{name}") from e
        return _plain(result)

    async def merge(self, kind: Kind, name: str, namespace: str | None, patch: Mapping[str, Any],
                    resource_version: str | None = None) -> dict[str, Any]:
        """A JSON merge patch of the object (None removes a field); with resource_version, only if unchanged since."""
        body = dict(patch)
        if resource_version:
            body["metadata"] = {**(body.get("metadata") or {}), "resourceVersion": resource_version}
        WRITES.labels("merge", kind.plural).inc()
        try:
            async with self._slots:
                result = await self.client.patch(resource_class(kind), name, body, namespace=namespace,
                                                 patch_type=PatchType.MERGE, field_manager=self.field_manager)
        except (ApiError, httpx.HTTPError) as e:
            raise _error(e, f"patch {kind.kind} {namespace or ''}/{name}") from e
        return _plain(result)

    async def version(self) -> str:
        """The API server's gitVersion (GET /version)."""
        try:
            async with self._slots:
                # lightkube has no call for a path that is not a resource; its httpx client carries the server's
                # base URL and credentials
                http = cast(httpx.AsyncClient, self.client._client._client)
                response = await http.get("/version")
                response.raise_for_status()
                version = response.json().get("gitVersion")
        except (httpx.HTTPError, ValueError, AttributeError) as e:
            raise KubeError(f"GET /version: {type(e).__name__}: {e}") from e
        if not isinstance(version, str) or not version:
            raise KubeError("GET /version: no gitVersion in the reply")
        return version

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST: 409 when it exists."""
        return await self._whole("create", obj)

    async def replace(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT: fails with 409 when metadata.resourceVersion is no longer current (optimistic concurrency)."""
        return await self._whole("replace", obj)

    async def _whole(self, verb: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        kind = kind_of(obj)
        WRITES.labels(verb, kind.plural).inc()
        body: Any = resource_class(kind)(dict(obj))
        send = self.client.create if verb == "create" else self.client.replace
        try:
            async with self._slots:
                return _plain(await send(body))
        except (ApiError, httpx.HTTPError) as e:
            raise _error(e, f"{verb} {kind.kind} {obj['metadata'].get('name')}") from e

    async def delete(self, kind: Kind, name: str, namespace: str | None) -> None:
        """Delete if present (a 404 is success: someone was faster)."""
        WRITES.labels("delete", kind.plural).inc()
        try:
            async with self._slots:
                await self.client.delete(resource_class(kind), name, namespace=namespace)
        except ApiError as e:
            if e.status.code != 404:
                raise _error(e, f"delete {kind.kind} {namespace or ''}/{name}") from e
        except httpx.HTTPError as e:
            raise _error(e, f"delete {kind.kind} {namespace or ''}/{name}") from e


def sync_client(config: KubeConfig, field_manager: str) -> Client:
    """lightkube's synchronous client for one-shot commands (`apprafter migration ...`)."""
    return Client(config=config, field_manager=field_manager)
