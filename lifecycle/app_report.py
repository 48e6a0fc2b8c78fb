"""What `apprafter app status` says of one environment: Argo CD's sync and health, the Application's phase and
replicas, each claim's readiness, each hostname's certificate, the MigrationPlans waiting (with the command that
approves each) and the one line that says what is wrong, from the objects as the cluster holds them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from compatibility.authority import PENDING
from lifecycle.conditions import by_type, find_condition

__all__ = ["ClaimLine", "EnvReport", "HostLine", "PlanLine", "report"]

LINE = 240  # characters of a message shown in one line at most
# Argo CD wraps a plugin's failure in four layers of gRPC words; what the plugin said (one line per problem, file,
# line and field) follows the command's exit status.
_PLUGIN_SAID = re.compile(r"`apprafter cmp generate` failed exit status \d+: (.*)$", re.DOTALL)


class ClaimLine(NamedTuple):
    name: str
    type: str
    ready: bool
    why: str  # the condition that holds it back, empty when ready
    rotation: str = ""  # where a rotation of its password not completed yet stands (lifecycle.rotation), else empty


class HostLine(NamedTuple):
    hostname: str
    certificate: str  # Ready, or what cert-manager says ("" when the hostname has no certificate of its own)


class PlanLine(NamedTuple):
    name: str
    classification: str
    approve: str  # the command that approves it


class EnvReport(NamedTuple):
    """One environment as `app status` shows it (json: `as_json`)."""

    environment: str
    argocd_app: str
    namespace: str
    sync: str
    health: str
    revision: str
    phase: str
    replicas: str
    url: str
    claims: tuple[ClaimLine, ...]
    hostnames: tuple[HostLine, ...]
    plans: tuple[PlanLine, ...]
    problem: str

    def as_json(self) -> dict[str, Any]:
        out = self._asdict()
        out["claims"] = [c._asdict() for c in self.claims]
        out["hostnames"] = [h._asdict() for h in self.hostnames]
        out["plans"] = [p._asdict() for p in self.plans]
        return out


def _one_line(text: object) -> str:
    words = " ".join(str(text or "").split())
    return words if len(words) <= LINE else words[:LINE - 1] + "…"


def _status(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    status = (obj or {}).get("status")
    return status if isinstance(status, Mapping) else {}


def _claim(claim: Mapping[str, Any]) -> ClaimLine:
    status = _status(claim)
    ready = status.get("ready") is True
    why = ""
    if not ready:
        held = [c for c in by_type(status.get("conditions")).values() if c.get("status") != "True"]
        why = _one_line(f"{held[0].get('reason')}: {held[0].get('message')}") if held else "not provisioned yet"
    rotation = status.get("rotation")
    rotating = isinstance(rotation, Mapping) and rotation.get("requested") not in (None, rotation.get("completed"))
    return ClaimLine(str(claim["metadata"]["name"]), str((claim.get("spec") or {}).get("type", "")), ready, why,
                     _one_line(rotation.get("message")) if rotating and isinstance(rotation, Mapping) else "")


def _hosts(routes: Iterable[Mapping[str, Any]], certificates: Iterable[Mapping[str, Any]]) -> tuple[HostLine, ...]:
    """Every hostname the app's HTTPRoutes serve, with the state of the Certificate that names it."""
    issued: dict[str, str] = {}
    for cert in certificates:
        ready = find_condition(_status(cert).get("conditions"), "Ready")
        state = "Ready" if ready.get("status") == "True" else _one_line(
            f"not issued: {ready.get('reason') or 'Pending'}: {ready.get('message') or 'waiting for cert-manager'}")
        for name in (cert.get("spec") or {}).get("dnsNames") or ():
            issued[str(name)] = state
    names = sorted({str(h) for route in routes for h in (route.get("spec") or {}).get("hostnames") or ()})
    return tuple(HostLine(name, issued.get(name, "")) for name in names)


