"""The cluster's HostnamePolicies and ServiceProviders as the webhook reads them: a list+watch of those two
cluster-scoped kinds (the only API the webhook calls, read-only), handed to the review workers as they change
(admission.pool sends the current sets with a worker's next review when the worker has older ones)."""

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
from lifecycle.service_provider import SERVICE_PROVIDER

__all__ = ["PolicySource", "in_cluster"]

log = logging.getLogger("apprafter.webhook")


def in_cluster() -> bool:
    """Whether this process runs in a pod with a service account token (the chart's webhook does)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (IN_CLUSTER / "token").is_file()


class PolicySource:
    """HostnamePolicies and ServiceProviders from the cluster (`kubeconfig`, else the pod's account); `version`
    changes with them."""

    def __init__(self, kubeconfig: Path | None) -> None:
        self.kubeconfig = kubeconfig
        self.version = 0
        self.informer: Informer | None = None
        self.providers: Informer | None = None
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        kube = Kube(load_config(self.kubeconfig), field_manager="apprafter-webhook")
        self.informer = Informer(kube, HOSTNAME_POLICY, (ALL_NAMESPACES,))
        self.providers = Informer(kube, SERVICE_PROVIDER, (ALL_NAMESPACES,))
        for informer in (self.informer, self.providers):
            informer.handlers.append(self._changed)
            self.tasks.append(asyncio.get_running_loop().create_task(informer.run()))
        log.info("reading HostnamePolicies and ServiceProviders from the cluster")

    def _changed(self, event: str, obj: dict[str, Any]) -> None:
        self.version += 1

    def ready(self) -> bool:
        """Both first lists are in (before them, every custom hostname would be refused for want of a policy, and a
        size past a provider's ceiling let through)."""
        return all(i is not None and i.synced.is_set() for i in (self.informer, self.providers))

    def snapshot(self) -> list[dict[str, Any]]:
        """The policies as a worker reads them (name and spec)."""
        assert self.informer is not None
        return _named(self.informer)

    def provider_snapshot(self) -> list[dict[str, Any]]:
        """The ServiceProviders as a worker binds claims to them (name, labels and spec)."""
        assert self.providers is not None
        return _named(self.providers, labels=True)

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()


def _named(informer: Informer, *, labels: bool = False) -> list[dict[str, Any]]:
    """The informer's objects by name, with what the rules read of them."""
    return [{"metadata": {"name": o["metadata"]["name"],
                          **({"labels": o["metadata"].get("labels") or {}} if labels else {})},
             "spec": o.get("spec") or {}}
            for o in sorted(informer.items(), key=lambda o: str(o["metadata"]["name"]))]
