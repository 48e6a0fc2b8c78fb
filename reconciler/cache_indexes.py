"""The cache indexes the Application controller's passes read by: each kind's objects found by one value (an
Application's pods, a deployment's hostname records, the routes no Application made by hostname, the Application
holding an instance), not by decoding a namespace's or the cluster's every object."""

from __future__ import annotations

from compatibility.crd import MIGRATION_PLAN
from controller_runtime.informer import IndexKey, Informer
from controller_runtime.kinds import GroupVersionKind, KindLike
from lifecycle.crd import PUBLIC_HOSTNAME
from lifecycle.health import POD_INDEX, pod_key
from lifecycle.hostnames import FOREIGN_ROUTE_INDEX, HOLDER_INDEX, foreign_route_hostnames, holder_key
from lifecycle.ownership import INSTANCE_INDEX, instance_of
from lifecycle.plans import PLAN_INDEX, plan_key
from renderer.crds import APPLICATION
from renderer.manifests import HTTPROUTE

__all__ = ["INDEXES", "indexed"]

POD = GroupVersionKind("v1", "Pod")
# The cache indexes a pass reads by (each kind's objects found by one value, not by decoding a namespace's all).
INDEXES: dict[tuple[str, str], tuple[str, IndexKey]] = {
    (APPLICATION.api_version, APPLICATION.kind): (INSTANCE_INDEX, instance_of),
    (POD.api_version, POD.kind): (POD_INDEX, pod_key),
    (PUBLIC_HOSTNAME.api_version, PUBLIC_HOSTNAME.kind): (HOLDER_INDEX, holder_key),
    (HTTPROUTE.api_version, HTTPROUTE.kind): (FOREIGN_ROUTE_INDEX, foreign_route_hostnames),
    (MIGRATION_PLAN.api_version, MIGRATION_PLAN.kind): (PLAN_INDEX, plan_key),
}


def indexed(informer: Informer, kind: KindLike) -> Informer:
    """The informer, with its kind's index added (once: adding it again changes nothing)."""
    index = INDEXES.get((kind.api_version, kind.kind))
    if index is not None:
        informer.add_index(*index)
    return informer