def _plans(plans: Iterable[Mapping[str, Any]], app: str, environment: str) -> tuple[PlanLine, ...]:
    """The application-scope plans of this app and environment that wait for approval, oldest first."""
    waiting = []
    for plan in plans:
        scope = ((plan.get("spec") or {}).get("scope") or {}).get("application") or {}
        if ((scope.get("ref") or {}).get("name") != app or scope.get("environment") != environment
                or (_status(plan).get("phase") or PENDING) != PENDING):
            continue
        meta = plan["metadata"]
        waiting.append((str(meta.get("creationTimestamp", "")), PlanLine(
            str(meta["name"]), str(((plan.get("spec") or {}).get("risks") or {}).get("classification", "")),
            f"apprafter migration approve {meta['name']} -n {meta['namespace']}")))
    return tuple(line for _, line in sorted(waiting))


def _problem(argocd: Mapping[str, Any] | None, application: Mapping[str, Any] | None,
             claims: Sequence[ClaimLine], namespace_missing: bool) -> str:
    """The first thing that keeps the environment from running, in the order a user fixes them: Argo CD cannot
    render or sync, the namespace is missing, the Application is refused or failing, a claim waits."""
    if argocd is None:
        return "no Argo CD Application: `apprafter app add` registers it"
    astatus = _status(argocd)
    for condition in astatus.get("conditions") or ():
        if isinstance(condition, Mapping) and str(condition.get("type", "")).endswith("Error"):
            message = str(condition.get("message") or "")
            said = _PLUGIN_SAID.search(message)
            if said:
                return _one_line(f"Argo CD cannot render it: {said.group(1)}")
            return _one_line(f"Argo CD: {condition.get('type')}: {message}")
    operation = astatus.get("operationState") or {}
    if operation.get("phase") in ("Failed", "Error"):
        return _one_line(f"Argo CD sync {operation['phase']}: {operation.get('message')}")
    if namespace_missing:
        return "the namespace does not exist: a platform administrator creates it (docs/user-guide.md)"
    if application is None:
        return "" if astatus.get("sync", {}).get("status") != "Synced" else "Argo CD synced but no Application exists"
    ready = find_condition(_status(application).get("conditions"), "Ready")
    if ready and ready.get("status") != "True" and _status(application).get("phase") in (
            "Failed", "AwaitingMigrationApproval", "Pending"):
        return _one_line(f"{ready.get('reason')}: {ready.get('message')}")
    waiting = [c for c in claims if not c.ready]
    if waiting:
        return _one_line(f"claim {waiting[0].name} not ready: {waiting[0].why}")
    if ready and ready.get("status") == "False":
        return _one_line(f"{ready.get('reason')}: {ready.get('message')}")
    return ""


def report(app: str, environment: str, namespace: str, argocd: Mapping[str, Any] | None,
           application: Mapping[str, Any] | None, claims: Iterable[Mapping[str, Any]],
           routes: Iterable[Mapping[str, Any]], certificates: Iterable[Mapping[str, Any]],
           plans: Iterable[Mapping[str, Any]], *, namespace_missing: bool = False) -> EnvReport:
    """The environment's report from what was read (None: that object does not exist)."""
    astatus, status = _status(argocd), _status(application)
    replicas = status.get("replicas") or {}
    claim_lines = tuple(sorted((_claim(c) for c in claims), key=lambda c: c.name))
    return EnvReport(
        environment, str((argocd or {}).get("metadata", {}).get("name", "")), namespace,
        str((astatus.get("sync") or {}).get("status") or "-"), str((astatus.get("health") or {}).get("status") or "-"),
        str((astatus.get("sync") or {}).get("revision") or "")[:12],
        str(status.get("phase") or "-"),
        f"{replicas.get('ready', 0)}/{replicas.get('desired', 0)}" if isinstance(replicas, Mapping) and replicas
        else "-",
        str(status.get("url") or ""), claim_lines, _hosts(routes, certificates), _plans(plans, app, environment),
        _problem(argocd, application, claim_lines, namespace_missing))
