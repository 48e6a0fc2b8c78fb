"""The claim binder, the edge: reads a ResourceClaim (fresh) and the cluster's ServiceProviders, asks
lifecycle.binding which provider it is bound to, and writes status.provider and the Bound condition alone (the
backend's status.ready and conditions stay the backend's) as the operator's status field manager."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_runtime.client import ALL_NAMESPACES
from controller_runtime.informer import Informer
from controller_runtime.kinds import KindLike
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key, itself, key_of
from controller_runtime.outcomes import Done, Outcome
from controller_runtime.writes import write_status
from lifecycle.binding import bind, status_of
from lifecycle.service_provider import SERVICE_PROVIDER
from renderer.crds import RESOURCE_CLAIM
from toolchain.timestamps import time_now

__all__ = ["ClaimController"]

log = logging.getLogger("apprafter.claims")

CLUSTER = (ALL_NAMESPACES,)


class ClaimController:
    """Binds every ResourceClaim of the watched namespaces to one ServiceProvider (docs/platform-services.md)."""

    name = "claims"
    primary: KindLike = RESOURCE_CLAIM
    namespaces: tuple[str, ...] = ()  # the operator's --namespace list

    def __init__(self) -> None:
        self.runtime: Runtime | None = None

    def watches(self) -> Sequence[Watch]:
        return [Watch(RESOURCE_CLAIM, {}, itself), Watch(SERVICE_PROVIDER, {}, self.claims_of, CLUSTER)]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

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

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        kube = self.runtime.kube
        # Fresh: a binding is decided on the claim as it is, never on a cached one that has not seen it bound yet.
        claim = await kube.get(RESOURCE_CLAIM, name, namespace)
        if claim is None or claim["metadata"].get("deletionTimestamp"):
            self.claims().forget(namespace, name)
            return Done()
        binding = bind(claim, self.providers().items())
        written = await write_status(kube, self.claims(), claim, status_of(binding, claim, time_now()))
        if written is not claim:
            log.info("binding", extra={"controller": "claims", "namespace": namespace, "object": name,
                                       "provider": binding.provider or "", "reason": binding.condition.reason})
        return Done()

