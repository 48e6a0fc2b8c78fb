"""The cluster's HostnamePolicies as the webhook reads them: a list+watch of that one cluster-scoped kind (the only
API the webhook calls, read-only), handed to the review workers as it changes (admission.pool sends the current set
with a worker's next review when the worker has an older one)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from controller_runtime.client import ALL_NAMESPACES, Kube
from controller_runtime.informer import Informer
from controller_runtime.kubeconfig import IN_CLUSTER, load_config
from lifecycle.hostname_policy import HOSTNAME_POLICY

__all__ = ["PolicySource", "in_cluster"]

log = logging.getLogger("apprafter.webhook")


def in_cluster() -> bool:
    """Whether this process runs in a pod with a service account token (the chart's webhook does)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (IN_CLUSTER / "token").is_file()


class PolicySource:
    """HostnamePolicies from the cluster (`kubeconfig`, else the pod's account); `version` changes with them."""

    def __init__(self, kubeconfig: Path | None) -> None:
        self.kubeconfig = kubeconfig
        self.version = 0
        self.informer: Informer | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        kube = Kube(load_config(self.kubeconfig), field_manager="apprafter-webhook")
        self.informer = Informer(kube, HOSTNAME_POLICY, (ALL_NAMESPACES,))
        self.informer.handlers.append(self._changed)
        self.task = asyncio.get_running_loop().create_task(self.informer.run())
        log.info("reading HostnamePolicies from the cluster")

    def _changed(self, event: str, obj: dict[str, Any]) -> None:
        self.version += 1

    def ready(self) -> bool:
        """The first list is in (before it, every custom hostname would be refused for want of a policy)."""
        return self.informer is not None and self.informer.synced.is_set()

    def snapshot(self) -> list[dict[str, Any]]:
        """The policies as a worker reads them (name and spec)."""
        assert self.informer is not None
        return [{"metadata": {"name": o["metadata"]["name"]}, "spec": o.get("spec") or {}}
                for o in sorted(self.informer.items(), key=lambda o: str(o["metadata"]["name"]))]

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
