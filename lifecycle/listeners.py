"""The public Gateways' per-hostname HTTPS listeners: one per hostname an Application holds and routes with TLS, each
serving that app's own certificate to that app's namespace's routes alone (docs/application.md "Public TLS"), spread
over as many Gateways as the hostnames need, each hostname placed once (docs/application.md "Past one Gateway")."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from lifecycle.conditions import find_condition
from lifecycle.crd import PUBLIC_HOSTNAME
from lifecycle.hostnames import holder
from renderer.context import LISTENERS_FIELD_MANAGER
from renderer.crds import APPLICATION
from renderer.manifests import Kind
from renderer.manifests.network import tls_listener, tls_secret_name

__all__ = ["FIELD_MANAGER", "GATEWAY", "GATEWAY_ANNOTATION", "GATEWAY_FULL", "LISTENER_ANNOTATION", "MAX_LISTENERS",
           "NAMESPACE_FULL", "OVERFLOW_LABEL", "Slot", "Spread", "apply_object", "full", "gateway_names", "issued",
           "listener", "mark_object", "marks", "on_placed_gateways", "ours", "overflow_object", "spread"]

GATEWAY = Kind("gateway.networking.k8s.io/v1", "Gateway", "gateways")
# The operator's own field manager on the Gateways: Argo CD (which syncs the gateway chart) ignores the fields it
# owns, server-side apply merges its listeners with the chart's by name, and an apply of the whole set removes the
# ones it no longer lists.
FIELD_MANAGER = LISTENERS_FIELD_MANAGER
MAX_LISTENERS = 64  # the Gateway API CRD's maxItems on spec.listeners
HTTPS_PORT = 443
# On a PublicHostname record, written by the listeners' field manager: whether its hostname has its listener
# (`listening`), is left without one because every Gateway is full (`gateway-full`: its app says
# ListenerUnavailable), or is not due one yet (`waiting`: no TLS route of its holder, or no certificate issued yet);
# and the Gateway its hostname is placed on (`apprafter.io/gateway`: its routes attach there, its DNS points there).
LISTENER_ANNOTATION = "apprafter.io/listener"
GATEWAY_ANNOTATION = "apprafter.io/gateway"
LISTENING, GATEWAY_FULL, WAITING = "listening", "gateway-full", "waiting"
NAMESPACE_FULL = "namespace-full"  # left out: its namespace holds its share of the Gateways' listeners already
# On a Gateway the operator made past the chart's: the chart's Gateway it extends.
OVERFLOW_LABEL = "apprafter.io/overflow-of"
NETWORK_LABEL = "apprafter.io/network"  # the chart's, on each of its Gateways


class Slot(NamedTuple):
    """One public Gateway a hostname may be placed on: its name, how many hostnames it has room for, and the
    hostnames whose listener it carries now."""

    name: str
    room: int
    listening: frozenset[str] = frozenset()


class Spread(NamedTuple):
    """Per Gateway, the listeners to own (by hostname); the Gateway each placed hostname is on; the hostnames left
    without one because every Gateway is full, and those left without one because their namespace has its share."""

    listeners: dict[str, tuple[dict[str, Any], ...]]
    placed: dict[str, str]
    left_out: tuple[str, ...] = ()
    over_share: tuple[str, ...] = ()


def gateway_names(main: str, count: int) -> list[str]:
    """The public Gateways hostnames go on, in the order they fill: the chart's, then `<main>-2` ... `<main>-count`."""
    return [main] + [f"{main}-{index}" for index in range(2, count + 1)]


def _made_by(route: Mapping[str, Any], app: str) -> bool:
    """Whether the Application `app` controls the route (the operator made it from that app's render)."""
    group = APPLICATION.api_version.split("/")[0] + "/"
    return any(ref.get("controller") and ref.get("kind") == APPLICATION.kind and ref.get("name") == app
               and str(ref.get("apiVersion", "")).startswith(group)
               for ref in (route.get("metadata") or {}).get("ownerReferences") or [])


def _routes_tls(route: Mapping[str, Any], host: str, names: set[str], namespace: str) -> bool:
    """Whether `route` serves `host` with TLS on one of the public Gateways: it names the hostname's listener."""
    spec = route.get("spec") or {}
    if host not in (spec.get("hostnames") or []):
        return False
    return any(ref.get("name") in names and ref.get("namespace") == namespace
               and ref.get("sectionName") == tls_listener(host) for ref in spec.get("parentRefs") or [])


