"""A pg claim's point-in-time restore carried out (the decisions: lifecycle.restore): read what a step needs, fresh,
make its writes, move its plan to applied once it is done, again while the core asks."""

from __future__ import annotations

import datetime
import logging
import secrets
from collections.abc import Mapping
from typing import Any, NamedTuple

from compatibility.authority import PENDING, SUPERSEDED
from compatibility.crd import MIGRATION_PLAN
from compatibility.gate import PlanPhase
from controller_runtime.client import Kube
from controller_runtime.outcomes import Done, Requeue
from controller_runtime.writes import ensure
from lifecycle.backends.common import CLAIM_ANNOTATION, PROVIDER_LABEL
from lifecycle.backends.instance import SECRET
from lifecycle.backends.kept import judge, record_name, recorded_generation, with_generation
from lifecycle.backends.pg_backup import JOB
from lifecycle.backends.pg_cluster import CLUSTER, DATABASE, Shared, generation_of, tenant_of
from lifecycle.plans import phase_patch
from lifecycle.restore import (
    PLAN_LABELS,
    Request,
    Seen,
    in_flight,
    job_name,
    plan_name,
    recovered_name,
    requested,
    restoring,
    step,
    superseded,
)
from reconciler.claim_steps import PASSWORD_BYTES, write_all
from reconciler.kept_data import NAMESPACE
from toolchain.timestamps import time_now

__all__ = ["Restored", "carry", "plan_phase"]

log = logging.getLogger("apprafter.claims")

ROUNDS = 6  # steps in one pass at most (Secret, role, then the Cluster's and Database's writes)


class Restored(NamedTuple):
    """status.restore after the pass, the claim as the backend is to provision it (at the generation it is at now),
    and when to look again."""

    status: dict[str, Any]
    claim: dict[str, Any]
    retry: Requeue | Done


async def _seen(kube: Kube, claim: Mapping[str, Any], config: Shared, request: Request) -> Seen:
    new = tenant_of(claim, restoring(claim, request))
    where = config.namespace
    return Seen(await kube.get(CLUSTER, config.name, where),
                await kube.get(MIGRATION_PLAN, plan_name(claim, request), claim["metadata"]["namespace"]),
                await kube.get(CLUSTER, recovered_name(config, claim, request), where),
                await kube.get(JOB, job_name(claim, request), where),
                await kube.get(SECRET, new.object_name, where), await kube.get(DATABASE, new.object_name, where),
                secrets.token_urlsafe(PASSWORD_BYTES), datetime.datetime.now(datetime.UTC),
                tuple((await kube.list(CLUSTER, where, labels={PROVIDER_LABEL: config.provider}))[0]))


def _with(claim: Mapping[str, Any], restore: Mapping[str, Any]) -> dict[str, Any]:
    return {**claim, "status": {**(claim.get("status") or {}), "restore": dict(restore)}}


async def carry(kube: Kube, claim: Mapping[str, Any], config: Any) -> Restored | None:
    """The claim's restore request carried as far as it goes now (None: the claim has none, or its backend restores
    nothing: only a CloudNativePG provider's config is a `Shared`)."""
    if not isinstance(config, Shared):
        return None
    request = requested(claim)
    if request is None:
        return await _recorded(kube, claim, config)
    if not in_flight(claim):  # completed or failed: nothing to read for it again
        return Restored(dict((claim.get("status") or {}).get("restore") or {}), dict(claim), Done())
    meta = claim["metadata"]
    where = {"controller": "claims", "namespace": meta["namespace"], "object": meta["name"]}
    now = dict(claim)
    for _ in range(ROUNDS):
        seen = await _seen(kube, now, config, request)
        decided = step(now, config, request, seen)
        await write_all(kube, decided.writes, where)
        if decided.plan_phase:  # the plan as it is after the writes (one just opened: to pending-approval)
            plan = await kube.get(MIGRATION_PLAN, plan_name(now, request), meta["namespace"])
            if plan is not None:
                said = "awaiting approval" if decided.plan_phase == PENDING else f"applied: {decided.status['message']}"
                await plan_phase(kube, plan, PlanPhase(plan["metadata"]["name"], decided.plan_phase, said))
            if plan is not None and decided.plan_phase == PENDING:
                await _supersede(kube, now, plan["metadata"]["name"])
        now = _with(now, decided.status)
        if generation_of(now) > generation_of(claim):  # switched: said beside the data, which outlives the claim
            await _record(kube, now, config, generation_of(now))
        if not decided.again:
            if decided.status.get("phase") != (((claim.get("status") or {}).get("restore") or {}).get("phase")):
                log.info("restore", extra={**where, "reason": decided.status.get("phase")})
            return Restored(decided.status, now, decided.retry)
    return Restored(dict((now.get("status") or {}).get("restore") or {}), now, Requeue("restore in progress"))


async def _recorded(kube: Kube, claim: Mapping[str, Any], config: Shared) -> Restored | None:
    """A claim made again (its app removed and added) whose data a restore had moved past generation 1: the
    generation its kept-data record names (lifecycle.backends.kept), so it binds to the restored data; None when
    its status knows already, or nothing was restored."""
    if generation_of(claim) > 1:
        return None
    record = await kube.get(SECRET, record_name(claim), config.namespace)
    number = recorded_generation(record)
    if number == 1 or not judge(claim, await kube.get(NAMESPACE, claim["metadata"]["namespace"]), record,
                                config.namespace).ours:
        return None  # another namespace's data: the kept-data refusal says so, nothing of it is taken
    status = {"generation": number, "message": f"at generation {number} of its data, the one its last restore "
              "made (recorded beside the data: the claim was made again)"}
    return Restored(status, _with(claim, status), Done())


async def _record(kube: Kube, claim: Mapping[str, Any], config: Shared, generation: int) -> None:
    """The claim's kept-data record says its data is at `generation` now."""
    live = await kube.get(SECRET, record_name(claim), config.namespace)
    if live is not None and recorded_generation(live) != generation:
        await ensure(kube, None, with_generation(live, generation), live=live)


async def _supersede(kube: Kube, claim: Mapping[str, Any], current: str) -> None:
    """The plans of the claim's earlier requests still in play, superseded by the one just opened."""
    meta = claim["metadata"]
    labels = {**PLAN_LABELS, CLAIM_ANNOTATION: str(meta["name"])}
    found, _ = await kube.list(MIGRATION_PLAN, meta["namespace"], labels=labels)
    for name in superseded(found, claim, current):
        plan = next(p for p in found if p["metadata"]["name"] == name)
        await plan_phase(kube, plan, PlanPhase(name, SUPERSEDED, f"superseded by {current}: a later restore "
                                               "request", superseded_by=current))


async def plan_phase(kube: Kube, plan: Mapping[str, Any], phase: PlanPhase) -> None:
    """Move a plan of the claim's (a restore's, a kept generation's drop) to `phase`, unless it is there already."""
    patch = phase_patch(plan, phase, time_now())
    if patch is None:
        return
    meta = plan["metadata"]
    await kube.merge(MIGRATION_PLAN, meta["name"], meta["namespace"], {"status": patch},
                     resource_version=meta.get("resourceVersion"), status=True)
