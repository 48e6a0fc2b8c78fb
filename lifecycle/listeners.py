"""The public Gateway's per-hostname HTTPS listeners: one per hostname an Application holds and routes with TLS, each
serving that app's own certificate to that app's namespace's routes alone (docs/application.md "Public TLS")."""

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

__all__ = ["FIELD_MANAGER", "GATEWAY", "GATEWAY_FULL", "LISTENER_ANNOTATION", "MAX_LISTENERS", "NAMESPACE_FULL",
           "Wanted", "apply_object", "full", "issued", "listener", "mark_object", "marks", "ours", "wanted"]

GATEWAY = Kind("gateway.networking.k8s.io/v1", "Gateway", "gateways")
# The operator's own field manager on the Gateway: Argo CD (which syncs the gateway chart) ignores the fields it
# owns, server-side apply merges its listeners with the chart's by name, and an apply of the whole set removes the
# ones it no longer lists.
FIELD_MANAGER = LISTENERS_FIELD_MANAGER
MAX_LISTENERS = 64  # the Gateway API CRD's maxItems on spec.listeners
HTTPS_PORT = 443
# On a PublicHostname record, written by the listeners' field manager: whether its hostname has its listener
# (`listening`), is left without one because the Gateway is full (`gateway-full`: its app says ListenerUnavailable),
# or is not due one yet (`waiting`: no TLS route of its holder, or no certificate issued yet).
LISTENER_ANNOTATION = "apprafter.io/listener"
LISTENING, GATEWAY_FULL, WAITING = "listening", "gateway-full", "waiting"
NAMESPACE_FULL = "namespace-full"  # left out: its namespace holds its share of the Gateway's listeners already


class Wanted(NamedTuple):
    """The listeners to own (oldest holding first), the hostnames left without one because the Gateway is full, and
    those left without one because their namespace has its share."""

    listeners: tuple[dict[str, Any], ...]
    left_out: tuple[str, ...]
    over_share: tuple[str, ...] = ()


def _made_by(route: Mapping[str, Any], app: str) -> bool:
    """Whether the Application `app` controls the route (the operator made it from that app's render)."""
    group = APPLICATION.api_version.split("/")[0] + "/"
    return any(ref.get("controller") and ref.get("kind") == APPLICATION.kind and ref.get("name") == app
               and str(ref.get("apiVersion", "")).startswith(group)
               for ref in (route.get("metadata") or {}).get("ownerReferences") or [])


def _routes_tls(route: Mapping[str, Any], host: str, gateway: tuple[str, str]) -> bool:
    """Whether `route` serves `host` with TLS on this Gateway: it names the hostname's listener."""
    spec = route.get("spec") or {}
    if host not in (spec.get("hostnames") or []):
        return False
    return any((ref.get("name"), ref.get("namespace")) == gateway and ref.get("sectionName") == tls_listener(host)
               for ref in spec.get("parentRefs") or [])


def listener(host: str, namespace: str, app: str, environment: str) -> dict[str, Any]:
    """HTTPS on 443 for `host` alone, terminated with the app's certificate Secret (its ReferenceGrant lets the
    Gateway read it), taking routes from the app's namespace only: no other tenant attaches to it."""
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


def wanted(records: Iterable[Mapping[str, Any]], routes: Iterable[Mapping[str, Any]],
           certificates: Iterable[Mapping[str, Any]], gateway: tuple[str, str], room: int,
           share: int | None = None, listening: Iterable[str] = ()) -> Wanted:
    """A listener for each PublicHostname whose holder's own route (the HTTPRoute named by the app, in its namespace,
    made by its Application) names the hostname's listener on `gateway` (name, namespace), once the app's certificate
    was issued; at most `room` in all, the oldest holdings first, so a new app never takes an older one's listener;
    and no new one past `share` in a namespace, so one namespace never takes every other's (the hostnames already
    `listening` keep theirs: a lower share never takes a serving app off the Gateway)."""
    kept_on = set(listening)
    by_key = {(r["metadata"].get("namespace"), r["metadata"]["name"]): r for r in routes}
    certified = {(c["metadata"].get("namespace"), c["metadata"]["name"]): c for c in certificates}
    found: list[tuple[str, str, str, dict[str, Any]]] = []
    for record in records:
        host = str(record["metadata"]["name"])
        namespace, app, environment = holder(record)
        route = by_key.get((namespace, app))
        if route is None or not _made_by(route, app) or not _routes_tls(route, host, gateway):
            continue
        if not issued(certified.get((namespace, app)), tls_secret_name(app, environment)):
            continue
        created = str(record["metadata"].get("creationTimestamp") or "")
        found.append((created, host, namespace, listener(host, namespace, app, environment)))
    found.sort(key=lambda item: (item[0], item[1]))
    taken: dict[str, int] = {}
    within: list[tuple[str, str, str, dict[str, Any]]] = []
    over_share: list[str] = []
    for item in found:
        if share is not None and taken.get(item[2], 0) >= share and item[1] not in kept_on:
            over_share.append(item[1])
            continue
        taken[item[2]] = taken.get(item[2], 0) + 1
        within.append(item)
    kept = sorted(within[:max(room, 0)], key=lambda item: item[1])
    return Wanted(tuple(item[3] for item in kept), tuple(sorted(item[1] for item in within[max(room, 0):])),
                  tuple(sorted(over_share)))


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
    """What the operator applies: the Gateway's identity and its own listeners, nothing else."""
    meta = gateway["metadata"]
    return {"apiVersion": GATEWAY.api_version, "kind": GATEWAY.kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "spec": {"listeners": [dict(item) for item in listeners]}}


def _mark_of(record: Mapping[str, Any]) -> str | None:
    return ((record.get("metadata") or {}).get("annotations") or {}).get(LISTENER_ANNOTATION)


def marks(records: Iterable[Mapping[str, Any]], decided: Wanted) -> dict[str, str]:
    """The records (by hostname) whose listener mark must change to say what `decided` gives their hostname."""
    served = {str(item["hostname"]) for item in decided.listeners}
    left_out, over_share = set(decided.left_out), set(decided.over_share)
    changed = {}
    for record in records:
        host = str(record["metadata"]["name"])
        mark = (LISTENING if host in served else GATEWAY_FULL if host in left_out
                else NAMESPACE_FULL if host in over_share else WAITING)
        if _mark_of(record) != mark:
            changed[host] = mark
    return dict(sorted(changed.items()))


def mark_object(record: Mapping[str, Any], mark: str) -> dict[str, Any]:
    """What the listeners' field manager applies to a record: its mark alone."""
    meta = record["metadata"]
    return {"apiVersion": PUBLIC_HOSTNAME.api_version, "kind": PUBLIC_HOSTNAME.kind,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "annotations": {LISTENER_ANNOTATION: mark}}}


def full(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The hostnames, of the given records, left without a listener (the Gateway full, or their namespace's share
    taken), with their mark, sorted."""
    return {str(r["metadata"]["name"]): str(_mark_of(r)) for r in sorted(records, key=lambda r: r["metadata"]["name"])
            if _mark_of(r) in (GATEWAY_FULL, NAMESPACE_FULL)}