def listener(host: str, namespace: str, app: str, environment: str) -> dict[str, Any]:
    """HTTPS on 443 for `host` alone, terminated with the app's certificate Secret (its ReferenceGrant lets the
    Gateways read it), taking routes from the app's namespace only: no other tenant attaches to it."""
    return {
        "name": tls_listener(host), "hostname": host, "port": HTTPS_PORT, "protocol": "HTTPS",
        "tls": {"mode": "Terminate", "certificateRefs": [
            {"group": "", "kind": "Secret", "name": tls_secret_name(app, environment), "namespace": namespace}]},
        "allowedRoutes": {
            "namespaces": {"from": "Selector",
                           "selector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}},
            "kinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]},
    }


def issued(certificate: Mapping[str, Any] | None, secret: str) -> bool:
    """Whether cert-manager has written `secret` from this Certificate at least once (Ready now, or a certificate
    with an expiry already issued: a failing renewal leaves the last one serving). Before that the listener would
    name a Secret that does not exist, and Traefik then refuses the whole shared Gateway (ListenersNotValid)."""
    if certificate is None or (certificate.get("spec") or {}).get("secretName") != secret:
        return False
    status = certificate.get("status") or {}
    ready = find_condition(status.get("conditions"), "Ready")
    return ready.get("status") == "True" or bool(status.get("notAfter"))


class _Routed(NamedTuple):
    created: str
    host: str
    namespace: str
    listener: dict[str, Any] | None  # None: its certificate not issued yet
    was_on: str | None  # the Gateway it is placed on (its listener there, or its record's word)


def _routed(records: Iterable[Mapping[str, Any]], routes: Iterable[Mapping[str, Any]],
            certificates: Iterable[Mapping[str, Any]], slots: Sequence[Slot], namespace: str) -> list[_Routed]:
    """The held hostnames whose holder's own route names their listener on one of the Gateways, oldest first."""
    names = {slot.name for slot in slots}
    on = {host: slot.name for slot in slots for host in slot.listening}
    by_key = {(r["metadata"].get("namespace"), r["metadata"]["name"]): r for r in routes}
    certified = {(c["metadata"].get("namespace"), c["metadata"]["name"]): c for c in certificates}
    found = []
    for record in records:
        host = str(record["metadata"]["name"])
        holder_ns, app, environment = holder(record)
        route = by_key.get((holder_ns, app))
        if route is None or not _made_by(route, app) or not _routes_tls(route, host, names, namespace):
            continue
        made = (listener(host, holder_ns, app, environment)
                if issued(certified.get((holder_ns, app)), tls_secret_name(app, environment)) else None)
        said = _annotation(record, GATEWAY_ANNOTATION)
        found.append(_Routed(str(record["metadata"].get("creationTimestamp") or ""), host, holder_ns, made,
                             on.get(host) or (said if said in names else None)))
    return sorted(found, key=lambda item: (item.created, item.host))


def spread(records: Iterable[Mapping[str, Any]], routes: Iterable[Mapping[str, Any]],
           certificates: Iterable[Mapping[str, Any]], slots: Sequence[Slot], namespace: str,
           share: int | None = None) -> Spread:
    """Place each PublicHostname whose holder's own route (the HTTPRoute named by the app, in its namespace, made by
    its Application) names the hostname's listener on one of the Gateways `slots` (in `namespace`), and give it its
    listener there once the app's certificate was issued. A placed hostname stays where it is (its listener, its
    DNS); the others go, the oldest holdings first, on the first Gateway with room, so a new app never takes an
    older one's place; none past `share` in a namespace (one namespace never takes every other's), though the
    hostnames placed already keep theirs (a lower share never takes a serving app off)."""
    found = _routed(records, routes, certificates, slots, namespace)
    taken: dict[str, int] = {}
    within, over_share = [], []
    for item in found:
        if share is not None and taken.get(item.namespace, 0) >= share and item.was_on is None:
            over_share.append(item.host)
            continue
        taken[item.namespace] = taken.get(item.namespace, 0) + 1
        within.append(item)
    room = {slot.name: max(slot.room, 0) for slot in slots}
    placed: dict[str, str] = {}
    for item in within:  # those placed already first, where they are
        if item.was_on is not None and room[item.was_on] > 0:
            placed[item.host] = item.was_on
            room[item.was_on] -= 1
    left_out = []
    for item in within:
        if item.host in placed:
            continue
        free = next((slot.name for slot in slots if room[slot.name] > 0), None)
        if free is None:
            left_out.append(item.host)
            continue
        placed[item.host] = free
        room[free] -= 1
    listeners = {slot.name: tuple(item.listener for item in sorted(within, key=lambda item: item.host)
                                  if item.listener is not None and placed.get(item.host) == slot.name)
                 for slot in slots}
    return Spread(listeners, dict(sorted(placed.items())), tuple(sorted(left_out)), tuple(sorted(over_share)))


def ours(gateway: Mapping[str, Any], manager: str = FIELD_MANAGER) -> list[str]:
    """The names of the listeners `manager` owns on the live Gateway (from its managedFields), sorted."""
    names: set[str] = set()
    for entry in (gateway.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") != manager or entry.get("operation") != "Apply":
            continue
        listeners = ((entry.get("fieldsV1") or {}).get("f:spec") or {}).get("f:listeners") or {}
        for key in listeners:
            if key.startswith("k:"):
                name = json.loads(key[2:]).get("name")
                if isinstance(name, str):
                    names.add(name)
    return sorted(names)


def apply_object(gateway: Mapping[str, Any], listeners: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the operator applies to the chart's Gateway: its identity and its own listeners, nothing else."""
    meta = gateway["metadata"]
    return {"apiVersion": GATEWAY.api_version, "kind": GATEWAY.kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "spec": {"listeners": [dict(item) for item in listeners]}}


def overflow_object(main: Mapping[str, Any], name: str, copied: Sequence[Mapping[str, Any]],
                    listeners: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A Gateway the operator makes past the chart's: the chart Gateway's class and network label, a copy of the
    chart's listeners `copied` (its plain HTTP one: the redirects and HTTP-01 challenges of the hostnames placed
    here), and the hostnames' listeners."""
    meta = main["metadata"]
    # not the chart's labels: Argo CD would take a Gateway with its instance label for one of the chart's, to prune
    network = {key: value for key, value in (meta.get("labels") or {}).items() if key == NETWORK_LABEL}
    labels = {**network, OVERFLOW_LABEL: meta["name"]}
    return {"apiVersion": GATEWAY.api_version, "kind": GATEWAY.kind,
            "metadata": {"name": name, "namespace": meta["namespace"], "labels": dict(sorted(labels.items()))},
            "spec": {"gatewayClassName": (main.get("spec") or {}).get("gatewayClassName"),
                     "listeners": [dict(item) for item in (*copied, *listeners)]}}


def _annotation(record: Mapping[str, Any], key: str) -> str | None:
    return ((record.get("metadata") or {}).get("annotations") or {}).get(key)


def marks(records: Iterable[Mapping[str, Any]], decided: Spread) -> dict[str, tuple[str, str | None]]:
    """The records (by hostname) whose marks must change to say what `decided` gives their hostname: its listener
    mark, and the Gateway it is placed on (None: none)."""
    served = {str(item["hostname"]) for made in decided.listeners.values() for item in made}
    left_out, over_share = set(decided.left_out), set(decided.over_share)
    changed = {}
    for record in records:
        host = str(record["metadata"]["name"])
        mark = (LISTENING if host in served else GATEWAY_FULL if host in left_out
                else NAMESPACE_FULL if host in over_share else WAITING)
        gateway = decided.placed.get(host)
        if (_annotation(record, LISTENER_ANNOTATION), _annotation(record, GATEWAY_ANNOTATION)) != (mark, gateway):
            changed[host] = (mark, gateway)
    return dict(sorted(changed.items()))


def mark_object(record: Mapping[str, Any], mark: str, gateway: str | None = None) -> dict[str, Any]:
    """What the listeners' field manager applies to a record: its marks alone."""
    meta = record["metadata"]
    annotations = {LISTENER_ANNOTATION: mark, **({GATEWAY_ANNOTATION: gateway} if gateway else {})}
    return {"apiVersion": PUBLIC_HOSTNAME.api_version, "kind": PUBLIC_HOSTNAME.kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "annotations": annotations}}


def full(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The hostnames, of the given records, left without a listener (every Gateway full, or their namespace's share
    taken), with their mark, sorted."""
    return {str(r["metadata"]["name"]): str(_annotation(r, LISTENER_ANNOTATION))
            for r in sorted(records, key=lambda r: r["metadata"]["name"])
            if _annotation(r, LISTENER_ANNOTATION) in (GATEWAY_FULL, NAMESPACE_FULL)}


def on_placed_gateways(children: Sequence[dict[str, Any]], held: Iterable[Mapping[str, Any]], main: str,
                       namespace: str) -> list[dict[str, Any]]:
    """The app's children with each HTTPRoute that names the chart's Gateway for a hostname placed on another
    attached to that one instead (its HTTPS and its plain-HTTP redirect alike: where the hostname's DNS points)."""
    placed = {str(r["metadata"]["name"]): gateway for r in held
              if (gateway := _annotation(r, GATEWAY_ANNOTATION)) and gateway != main}
    if not placed:
        return list(children)
    moved = []
    for child in children:
        spec = child.get("spec") or {}
        target = next((placed[host] for host in spec.get("hostnames") or [] if host in placed), None)
        if child.get("kind") != "HTTPRoute" or target is None:
            moved.append(child)
            continue
        refs = [{**ref, "name": target} if (ref.get("name"), ref.get("namespace")) == (main, namespace) else ref
                for ref in spec.get("parentRefs") or []]
        moved.append({**child, "spec": {**spec, "parentRefs": refs}})
    return moved
