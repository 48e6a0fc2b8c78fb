"""The storage-class backend, the edge: for a disk claim bound to a storage-class ServiceProvider, read its
PersistentVolumeClaim and StorageClass, ask lifecycle.disk_backend what should be, apply the PVC (created once, its
request grown), and hand the claim's conditions and status fields back to the claim binder; `drop` deletes the PVC
when lifecycle.retention says the claim's data may go."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controller_runtime.client import Kube
from controller_runtime.compare import up_to_date
from controller_runtime.errors import KubeError
from controller_runtime.kinds import GroupVersionKind
from lifecycle import disk_backend as core
from lifecycle.binding import PROVISIONED
from lifecycle.conditions import Condition

__all__ = ["PVC", "STORAGE_CLASS", "DiskBackend"]

log = logging.getLogger("apprafter.claims")

PVC = GroupVersionKind("v1", "PersistentVolumeClaim")
STORAGE_CLASS = GroupVersionKind("storage.k8s.io/v1", "StorageClass")


class DiskBackend:
    """Provisions disk claims bound to storage-class providers: one PersistentVolumeClaim each."""

    backend = core.BACKEND

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def serves(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> bool:
        return core.serves(claim, provider)

    async def provision(self, claim: Mapping[str, Any],
                        provider: Mapping[str, Any]) -> tuple[list[Condition], dict[str, Any]]:
        """The claim's conditions (Ready, and Size once it has a volume) and status fields, after applying its PVC."""
        volume = core.volume_of(claim, provider)
        if isinstance(volume, list):
            return [Condition(PROVISIONED, "False", "InvalidConfig", "; ".join(volume))], {"ready": False}
        live = await self.kube.get(PVC, volume.name, volume.namespace)
        class_name = (live or {}).get("spec", {}).get("storageClassName") or volume.storage_class
        storage_class: Mapping[str, Any] | None
        if class_name:
            storage_class = await self.kube.get(STORAGE_CLASS, class_name)
        else:
            classes, _ = await self.kube.list(STORAGE_CLASS)
            storage_class = core.default_class(classes)
        decided = core.plan(volume, live, storage_class)
        if decided.apply is not None and not up_to_date(live, decided.apply, self.kube.field_manager):
            try:
                written = await self.kube.apply(decided.apply)
            except KubeError as e:
                if e.retryable:
                    raise
                return [Condition(PROVISIONED, "False", "WriteRefused", str(e))], {"ready": False}
            log.info("volume applied", extra={"controller": "claims", "namespace": volume.namespace,
                                              "object": volume.name, "size": volume.size})
            decided = core.plan(volume, written, storage_class)
        return [decided.ready, *([decided.size] if decided.size else [])], decided.fields

    async def drop(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> str | None:
        """Delete the claim's PVC (its PersistentVolume goes by its reclaim policy, Delete for a dynamically
        provisioned one); None once it is deleted or was never there."""
        meta = claim["metadata"]
        name = core.volume_name(claim)
        live = await self.kube.get(PVC, name, meta["namespace"])
        if core.drop_target(claim, live):
            assert live is not None
            await self.kube.delete_exactly(PVC, name, meta["namespace"], str(live["metadata"]["uid"]))
        return None
