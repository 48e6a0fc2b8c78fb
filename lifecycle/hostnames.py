"""Who holds a public hostname (and its Certificate): the first deployment that asked, recorded as a PublicHostname
named by the hostname in the operator's namespace (the API server lets only one create it). A holder keeps it while
its Application or its ApplicationBaseline exists (a deployment outlives its object: lifecycle.baseline); a record
whose holder has neither is stale and goes to the next asker. A hostname an HTTPRoute no Application made serves
already is held by that route."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from lifecycle.baseline import identity
from lifecycle.crd import PUBLIC_HOSTNAME
from lifecycle.ownership import owner_of
from renderer.crds import APPLICATION

__all__ = ["FOREIGN_ROUTE_INDEX", "HOLDER_INDEX", "Holding", "foreign_route_hostnames", "holder", "holder_key",
           "holding", "hostnames", "record", "records_key", "released", "served_by"]

Identity = tuple[str, str, str]  # (namespace, app, environment)
HOLDER_INDEX = "holder"  # the records' cache index of holder_key


class Holding(NamedTuple):
    """A hostname is this deployment's (mine), free to take over (stale), or another's (taken: `by` says whose)."""

    verdict: Literal["mine", "stale", "taken"]
    by: str = ""


def hostnames(children: Iterable[Mapping[str, Any]]) -> list[str]:
    """The public hostnames a render routes or certifies (HTTPRoute hostnames, Certificate dnsNames), sorted."""
    out: set[str] = set()
    for child in children:
        spec = child.get("spec") or {}
        if child["kind"] == "HTTPRoute":
            out.update(spec.get("hostnames") or [])
        elif child["kind"] == "Certificate":
            out.update(spec.get("dnsNames") or [])
    return sorted(out)


def record(hostname: str, app: Mapping[str, Any], records_namespace: str) -> dict[str, Any]:
    """The PublicHostname that says `app`'s deployment holds `hostname`."""
    namespace, name, environment = identity(app)
    return {"apiVersion": PUBLIC_HOSTNAME.api_version, "kind": PUBLIC_HOSTNAME.kind,
            "metadata": {"name": hostname, "namespace": records_namespace},
            "spec": {"hostname": hostname, "holder": {"namespace": namespace, "name": name,
                                                      "environment": environment, "uid": app["metadata"]["uid"]}}}


def holder(obj: Mapping[str, Any]) -> Identity:
    found = (obj.get("spec") or {}).get("holder") or {}
    return str(found.get("namespace")), str(found.get("name")), str(found.get("environment"))


def holder_key(record: Mapping[str, Any]) -> str:
    """The record's holder as one string (the cache's index: a deployment finds its own records directly)."""
    return "/".join(holder(record))


def records_key(app: Mapping[str, Any]) -> str:
    """The holder_key of the records this Application's deployment holds."""
    return "/".join(identity(app))


def holding(obj: Mapping[str, Any], app: Mapping[str, Any], *, holder_exists: bool, holder_remembered: bool) -> Holding:
    """Whose a recorded hostname is for `app`: `holder_exists` says the holder's Application is in the cluster (with
    the holder's environment), `holder_remembered` that its ApplicationBaseline is."""
    held = holder(obj)
    if held == identity(app):
        return Holding("mine")
    if holder_exists or holder_remembered:
        namespace, name, environment = held
        return Holding("taken", f"Application {namespace}/{name} (environment {environment})")
    return Holding("stale")


def released(records: Iterable[Mapping[str, Any]], app: Mapping[str, Any], wanted: Iterable[str]) -> list[str]:
    """The hostnames this deployment holds that its applied render no longer has: given back."""
    keep, mine = set(wanted), identity(app)
    return sorted(str(r["metadata"]["name"]) for r in records
                  if holder(r) == mine and r["metadata"]["name"] not in keep)


def _an_applications(obj: Mapping[str, Any]) -> bool:
    """Whether an Application controls `obj` (one of the operator's children)."""
    group = APPLICATION.api_version.split("/")[0] + "/"
    return any(ref.get("controller") and ref.get("kind") == APPLICATION.kind
               and str(ref.get("apiVersion", "")).startswith(group)
               for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


FOREIGN_ROUTE_INDEX = "foreign-route-hostname"  # the HTTPRoutes no Application made, by each hostname they serve


def foreign_route_hostnames(route: Mapping[str, Any]) -> tuple[str, ...]:
    """The hostnames an HTTPRoute no Application made serves (none for one of ours): `served_by` needs only those
    routes of a hostname, not the cluster's every route (a pass taking a hostname read them all: O(N) each)."""
    if _an_applications(route):
        return ()
    return tuple(str(h) for h in (route.get("spec") or {}).get("hostnames") or [] if isinstance(h, str))


def served_by(hostname: str, routes: Iterable[Mapping[str, Any]]) -> str:
    """The HTTPRoute no Application made that serves `hostname` already (by that exact name), in words, else "": the
    platform's own routes (Argo CD's, Grafana's) and anyone else's hold their hostnames as a record would (an
    Application's route is held by its record, and goes with its Application)."""
    for route in routes:
        if hostname in ((route.get("spec") or {}).get("hostnames") or []) and not _an_applications(route):
            meta = route["metadata"]
            return f"HTTPRoute {meta.get('namespace')}/{meta['name']} ({owner_of(route)})"
    return ""
