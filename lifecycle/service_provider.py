"""ServiceProvider: the kind (its CRD source) and the webhook's twin of its schema — which backends serve which type.

A provider is a cluster administrator's statement (cluster-scoped, like a HostnamePolicy); claims select providers by
type and by the provider's labels (spec §3.2, §3.3). The backends are the platform's provider contract: an
Application names a need, never a backend, so a backend that serves a type can replace another (Dragonfly for
redis-server) without an Application changing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from renderer.crds import AGE, Column, CrdSource, SchemaPatch

__all__ = ["BACKENDS", "SERVICE_PROVIDER", "check"]

SERVICE_PROVIDER = CrdSource(
    "ServiceProvider", "lifecycle", "serviceprovider.cue", "ServiceProviderSpec", "serviceproviders", ("svcp",),
    extra_files=(("renderer", "resourceclaim.cue"),), cluster_scoped=True,
    # The backend's settings are its own: kept as written, read by the backend.
    patches=(SchemaPatch(("spec", "config"), {"x-kubernetes-preserve-unknown-fields": True}),),
    columns=(Column("Type", ".spec.type"), Column("Backend", ".spec.backend"), AGE),
)

# Which backends serve each platform-service type (spec §4.6): pg on CloudNativePG, redis on Debian's redis-server
# (Dragonfly's server cannot be built here; the contract keeps its place), disk as a PersistentVolumeClaim of a
# StorageClass. A type with no entry has no backend on this platform yet.
BACKENDS: Mapping[str, tuple[str, ...]] = {
    "pg": ("cloudnative-pg",),
    "redis": ("redis-server", "dragonfly"),
    "disk": ("storage-class",),
}


def check(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) of a ServiceProvider the CRD's schema lets through: a backend that does not serve its type."""
    spec = obj.get("spec") or {}
    kind, backend = spec.get("type"), spec.get("backend")
    if not isinstance(kind, str) or not isinstance(backend, str):
        return []  # the schema's to refuse
    served = BACKENDS.get(kind)
    if served is None:
        have = ", ".join(sorted(BACKENDS))
        return [("spec.type", f"no backend serves {kind} on this platform yet (types with one: {have})")]
    if backend not in served:
        return [("spec.backend", f"{backend!r} does not serve {kind}: use {' or '.join(served)}")]
    return []
