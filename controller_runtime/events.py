"""events.k8s.io/v1 Events on the objects a controller reconciles; one per occurrence key, so a retried reconcile
never duplicates one."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Literal

from controller_runtime.client import Kube
from controller_runtime.errors import KubeError
from controller_runtime.kinds import GroupVersionKind
from toolchain.timestamps import micro_time

__all__ = ["EVENT", "MAX_NOTE", "Recorder"]

EVENT = GroupVersionKind("events.k8s.io/v1", "Event")
MAX_NOTE = 1024  # the API's limit


class Recorder:
    """Creates Events named after (object, reason, occurrence): the second create of one answers 409."""

    def __init__(self, kube: Kube, controller: str, instance: str) -> None:
        self.kube = kube
        self.controller = controller  # reportingController, e.g. example.io/operator
        self.instance = instance[:128]

    async def event(self, regarding: Mapping[str, Any], reason: str, note: str, occurrence: str, *,
                    type_: Literal["Normal", "Warning"] = "Normal", action: str = "Reconcile") -> None:
        meta = regarding["metadata"]
        digest = hashlib.sha256(f"{reason}\0{occurrence}".encode()).hexdigest()[:16]
        body = {
            "apiVersion": EVENT.api_version, "kind": EVENT.kind,
            "metadata": {"name": f"{meta['name']}.{digest}", "namespace": meta["namespace"]},
            "eventTime": micro_time(), "reportingController": self.controller, "reportingInstance": self.instance,
            "action": action, "reason": reason, "type": type_,
            "note": note if len(note) <= MAX_NOTE else note[: MAX_NOTE - 1] + "…",
            "regarding": {"apiVersion": regarding["apiVersion"], "kind": regarding["kind"], "name": meta["name"],
                          "namespace": meta["namespace"], "uid": meta.get("uid", "")},
        }
        try:
            await self.kube.create(body)
        except KubeError as e:
            if e.code != 409:  # 409: this occurrence was already reported (a retried reconcile)
                self.kube.telemetry.logger("events").warning("event not recorded", extra={
                    "namespace": meta["namespace"], "object": meta["name"], "reason": reason, "error": str(e)})
