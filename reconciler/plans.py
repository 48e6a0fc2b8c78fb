"""MigrationPlans moved the way a gate decided, for either controller: the plan a held change waits for (deleted
and created anew when its spec or phase cannot be turned back), and each plan set to its phase with the plan's
resourceVersion as a precondition (an approval landing meanwhile makes the write fail and the pass start over)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from compatibility.gate import APPLIED, PlanPhase
from reconciler.conditions import now
from reconciler.events import Recorder
from reconciler.informer import Informer
from reconciler.kube import MIGRATION_PLAN_KIND, Kube

log = logging.getLogger("apprafter.plans")


async def ensure(kube: Kube, cache: Informer, recorder: Recorder, regarding: Mapping[str, Any],
                 live: dict[str, dict[str, Any]], plan: Mapping[str, Any] | None, phases: Iterable[PlanPhase], *,
                 namespace: str, apply: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
                 created: Callable[[str], str], log_fields: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """`live` (name -> plan) after ensuring `plan` (with `apply`, which writes only what changed) and moving every
    plan to its phase; Events on `regarding` for a plan created (`created(name)` is the note) or made anew."""
    phases = list(phases)
    if plan is not None:
        for phase in phases:
            if phase.recreate and phase.name in live:  # a plan's spec and phase cannot be turned back
                old = live.pop(phase.name)
                await kube.delete(MIGRATION_PLAN_KIND, phase.name, namespace)
                cache.forget(namespace, phase.name)
                await recorder.event(regarding, "MigrationPlanRecreated", f"MigrationPlan {phase.name} (phase "
                                     f"{(old.get('status') or {}).get('phase') or 'none'}) was deleted and created "
                                     f"anew: {phase.message}", old["metadata"].get("uid", phase.name),
                                     type_="Warning")
        name = plan["metadata"]["name"]
        new = name not in live
        live[name] = await apply(dict(plan))
        if new:
            await recorder.event(regarding, "MigrationPlanCreated", created(name), name, type_="Warning")
    for phase in phases:
        if phase.name in live:
            live[phase.name] = await set_phase(kube, cache, live[phase.name], phase, log_fields)
    return live


async def set_phase(kube: Kube, cache: Informer, plan: dict[str, Any], phase: PlanPhase,
                    log_fields: Mapping[str, Any]) -> dict[str, Any]:
    """The plan with status.phase (and its message) as decided; nothing is written when it already is."""
    status = plan.get("status") or {}
    patch: dict[str, Any] = {"phase": phase.phase, "message": phase.message, "supersededBy": phase.superseded_by}
    if phase.phase == APPLIED:
        patch["appliedAt"] = status.get("appliedAt") or now()
    if all(status.get(k) == v for k, v in patch.items()):
        return plan
    meta = plan["metadata"]
    updated = await kube.merge_status(MIGRATION_PLAN_KIND, meta["name"], meta["namespace"], patch,
                                      resource_version=meta.get("resourceVersion"))
    cache.update(updated)
    log.info("MigrationPlan phase", extra={**log_fields, "plan": meta["name"], "phase": phase.phase,
                                           "reason": phase.message})
    return updated
