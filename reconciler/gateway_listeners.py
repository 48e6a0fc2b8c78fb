"""The public Gateway's per-hostname listeners, the edge: reads the Gateway, the PublicHostname records, the
Applications' HTTPRoutes and Certificates, asks lifecycle.listeners which listeners the Gateway should carry, and
applies exactly those as the operator's own field manager (the chart's listeners stay Argo CD's)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_runtime.client import ALL_NAMESPACES
from controller_runtime.errors import KubeError
from controller_runtime.kinds import KindLike
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key
from controller_runtime.outcomes import Done, Outcome
from controller_runtime.writes import ensure
from lifecycle import listeners
from lifecycle.crd import PUBLIC_HOSTNAME
from renderer.manifests import HTTPROUTE, KINDS

__all__ = ["GatewayListenerController"]

log = logging.getLogger("apprafter.listeners")
CERTIFICATE = next(kind for kind in KINDS if kind.kind == "Certificate")


class GatewayListenerController:
    """Keeps one listener per held, TLS-routed public hostname on the platform's public Gateway."""

    name = "gateway-listeners"
    primary: KindLike = listeners.GATEWAY

    def __init__(self, gateway: str, gateway_namespace: str, records_namespace: str, share: int | None = None) -> None:
        """`share`: the most listeners one namespace's apps hold (None: no share)."""
        self.gateway = gateway
        self.share = share
        self.namespaces: tuple[str, ...] = (gateway_namespace,)
        self.records_namespace = records_namespace
        self.runtime: Runtime | None = None

    def watches(self) -> Sequence[Watch]:
        return [Watch(PUBLIC_HOSTNAME, {}, self.the_gateway, (self.records_namespace,)),
                Watch(HTTPROUTE, {}, self.the_gateway, (ALL_NAMESPACES,)),
                Watch(CERTIFICATE, {}, self.the_gateway, (ALL_NAMESPACES,))]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def the_gateway(self, _: Mapping[str, Any]) -> Iterable[Key]:
        """Any record, route or certificate change may change the listeners of the one Gateway."""
        return [(self.namespaces[0], self.gateway)]

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        if name != self.gateway:
            return Done()
        kube = self.runtime.kube
        gateway = await kube.get(listeners.GATEWAY, name, namespace)
        if gateway is None or gateway["metadata"].get("deletionTimestamp"):
            return Done()  # its creation wakes this again (the primary's watch)
        owned = set(listeners.ours(gateway))
        others = [item for item in (gateway.get("spec") or {}).get("listeners") or [] if item.get("name") not in owned]
        records = self.runtime.informer(PUBLIC_HOSTNAME, {}, (self.records_namespace,)).items()
        routes = self.runtime.informer(HTTPROUTE, {}, (ALL_NAMESPACES,)).items()
        certificates = self.runtime.informer(CERTIFICATE, {}, (ALL_NAMESPACES,)).items()
        decided = listeners.wanted(records, routes, certificates, (name, namespace),
                                   listeners.MAX_LISTENERS - len(others), self.share, owned)
        if decided.left_out:
            log.warning("gateway full", extra={"controller": self.name, "namespace": namespace, "object": name,
                                               "hostnames": ",".join(decided.left_out)})
        if decided.over_share:
            log.warning("namespace share taken", extra={"controller": self.name, "namespace": namespace,
                                                        "object": name, "hostnames": ",".join(decided.over_share)})
        desired = listeners.apply_object(gateway, decided.listeners)
        done = await ensure(kube, None, desired, live=gateway, force=False, field_manager=listeners.FIELD_MANAGER)
        if done.written:
            log.info("listeners", extra={"controller": self.name, "namespace": namespace, "object": name,
                                         "hostnames": ",".join(str(item["name"]) for item in decided.listeners)})
        # then each record says whether its hostname got its listener (its app reads it: ListenerUnavailable)
        by_host = {str(r["metadata"]["name"]): r for r in records}
        for host, mark in listeners.marks(records, decided).items():
            try:
                await ensure(kube, None, listeners.mark_object(by_host[host], mark), live=by_host[host],
                             force=False, field_manager=listeners.FIELD_MANAGER)
            except KubeError as e:
                if e.code not in (404, 422):  # the record went meanwhile (an apply would make a bare one: refused)
                    raise
        return Done()

