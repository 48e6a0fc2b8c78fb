"""A kept generation's own approved removal (issue 42 item 1): which generation may go, the request, its MigrationPlan,
each step after approval, status.restore.drop and its Events. Pure.

A restore keeps the generation it switched away from (status.restore.kept, lifecycle.restore). A person of the app's
team asks for one kept generation to go by writing `apprafter.io/drop-generation: <request>@<N>` on the claim
(`apprafter db drop-generation`; who may: compatibility.authority.drop_generation_writer; which N: `refusal`, the one
rule the CLI, the webhook and the operator apply: a kept one, never the live one). The operator opens a
data-migration MigrationPlan naming the generation and does nothing else until a person approves it; then it drops
that generation's database and role through CloudNativePG with the same steps as a claim's data drop
(lifecycle.backends.pg's `drop_one`), and takes it off status.restore.kept. The live generation is never touched.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from compatibility.authority import (
    APPLIED,
    APPROVED,
    DROP_GENERATION_ANNOTATION,
    DROP_GENERATION_REQUEST,
    PENDING,
)
from compatibility.classes import DATA_MIGRATION
from controller_runtime.outcomes import Done, Requeue
from lifecycle.backends.contract import Apply, Gone, Read, Seen, Write
from lifecycle.backends.pg import CORE
from lifecycle.backends.pg_cluster import Shared, generation_of, generations, tenant_of
from lifecycle.claim_plans import claim_plan
from lifecycle.notes import Note
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL

__all__ = ["DROP_GENERATION_ANNOTATION", "PLAN_LABELS", "Request", "Step", "kept_generations", "notes", "plan_name",
           "plan_object", "reads", "refusal", "requested", "step"]

PLAN_LABELS: Mapping[str, str] = {MANAGED_BY_LABEL: MANAGED_BY, "apprafter.io/scope": "drop-generation"}
RULE = "AR-DM005"  # a kept generation's drop in its MigrationPlan (docs/platform-services.md)


class Request(NamedTuple):
    """A request to drop a kept generation: its id (a new one asks again) and the generation."""

    id: str
    generation: int


class Step(NamedTuple):
    """The writes of a step, status.restore after it, what to do meanwhile (Requeue: look again later; Done: a
    watched change wakes it), and the phase to move the plan to."""

    writes: tuple[Write, ...]
    status: dict[str, Any]
    retry: Requeue | Done = Done()
    plan_phase: str | None = None


def kept_generations(claim: Mapping[str, Any]) -> tuple[int, ...]:
    """The generations of the claim's data its restores kept (status.restore.kept names their databases), oldest
    first; never the live one."""
    kept = set(((claim.get("status") or {}).get("restore") or {}).get("kept") or [])
    live = generation_of(claim)
    return tuple(sorted(n for n in generations(claim) if n != live and tenant_of(claim, n).name in kept))


def refusal(claim: Mapping[str, Any], generation: int) -> str | None:
    """Why generation `generation` of the claim's data may not be dropped (None: it may): the live one (the app
    reads it) never; one its restores did not keep (never made, dropped already) has nothing to drop."""
    live, kept = generation_of(claim), kept_generations(claim)
    if generation == live:
        return (f"generation {generation} is the one the app uses (database {tenant_of(claim, live).name}): never "
                "dropped this way (a restore moves the app to another first)")
    if generation not in kept:
        said = ", ".join(map(str, kept)) if kept else "none"
        return f"generation {generation} is not kept (kept: {said}; `apprafter db backups` lists them)"
    return None


def requested(claim: Mapping[str, Any]) -> Request | None:
    """The claim's drop request: its annotation, when it has a request's form (the webhook refuses any other)."""
    value = ((claim.get("metadata") or {}).get("annotations") or {}).get(DROP_GENERATION_ANNOTATION)
    found = DROP_GENERATION_REQUEST.fullmatch(value) if isinstance(value, str) else None
    return Request(found["id"], int(found["generation"])) if found else None


def plan_name(claim: Mapping[str, Any], request: Request) -> str:
    """The request's MigrationPlan: `<claim>-drop-<N>-<hash10>` (one per request)."""
    meta = claim.get("metadata") or {}
    digest = hashlib.sha256(f"{meta.get('uid')}/{request.id}@{request.generation}".encode()).hexdigest()[:10]
    return f"{str(meta['name'])[:200]}-drop-{request.generation}-{digest}"


