"""The public Gateways' per-hostname listeners, the edge: reads the Gateways, the PublicHostname records, the
Applications' HTTPRoutes and Certificates, asks lifecycle.listeners where each hostname goes and which listeners each
Gateway should carry, and applies exactly those as the operator's own field manager (the chart's listeners stay Argo
CD's); makes the Gateways past the chart's as hostnames need them, and deletes one nothing is placed on."""

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
from controller_runtime.writes import delete_exactly, ensure
from lifecycle import listeners
from lifecycle.crd import PUBLIC_HOSTNAME
from renderer.context import HTTP_LISTENER
from renderer.manifests import HTTPROUTE, KINDS

__all__ = ["DEFAULT_GATEWAYS", "GatewayListenerController"]

log = logging.getLogger("apprafter.listeners")
CERTIFICATE = next(kind for kind in KINDS if kind.kind == "Certificate")
DEFAULT_GATEWAYS = 16  # --public-gateways: the chart's and 15 more, ≈ 1,000 hostnames


class GatewayListenerController:
    """Keeps one listener per held, TLS-routed public hostname on the public Gateway it is placed on."""

    name = "gateway-listeners"
    primary: KindLike = listeners.GATEWAY

    def __init__(self, gateway: str, gateway_namespace: str, records_namespace: str, share: int | None = None,
                 gateways: int = DEFAULT_GATEWAYS) -> None:
        """`share`: the most listeners one namespace's apps hold (None: no share); `gateways`: how many public
        Gateways hostnames may be placed on (the chart's the first)."""
        self.gateway = gateway
        self.share = share
        self.names = listeners.gateway_names(gateway, gateways)
        self.namespaces: tuple[str, ...] = (gateway_namespace,)
        self.records_namespace = records_namespace
        self.runtime: Runtime | None = None

    def watches(self) -> Sequence[Watch]:
        # a Gateway past the chart's changed (its status, or deleted by hand) is the chart's key's to judge: one pass
        # at a time decides for every Gateway
        return [Watch(listeners.GATEWAY, {}, self.the_gateway, self.namespaces),
                Watch(PUBLIC_HOSTNAME, {}, self.the_gateway, (self.records_namespace,)),
                Watch(HTTPROUTE, {}, self.the_gateway, (ALL_NAMESPACES,)),
                Watch(CERTIFICATE, {}, self.the_gateway, (ALL_NAMESPACES,))]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def the_gateway(self, _: Mapping[str, Any]) -> Iterable[Key]:
        """Any record, route or certificate change may change where hostnames go: one key decides for all."""
        return [(self.namespaces[0], self.gateway)]

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        if name != self.gateway:
            return Done()  # its event also brought the chart's Gateway's key (the first watch)
        kube = self.runtime.kube
        main = await kube.get(listeners.GATEWAY, self.gateway, namespace)
        if main is None or main["metadata"].get("deletionTimestamp"):
            return Done()  # its creation wakes this again (the primary's watch)
        owned = set(listeners.ours(main))
        charts = [item for item in (main.get("spec") or {}).get("listeners") or [] if item.get("name") not in owned]
        # a Gateway past the chart's carries a copy of its plain HTTP listener (the redirects, HTTP-01), no more
        copied = [item for item in charts if item.get("name") == HTTP_LISTENER]
        gateways = self.runtime.informer(listeners.GATEWAY, namespaces=self.namespaces)
        live = {self.gateway: main, **{n: found for n in self.names[1:] if (found := gateways.get(namespace, n))}}
        slots = [listeners.Slot(self.gateway, listeners.MAX_LISTENERS - len(charts), frozenset(owned))]
        slots += [listeners.Slot(n, 0) if n in live and not _ours(live[n])  # someone else's under that name
                  else listeners.Slot(n, listeners.MAX_LISTENERS - len(copied),
                                      frozenset(listeners.ours(live[n])) - {HTTP_LISTENER} if n in live
                                      else frozenset())
                  for n in self.names[1:]]
        records = self.runtime.informer(PUBLIC_HOSTNAME, {}, (self.records_namespace,)).items()
        routes = self.runtime.informer(HTTPROUTE, {}, (ALL_NAMESPACES,)).items()
        certificates = self.runtime.informer(CERTIFICATE, {}, (ALL_NAMESPACES,)).items()
        decided = listeners.spread(records, routes, certificates, slots, namespace, self.share)
        fields = {"controller": self.name, "namespace": namespace, "object": self.gateway}
        if decided.left_out:
            log.warning("gateways full", extra={**fields, "hostnames": ",".join(decided.left_out)})
        if decided.over_share:
            log.warning("namespace share taken", extra={**fields, "hostnames": ",".join(decided.over_share)})
        await self.apply_gateways(main, copied, live, decided)
        # then each record says whether its hostname got its listener and where (its app reads it: its routes'
        # Gateway, ListenerUnavailable)
        by_host = {str(r["metadata"]["name"]): r for r in records}
        for host, (mark, gateway) in listeners.marks(records, decided).items():
            try:
                await ensure(kube, None, listeners.mark_object(by_host[host], mark, gateway), live=by_host[host],
                             force=False, field_manager=listeners.FIELD_MANAGER)
            except KubeError as e:
                if e.code not in (404, 422):  # the record went meanwhile (an apply would make a bare one: refused)
                    raise
        return Done()

    async def apply_gateways(self, main: Mapping[str, Any], copied: Sequence[Mapping[str, Any]],
                             live: Mapping[str, Mapping[str, Any]], decided: listeners.Spread) -> None:
        """The chart's Gateway with its hostnames' listeners; each further Gateway a hostname is placed on made
        (or kept) with a copy of the chart's listeners and its own; one nothing is placed on any more deleted."""
        assert self.runtime is not None
        kube, cache = self.runtime.kube, self.runtime.informer(listeners.GATEWAY, namespaces=self.namespaces)
        used = set(decided.placed.values())
        for name in self.names:
            made = decided.listeners[name]
            if name == self.gateway:
                desired = listeners.apply_object(main, made)
            elif name in used:
                desired = listeners.overflow_object(main, name, copied, made)
            else:
                if name in live and _ours(live[name]):
                    await delete_exactly(kube, cache, live[name])
                    log.info("gateway deleted", extra={"controller": self.name, "object": name})
                continue
            done = await ensure(kube, cache, desired, live=live.get(name), force=False,
                                field_manager=listeners.FIELD_MANAGER)
            if done.written:
                log.info("listeners", extra={"controller": self.name, "namespace": main["metadata"]["namespace"],
                                             "object": name, "hostnames": ",".join(str(i["name"]) for i in made)})


def _ours(gateway: Mapping[str, Any]) -> bool:
    """Whether the operator made this Gateway past the chart's (its label says which one it extends)."""
    return bool((gateway["metadata"].get("labels") or {}).get(listeners.OVERFLOW_LABEL))
