"""A kept generation's drop carried out (the decisions: lifecycle.generation_drop): read what a step needs, fresh, make
its writes, move its plan to pending-approval once opened and to applied once done."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from compatibility.authority import PENDING
from compatibility.crd import MIGRATION_PLAN
from compatibility.gate import PlanPhase
from controller_runtime.client import Kube
from controller_runtime.outcomes import Done, Requeue
from lifecycle.backends.contract import Seen
from lifecycle.backends.pg_cluster import Shared
from lifecycle.generation_drop import plan_name, reads, requested, step
from reconciler.claim_steps import write_all
from reconciler.restore import plan_phase

__all__ = ["Dropped", "carry"]

ROUNDS = 4  # steps in one pass at most (each waits on CloudNativePG's word; on the API tier they follow at once)


class Dropped(NamedTuple):
    """status.restore after the pass (its `drop` record), and when to look again."""

    status: dict[str, Any]
    retry: Requeue | Done


async def carry(kube: Kube, claim: Mapping[str, Any], config: Any) -> Dropped | None:
    """The claim's drop request carried as far as it goes now (None: the claim has none, or its backend has no
    generations: only a CloudNativePG provider's config is a `Shared`)."""
    request = requested(claim)
    if request is None or not isinstance(config, Shared):
        return None
    meta = claim["metadata"]
    where = {"controller": "claims", "namespace": meta["namespace"], "object": meta["name"]}
    now, decided = dict(claim), None
    for _ in range(ROUNDS):
        plan = await kube.get(MIGRATION_PLAN, plan_name(now, request), meta["namespace"])
        objects = {read: await kube.get(read.kind, str(read.name), read.namespace)
                   for read in reads(now, config, request)}
        decided = step(now, config, request, plan, Seen(objects, None, "", time.time()))
        await write_all(kube, decided.writes, where)
        if decided.plan_phase:  # the plan as it is after the writes (one just opened: to pending-approval)
            plan = await kube.get(MIGRATION_PLAN, plan_name(now, request), meta["namespace"])
            if plan is not None:
                said = "awaiting approval" if decided.plan_phase == PENDING else \
                    f"applied: {decided.status['drop']['message']}"
                await plan_phase(kube, plan, PlanPhase(plan["metadata"]["name"], decided.plan_phase, said))
        now = {**now, "status": {**(now.get("status") or {}), "restore": decided.status}}
        if not decided.writes:
            break
    assert decided is not None
    return Dropped(decided.status, decided.retry)