def plan_object(claim: Mapping[str, Any], config: Shared, request: Request) -> dict[str, Any]:
    """The data-migration MigrationPlan a person approves for the request, owned by the claim (it goes with it)."""
    meta = claim["metadata"]
    gone, live = tenant_of(claim, request.generation), tenant_of(claim, generation_of(claim))
    need = f"needs.{(claim.get('spec') or {}).get('type')}"
    where = f"Cluster {config.namespace}/{config.name}"
    change = {"rule": RULE, "type": "drop-generation", "field": need, "classification": DATA_MIGRATION,
              "reason": f"generation {request.generation}, kept by a restore, is dropped: its data is gone for good",
              "from": f"generation {request.generation}: database {gone.name} (kept)",
              "to": f"none; the app stays on generation {generation_of(claim)}: database {live.name}"}
    content = json.dumps([meta.get("uid"), request.id, request.generation], sort_keys=True)
    steps = [f"drop database {gone.name} on {where} (its Database ensure: absent; CloudNativePG runs DROP DATABASE)",
             f"drop role {gone.name} on {where}, then its Database resource and password Secret "
             f"{config.namespace}/{gone.object_name}",
             f"take {gone.name} off the claim's kept generations; database {live.name}, the app's, is not touched"]
    trigger = {"type": "drop-generation", "field": need, "from": request.generation}
    return claim_plan(claim, plan_name(claim, request), PLAN_LABELS, trigger, change, steps, content,
                      lambda _: False)


def reads(claim: Mapping[str, Any], config: Shared, request: Request) -> tuple[Read, ...]:
    """What the edge reads for a step after approval: the drop's (lifecycle.backends.pg's `drop_reads`)."""
    return CORE.drop_reads(claim, config, request.generation)


def _with(restore: Mapping[str, Any], drop: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    return {**restore, **more, "drop": dict(drop)}


def step(claim: Mapping[str, Any], config: Shared, request: Request, plan: Mapping[str, Any] | None,
         seen: Seen) -> Step:
    """The next step of the claim's latest drop request (`requested`), from its plan and what the edge read
    (`reads`): status.restore with its `drop` record (requested, generation, plan, phase, message, completed)."""
    restore = dict((claim.get("status") or {}).get("restore") or {})
    before = dict(restore.get("drop") or {})
    if before.get("completed") == request.id or (before.get("requested") == request.id
                                                 and before.get("phase") == "Failed"):
        return Step((), restore)
    name = plan_name(claim, request)
    record = {**{k: before[k] for k in ("completed",) if k in before}, "requested": request.id,
              "generation": request.generation, "plan": name}
    why = refusal(claim, request.generation)
    if why is not None:  # the webhook refused it as asked: the claim changed since (a restore, another drop)
        return Step((), _with(restore, {**record, "phase": "Failed", "message": f"nothing was dropped: {why}"}))
    phase = str(((plan or {}).get("status") or {}).get("phase") or "")
    if phase not in (APPROVED, APPLIED):
        if phase not in ("", PENDING):
            return Step((), _with(restore, {**record, "phase": "Failed",
                                            "message": f"MigrationPlan {name} is {phase}: nothing was dropped"}))
        said = (f"MigrationPlan {name} awaits approval (`apprafter migration approve {name} -n "
                f"{claim['metadata']['namespace']}`): nothing happens before it")
        opened = () if plan is not None else (Apply(plan_object(claim, config, request)),)
        return Step(opened, _with(restore, {**record, "phase": "AwaitingApproval", "message": said}),
                    plan_phase=PENDING if phase == "" else None)
    gone = tenant_of(claim, request.generation)
    roles = CORE.generation_roles(claim, request.generation)
    for role in roles:  # as the claim's data drop walks them (CloudNativePG.drop)
        dropped = CORE.drop_one(config, seen, role)
        if not isinstance(dropped.then, Gone):
            message = getattr(dropped.then, "message", "dropping")
            retry = getattr(dropped.then, "retry", Requeue(message))
            return Step(tuple(dropped.writes), _with(restore, {**record, "phase": "Dropping", "message": message}),
                        retry)
        if dropped.writes and role != roles[-1]:
            said = f"role {role.name} and its data dropped"
            return Step(tuple(dropped.writes), _with(restore, {**record, "phase": "Dropping", "message": said}),
                        Requeue(said))
    kept = sorted(set(restore.get("kept") or []) - {gone.name})
    said = (f"generation {request.generation} (database and role {gone.name}) dropped; the app stays on database "
            f"{tenant_of(claim).name}")
    return Step(tuple(dropped.writes), _with(restore, {**record, "completed": request.id, "phase": "Dropped",
                                                       "message": said}, kept=kept), plan_phase=APPLIED)


def notes(claim: Mapping[str, Any], before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Note]:
    """The Events a status.restore.drop change asks for, each once per request: GenerationDropRequested (its plan
    opened), GenerationDropping, GenerationDropped, GenerationDropFailed."""
    was_record = (before or {}).get("drop") or {}
    now_record = (after or {}).get("drop") or {}
    asked = now_record.get("requested")
    if not asked:
        return []
    was = was_record.get("phase") if was_record.get("requested") == asked else None
    now = now_record.get("phase")
    reasons = {"AwaitingApproval": "GenerationDropRequested", "Dropping": "GenerationDropping",
               "Dropped": "GenerationDropped", "Failed": "GenerationDropFailed"}
    if now == was or now not in reasons:
        return []
    uid = (claim.get("metadata") or {}).get("uid")
    return [Note(reasons[str(now)], f"drop of generation {now_record.get('generation')} ({asked}): "
                 f"{now_record.get('message')}", f"{uid}/drop/{asked}/{now}", "Warning" if now == "Failed" else
                 "Normal")]
