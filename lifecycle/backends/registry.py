"""The backends the operator runs, one registration each: its core, what it watches, what it may write (RBAC).

Adding a backend is one line of REGISTERED (and its core module, its client in reconciler/backends/, its config in
lifecycle/schema/serviceprovider.cue). The claim reconciler, the operator command and the webhook read this table;
none of them names a backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from controller_runtime.kinds import GroupVersionKind
from lifecycle.backends import disk, pg, pg_backup, pg_cluster, redis, s3
from lifecycle.backends.contract import Backend
from lifecycle.backends.instance import DEPLOYMENT, INSTANCE_LABELS
from lifecycle.service_provider import check

__all__ = ["REGISTERED", "Registration", "Rule", "Watched", "admit", "core_for", "registration"]


class Watched(NamedTuple):
    """A kind whose changes wake claims: selected by `labels`, in the backend's site namespace (`site`) or in the
    claims' namespaces. The claim woken: the object's `apprafter.io/claim` annotation or label, else every claim
    bound to its `apprafter.io/service-provider`."""

    kind: GroupVersionKind
    labels: Mapping[str, str]
    site: bool


class Rule(NamedTuple):
    """One RBAC rule the operator's ClusterRole must grant for the backend (the chart's test holds it to this)."""

    group: str
    resource: str
    verbs: tuple[str, ...]


class Registration(NamedTuple):
    core: Backend
    watches: tuple[Watched, ...]
    rules: tuple[Rule, ...]


_INSTANCE = Watched(DEPLOYMENT, INSTANCE_LABELS, True)  # an instance becoming available wakes its provider's claims
_WRITE = ("get", "list", "watch", "create", "patch")
_SECRETS = Rule("", "secrets", (*_WRITE, "delete"))
_NAMESPACES = Rule("", "namespaces", ("get",))  # whose kept data is: its namespace UID (lifecycle.backends.kept)
_SHARED_SERVER = (Rule("apps", "deployments", _WRITE), Rule("", "services", _WRITE),
                  Rule("discovery.k8s.io", "endpointslices", ("list",)), _SECRETS, _NAMESPACES)

# A claim's own instance (redis' isolation: instance) goes whole with its data: Deployment, Service and volume.
_OWN_INSTANCE = (Rule("apps", "deployments", ("delete",)), Rule("", "services", ("delete",)),
                 Rule("", "persistentvolumeclaims", (*_WRITE, "delete")))

REGISTERED: tuple[Registration, ...] = (
    # a restore (lifecycle.restore): a recovered Cluster, deleted once copied, and the Job that copies from it
    Registration(pg.CORE, (Watched(pg_cluster.CLUSTER, pg_cluster.CLUSTER_LABELS, True),
                           Watched(pg_cluster.DATABASE, pg_cluster.CLUSTER_LABELS, True),
                           Watched(pg_backup.JOB, pg_cluster.CLUSTER_LABELS, True)),
                 (Rule("postgresql.cnpg.io", "clusters", (*_WRITE, "delete")),
                  Rule("postgresql.cnpg.io", "databases", (*_WRITE, "delete")),
                  Rule("postgresql.cnpg.io", "scheduledbackups", (*_WRITE, "delete")),
                  Rule("postgresql.cnpg.io", "poolers", (*_WRITE, "delete")),
                  Rule("batch", "jobs", _WRITE), _SECRETS, _NAMESPACES)),
    Registration(redis.CORE, (_INSTANCE,), (*_SHARED_SERVER, *_OWN_INSTANCE)),
    Registration(disk.CORE, (Watched(disk.PVC, disk.MANAGED_LABELS, False),),
                 (Rule("", "persistentvolumeclaims", (*_WRITE, "delete")),
                  Rule("storage.k8s.io", "storageclasses", ("get", "list")))),
    Registration(s3.CORE, (_INSTANCE,), (*_SHARED_SERVER, Rule("", "persistentvolumeclaims", _WRITE))),
)


def registration(type_: str, backend: str | None) -> Registration | None:
    """The registration serving `type_` on `backend` (None: the provider is gone; then the one core of the type)."""
    found = [r for r in REGISTERED if r.core.type == type_ and backend in (None, r.core.backend)]
    return found[0] if len(found) == 1 else None


def core_for(type_: str, backend: str | None) -> Backend | None:
    found = registration(type_, backend)
    return found.core if found else None


def admit(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) of a ServiceProvider write: the schema's (lifecycle.service_provider.check), then its
    backend's own (a change the schema lets through but the backend refuses: a pg Cluster shrinking)."""
    problems = check(new)
    if problems:
        return problems
    spec = new.get("spec") or {}
    core = core_for(str(spec.get("type") or ""), str(spec.get("backend") or ""))
    return core.admit(old, new) if core is not None else []
