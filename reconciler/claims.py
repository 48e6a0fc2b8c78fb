"""The claim binder, the edge: reads a ResourceClaim (fresh) and the cluster's ServiceProviders, asks
lifecycle.binding which provider it is bound to, lets the operator's own backends (reconciler.redis_claims for
redis-server providers, reconciler.pg_claims for cloudnative-pg ones) provision it, and writes the claim's status
once as the operator's status field manager: status.provider and Bound, plus that backend's Ready, ready and
connection. Another backend's claims get provider and Bound alone (their status.ready and conditions stay that
backend's)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_runtime.client import ALL_NAMESPACES
from controller_runtime.informer import Informer
from controller_runtime.kinds import KindLike
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key, itself, key_of
from controller_runtime.outcomes import Done, Outcome, Requeue
from controller_runtime.writes import write_status
from lifecycle import pg_backend, redis_backend
from lifecycle.binding import bind, status_of
from lifecycle.service_provider import SERVICE_PROVIDER
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
        self.redis: RedisBackend | None = None
        self.pg: PgBackend | None = None

    def watches(self) -> Sequence[Watch]:
        watches = [Watch(RESOURCE_CLAIM, {}, itself), Watch(SERVICE_PROVIDER, {}, self.claims_of, CLUSTER)]
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
        if self.services_namespace and self.redis_image:
            self.redis = RedisBackend(runtime.kube, self.services_namespace, self.redis_image)
        if self.pg_namespace and self.pg_image:
            self.pg = PgBackend(runtime.kube, self.pg_namespace, self.pg_image)

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

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        kube = self.runtime.kube
        # Fresh: a binding is decided on the claim as it is, never on a cached one that has not seen it bound yet.
        claim = await kube.get(RESOURCE_CLAIM, name, namespace)
        if claim is None or claim["metadata"].get("deletionTimestamp"):
            self.claims().forget(namespace, name)
            return Done()
        binding = bind(claim, self.providers().items())
        provider = self.providers().get("", binding.provider) if binding.provider else None
        provisioned = None
        if self.redis is not None and binding.condition.status == "True" and redis_backend.serves(claim, provider):
            assert provider is not None
            provisioned = await self.redis.provision(claim, provider)
        elif self.pg is not None and binding.condition.status == "True" and pg_backend.serves(claim, provider):
            assert provider is not None
            provisioned = await self.pg.provision(claim, provider)
        written = await write_status(kube, self.claims(), claim, status_of(binding, claim, time_now(), provisioned))
        if written is not claim:
            log.info("binding", extra={"controller": "claims", "namespace": namespace, "object": name,
                                       "provider": binding.provider or "", "reason": binding.condition.reason,
                                       **({"ready": provisioned[0].reason} if provisioned else {})})
        if provisioned and provisioned[0].reason in RETRIED:
            return Requeue(provisioned[0].message)
        return Done()

