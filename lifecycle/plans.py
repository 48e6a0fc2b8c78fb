"""MigrationPlans as the controllers handle them: which objects are an Application environment's plans or a
SourceCredential's, and the status write that moves a plan to the phase the gate decided."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from compatibility.gate import APPLIED, PlanPhase
from compatibility.migrationplan import CREDENTIAL_LABEL
from renderer.names import ENVIRONMENT_LABEL, MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL

__all__ = ["APPLICATION_PLAN_LABELS", "CREDENTIAL_PLAN_LABELS", "PLAN_INDEX", "PLATFORM_PLAN_LABELS", "credential_of",
           "phase_patch", "plan_key", "plans_of"]

APPLICATION_PLAN_LABELS = {MANAGED_BY_LABEL: MANAGED_BY, "apprafter.io/scope": "application"}
PLATFORM_PLAN_LABELS = {MANAGED_BY_LABEL: MANAGED_BY, "apprafter.io/scope": "platform"}
CREDENTIAL_PLAN_LABELS = {MANAGED_BY_LABEL: MANAGED_BY, "apprafter.io/scope": "credential"}


def plans_of(plans: Iterable[Mapping[str, Any]], app: str, environment: str | None = None) -> list[Mapping[str, Any]]:
    """The application-scope plans of one Application (and environment), by the labels the operator writes."""
    out = []
    for plan in plans:
        labels = plan.get("metadata", {}).get("labels") or {}
        if labels.get(NAME_LABEL) == app and (environment is None or labels.get(ENVIRONMENT_LABEL) == environment):
            out.append(plan)
    return out


PLAN_INDEX = "application-plan"  # the application-scope plans by their Application: `namespace/name`


def plan_key(plan: Mapping[str, Any]) -> str | None:
    """An application-scope plan's Application, as `namespace/name` (by the label the operator writes), else None."""
    meta = plan.get("metadata", {})
    app = (meta.get("labels") or {}).get(NAME_LABEL)
    return f"{meta.get('namespace', '')}/{app}" if app else None


def credential_of(plan: Mapping[str, Any]) -> str | None:
    """The SourceCredential a credential-scope plan is about, by the label the operator writes (None: none)."""
    name = (plan.get("metadata", {}).get("labels") or {}).get(CREDENTIAL_LABEL)
    return str(name) if name else None


def phase_patch(plan: Mapping[str, Any], phase: PlanPhase, timestamp: str) -> dict[str, Any] | None:
    """The status merge patch that puts `plan` in `phase` (with its message), or None when it already is."""
    status = plan.get("status") or {}
    patch: dict[str, Any] = {"phase": phase.phase, "message": phase.message, "supersededBy": phase.superseded_by}
    if phase.phase == APPLIED:
        patch["appliedAt"] = status.get("appliedAt") or timestamp
    if all(status.get(k) == v for k, v in patch.items()):
        return None
    return patch
