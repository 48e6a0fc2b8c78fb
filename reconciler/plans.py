"""MigrationPlans written the way a gate decided, for every controller: the plan a held change waits for (deleted
and created anew when its spec or phase cannot be turned back), and each plan moved to its phase; both with the
plan's resourceVersion as a precondition (an approval landing meanwhile makes the write fail and the pass start
over)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from compatibility.crd import MIGRATION_PLAN
from compatibility.gate import PlanPhase
from controller_runtime.client import CHANGED, Kube
from controller_runtime.errors import KubeError
from controller_runtime.events import Recorder
from controller_runtime.informer import Informer
from controller_runtime.writes import delete_exactly
from lifecycle.plans import phase_patch
from toolchain.timestamps import time_now

__all__ = ["ensure", "set_phase"]

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
                if await delete_exactly(kube, cache, old, unchanged=True) == CHANGED:  # the plan the gate judged
                    raise KubeError(f"MigrationPlan {namespace}/{phase.name} changed since it was read: looked at "
                                    "again", 409)
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
    """The plan with status.phase (and its message) as decided (lifecycle.plans.phase_patch); nothing is written
    when it already is."""
    patch = phase_patch(plan, phase, time_now())
    if patch is None:
        return plan
    meta = plan["metadata"]
    updated = await kube.merge(MIGRATION_PLAN, meta["name"], meta["namespace"], {"status": patch},
                               resource_version=meta.get("resourceVersion"), status=True)
    cache.update(updated)
    log.info("MigrationPlan phase", extra={**log_fields, "plan": meta["name"], "phase": phase.phase,
                                           "reason": phase.message})
    return updated
