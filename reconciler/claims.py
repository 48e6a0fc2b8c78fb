"""The claim binder, the edge: reads a ResourceClaim (fresh) and the cluster's ServiceProviders, asks
lifecycle.binding which provider it is bound to, lets the operator's own backend (reconciler.redis_claims for
redis-server providers, reconciler.pg_claims for cloudnative-pg ones, reconciler.disk_claims for storage-class ones)
provision it, and writes the claim's status once as the operator's status field manager: status.provider and Bound,
plus that backend's Ready, ready and connection. Another backend's claims get provider and Bound alone (their
status.ready and conditions stay that backend's). A claim one of its backends provisions carries the finalizer
lifecycle.retention.FINALIZER, set before anything is provisioned; once such a claim is deleted, its data is dropped
by the backend only when lifecycle.retention says so (an approved data-migration plan, an administrator's act),
else it stays; then the finalizer goes."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compatibility.authority import PLAN_DROP_PREFIX
from compatibility.crd import MIGRATION_PLAN
from controller_runtime.client import ALL_NAMESPACES
from controller_runtime.errors import KubeError
from controller_runtime.informer import Informer
from controller_runtime.kinds import KindLike
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key, itself, key_of
from controller_runtime.outcomes import Done, Outcome, Requeue
from controller_runtime.writes import write_status
from lifecycle import disk_backend, pg_backend, redis_backend, retention
from lifecycle.binding import bind, status_of
from lifecycle.conditions import Condition
from lifecycle.service_provider import SERVICE_PROVIDER
from reconciler.backends import ClaimBackend
from reconciler.disk_claims import PVC, DiskBackend
from reconciler.pg_claims import CLUSTER as PG_CLUSTER
from reconciler.pg_claims import DATABASE as PG_DATABASE
from reconciler.pg_claims import PgBackend
from reconciler.redis_claims import DEPLOYMENT, RedisBackend
from renderer.crds import RESOURCE_CLAIM
from toolchain.timestamps import time_now

__all__ = ["ClaimController"]

log = logging.getLogger("apprafter.claims")

CLUSTER = (ALL_NAMESPACES,)
# A backend's reasons that pass by themselves: looked at again with backoff (an instance's Deployment becoming
# available, a CloudNativePG Cluster or Database changing, wakes its claims at once through the watches).
RETRIED = frozenset({"BackendUnreachable", "InstanceNotReady", "RoleNotReady", "DatabaseNotReady"})


class ClaimController:
    """Binds every ResourceClaim of the watched namespaces to one ServiceProvider (docs/platform-services.md)."""

    name = "claims"
    primary: KindLike = RESOURCE_CLAIM
    namespaces: tuple[str, ...] = ()  # the operator's --namespace list

    def __init__(self, services_namespace: str | None = None, redis_image: str | None = None,
                 pg_namespace: str | None = None, pg_image: str | None = None) -> None:
        """`services_namespace`: where the redis-server providers' instances run (running `redis_image`);
        `pg_namespace`: where the cloudnative-pg providers' Clusters run (running `pg_image`); None: no such backend
        of the operator's own, those claims are bound only."""
        self.runtime: Runtime | None = None
        self.services_namespace, self.redis_image = services_namespace, redis_image
        self.pg_namespace, self.pg_image = pg_namespace, pg_image
        # The backends the operator runs itself (reconciler.backends).
        self.backends: list[ClaimBackend] = []

    def watches(self) -> Sequence[Watch]:
        watches = [Watch(RESOURCE_CLAIM, {}, itself), Watch(SERVICE_PROVIDER, {}, self.claims_of, CLUSTER),
                   Watch(PVC, disk_backend.MANAGED_LABELS, self.claim_of_volume)]  # a volume bound wakes its claim
        if self.services_namespace:  # an instance's Deployment becoming available wakes its provider's claims
            watches.append(Watch(DEPLOYMENT, redis_backend.INSTANCE_LABELS, self.claims_of_instance,
                                 (self.services_namespace,)))
        if self.pg_namespace and self.pg_image:  # CloudNativePG's status writes wake the provider's claims
            for kind in (PG_CLUSTER, PG_DATABASE):
                watches.append(Watch(kind, pg_backend.CLUSTER_LABELS, self.claims_of_instance,
                                     (self.pg_namespace,)))
        return watches

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.backends = [DiskBackend(runtime.kube)]
        if self.services_namespace and self.redis_image:
            self.backends.append(RedisBackend(runtime.kube, self.services_namespace, self.redis_image))
        if self.pg_namespace and self.pg_image:
            self.backends.append(PgBackend(runtime.kube, self.pg_namespace, self.pg_image))

    def claims(self) -> Informer:
        assert self.runtime is not None
        return self.runtime.informer(RESOURCE_CLAIM)

    def providers(self) -> Informer:
        assert self.runtime is not None
        return self.runtime.informer(SERVICE_PROVIDER, {}, CLUSTER)

    def claims_of(self, provider: Mapping[str, Any]) -> Iterable[Key]:
        """The claims a change of this provider may concern: those of its type, and those bound to it."""
        kind = (provider.get("spec") or {}).get("type")
        name = provider["metadata"]["name"]
        return sorted(key_of(c) for c in self.claims().items()
                      if (c.get("spec") or {}).get("type") == kind or (c.get("status") or {}).get("provider") == name)

    def claims_of_instance(self, instance: Mapping[str, Any]) -> Iterable[Key]:
        """The claims bound to the provider whose instance this is (a Deployment, a Cluster, a Database)."""
        provider = ((instance.get("metadata") or {}).get("labels") or {}).get(redis_backend.PROVIDER_LABEL)
        return sorted(key_of(c) for c in self.claims().items() if (c.get("status") or {}).get("provider") == provider)

    def claim_of_volume(self, volume: Mapping[str, Any]) -> Iterable[Key]:
        """The claim a disk backend's PersistentVolumeClaim belongs to (its label)."""
        meta = volume.get("metadata") or {}
        claim = (meta.get("labels") or {}).get(disk_backend.CLAIM_LABEL)
        return [(str(meta.get("namespace") or ""), str(claim))] if claim else []

    def backend_of(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> ClaimBackend | None:
        return next((b for b in self.backends if b.serves(claim, provider)), None)

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        kube = self.runtime.kube
        # Fresh: a binding is decided on the claim as it is, never on a cached one that has not seen it bound yet.
        claim = await kube.get(RESOURCE_CLAIM, name, namespace)
        if claim is None or (claim["metadata"].get("deletionTimestamp") and not retention.has_finalizer(claim)):
            self.claims().forget(namespace, name)
            return Done()
        if claim["metadata"].get("deletionTimestamp"):
            return await self.release(claim)
        binding = bind(claim, self.providers().items())
        provider = self.providers().get("", binding.provider) if binding.provider else None
        provisioned = None
        backend = self.backend_of(claim, provider) if binding.condition.status == "True" else None
        if backend is not None:
            assert provider is not None
            if not retention.has_finalizer(claim):  # before any data exists: its deletion waits for the backend
                claim = await self.finalizer(claim, add=True)
            provisioned = await backend.provision(claim, provider)
        said = [] if provisioned is None else (
            [provisioned[0]] if isinstance(provisioned[0], Condition) else list(provisioned[0]))
        written = await write_status(kube, self.claims(), claim, status_of(binding, claim, time_now(), provisioned))
        if written is not claim:
            log.info("binding", extra={"controller": "claims", "namespace": namespace, "object": name,
                                       "provider": binding.provider or "", "reason": binding.condition.reason,
                                       **({"ready": said[0].reason} if said else {})})
        if said and said[0].reason in RETRIED:  # the backend's Ready condition comes first
            return Requeue(said[0].message)
        return Done()

    async def finalizer(self, claim: dict[str, Any], *, add: bool) -> dict[str, Any]:
        """The claim with the finalizer added (or removed), applied as the provider's own field: finalizers are a
        set, so nobody else's entry is touched."""
        assert self.runtime is not None
        kube = self.runtime.kube
        meta = claim["metadata"]
        body = {"apiVersion": claim["apiVersion"], "kind": claim["kind"],
                "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
                             **({"finalizers": [retention.FINALIZER]} if add else {})}}
        written = await kube.apply(body, field_manager=kube.status_field_manager)
        self.claims().update(written)
        return written

    async def release(self, claim: dict[str, Any]) -> Outcome:
        """A deleted claim that carries the finalizer: its data dropped by its backend when lifecycle.retention says
        it may go (retried while the backend cannot), else left where it is; then the finalizer removed."""
        assert self.runtime is not None
        meta = claim["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        mark = str((meta.get("annotations") or {}).get(retention.DROP_ANNOTATION) or "")
        plan = None
        if mark.startswith(PLAN_DROP_PREFIX):
            plan = await self.runtime.kube.get(MIGRATION_PLAN, mark[len(PLAN_DROP_PREFIX):], namespace)
        verdict = retention.verdict(claim, plan)
        where = {"controller": "claims", "namespace": namespace, "object": name}
        if verdict.drop:
            bound = (claim.get("status") or {}).get("provider")
            provider = self.providers().get("", bound) if bound else None
            backend = self.backend_of(claim, provider) or next(
                (b for b in self.backends if b.serves(claim, {"spec": {"backend": b.backend}})), None)
            waits = await backend.drop(claim, provider) if backend else "no backend of the operator's serves it"
            if waits is not None:
                await self.runtime.recorder.event(claim, "DataDropWaiting", f"{verdict.why}; the data is not dropped "
                                                  f"yet: {waits}", meta["uid"] + waits, type_="Warning")
                log.warning("data drop waits", extra={**where, "reason": waits})
                return Requeue(waits)
            await self.runtime.recorder.event(claim, "DataDropped", f"the claim's data was dropped: {verdict.why}",
                                              meta["uid"], type_="Warning")
        else:
            await self.runtime.recorder.event(claim, "DataRetained", verdict.why, meta["uid"])
        log.info("released", extra={**where, "dropped": verdict.drop, "reason": verdict.why})
        try:
            await self.finalizer(claim, add=False)
        except KubeError as e:
            if e.code != 404:  # gone already: someone removed the finalizer meanwhile
                raise
        self.claims().forget(namespace, name)
        return Done()

