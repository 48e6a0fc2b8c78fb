"""The Application controller (spec §4.5), the edge: reads the Application, its claims and MigrationPlans; asks
lifecycle.application what to apply and what the status says; applies, prunes, and writes status, plan phases
and events. Every decision is the core's (docs/development.md, "where each rule lives")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any

from compatibility.crd import MIGRATION_PLAN
from compatibility.gate import APPLIED, PlanPhase
from controller_runtime.compare import up_to_date
from controller_runtime.errors import KubeError
from controller_runtime.informer import Informer
from controller_runtime.kinds import KindLike, gvk_of
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key, controller_owners, itself
from controller_runtime.outcomes import Done, Outcome, Terminal
from lifecycle.application import (
    Desired,
    Refusal,
    apply_failed,
    assess,
    refused,
    settle,
    waiting_claims,
    waiting_note,
)
from lifecycle.children import prunable
from lifecycle.conditions import StatusUpdate
from lifecycle.drift import changed_by, drift_note
from lifecycle.notes import Note
from lifecycle.plans import APPLICATION_PLAN_LABELS, plans_of
from reconciler.plans import ensure as ensure_plans
from reconciler.plans import set_phase
from reconciler.status import record, write_status
from renderer.context import PlatformContext
from renderer.crds import APPLICATION
from renderer.manifests import KINDS
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL

__all__ = ["ApplicationController"]

log = logging.getLogger("apprafter.application")

MANAGED = {MANAGED_BY_LABEL: MANAGED_BY}


def plan_primaries(plan: Mapping[str, Any]) -> Iterable[Key]:
    """The Application a MigrationPlan belongs to: its controlling owner, else its labels."""
    found = list(controller_owners(APPLICATION)(plan))
    if found:
        return found
    meta = plan.get("metadata", {})
    name = (meta.get("labels") or {}).get(NAME_LABEL)
    return [(str(meta.get("namespace", "")), name)] if name else []


class ApplicationController:
    """Reconciles apprafter.io/v1alpha1 Applications into their children (see docs/operator.md)."""

    name = "application"
    primary: KindLike = APPLICATION
    namespaces: tuple[str, ...] = ()  # the operator's --namespace list

    def __init__(self, context: PlatformContext) -> None:
        self.context = context
        self.runtime: Runtime | None = None

    def watches(self) -> Sequence[Watch]:
        owners = controller_owners(APPLICATION)
        return [Watch(APPLICATION, {}, itself), Watch(MIGRATION_PLAN, APPLICATION_PLAN_LABELS, plan_primaries),
                *(Watch(kind, MANAGED, owners) for kind in KINDS)]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def cache(self, kind: KindLike) -> Informer:
        assert self.runtime is not None
        if (kind.api_version, kind.kind) == (APPLICATION.api_version, APPLICATION.kind):
            return self.runtime.informer(kind)
        labels = APPLICATION_PLAN_LABELS if kind.kind == MIGRATION_PLAN.kind else MANAGED
        return self.runtime.informer(kind, labels)

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        # The plans first, the Application after: an approval this pass sees is never newer than the spec it
        # is checked against. Plan phase writes carry the plans' resourceVersions (a 409 starts over).
        plans = [dict(p) for p in plans_of(self.cache(MIGRATION_PLAN).items(namespace), name)]
        app = await self.runtime.kube.get(APPLICATION, name, namespace)  # fresh: the gate's baseline
        if app is None or app["metadata"].get("deletionTimestamp"):
            self.cache(APPLICATION).forget(namespace, name)
            return Done()
        self.cache(APPLICATION).update(app)
        return await ApplicationPass(self, app, plans).run()


class ApplicationPass:
    """One reconcile of one Application: the core's decisions carried out against the cluster."""

    def __init__(self, controller: ApplicationController, app: dict[str, Any], plans: list[dict[str, Any]]) -> None:
        assert controller.runtime is not None
        self.controller = controller
        self.kube = controller.runtime.kube
        self.recorder = controller.runtime.recorder
        self.app = app
        self.plans = plans
        meta = app["metadata"]
        self.namespace, self.name = meta["namespace"], meta["name"]
        self.log = {"controller": "application", "namespace": self.namespace, "object": self.name}

    async def run(self) -> Outcome:
        # the render runs in a thread (never on the event loop every worker, watch and lease renewal shares),
        # through the runtime's CPU gate: a namespace's flood of heavy renders leaves a slot for another's
        assert self.controller.runtime is not None
        cpu = self.controller.runtime.cpu
        await cpu.acquire(self.namespace)
        try:
            desired = await asyncio.to_thread(assess, self.app, self.plans, self.controller.context,
                                              status_manager=self.kube.status_field_manager)
        finally:
            cpu.release(self.namespace)
        if isinstance(desired, Refusal):
            log.info("not applied", extra={**self.log, "reason": desired.reason, "detail": desired.message})
            await self.write_status(refused(self.app, desired))
            return Terminal(f"{desired.reason}: {desired.message}")
        live_plans = await self.ensure_plans(desired)
        try:
            await _all(self.ensure(claim) for claim in desired.claims)
            waiting = waiting_claims(desired.claims, {c["metadata"]["name"]: self.cached(c) or {}
                                                      for c in desired.claims})
            if not waiting:
                await _all(self.ensure(child) for child in desired.children)
                await self.prune(desired)
        except KubeError as e:
            with contextlib.suppress(KubeError):
                await self.write_status(apply_failed(self.app, str(e), e.retryable))
            raise
        settled = settle(self.app, desired, live_plans, waiting)
        for note in settled.notes:
            await self.record(note)
        await self.write_status(settled.status)
        if settled.consumed and settled.consumed in live_plans:
            await set_phase(self.kube, self.controller.cache(MIGRATION_PLAN), live_plans[settled.consumed],
                            PlanPhase(settled.consumed, APPLIED, "applied"), self.log)
            if settled.consumed_note is not None:
                await self.record(settled.consumed_note)
        return Done()

    def cached(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = obj["metadata"]
        return self.controller.cache(gvk_of(obj)).get(meta["namespace"], meta["name"])

    async def ensure_plans(self, desired: Desired) -> dict[str, dict[str, Any]]:
        """Ensure the plan a held change waits for, and move every plan to the phase the gate decided."""
        decision = desired.decision
        environment = self.app["spec"]["environment"]
        mine = {p["metadata"]["name"]: dict(p) for p in plans_of(self.plans, self.name, environment)}
        return await ensure_plans(self.kube, self.controller.cache(MIGRATION_PLAN), self.recorder, self.app, mine,
                                  decision.migration_plan, decision.phases, namespace=self.namespace,
                                  apply=self.ensure, created=lambda _: waiting_note(decision, self.namespace),
                                  log_fields=self.log)

    async def ensure(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply unless the live object already is what the apply would make it; a child another field
        manager changed is put back, with a DriftCorrected Event naming the fields and who changed them."""
        live = self.cached(obj)
        if live is not None and up_to_date(live, obj, self.kube.field_manager):
            return live
        drifts = changed_by(live, obj, self.kube.field_manager) if live is not None else []
        result = await self.kube.apply(obj)
        self.controller.cache(gvk_of(obj)).update(result)
        if live is not None and drifts:
            log.info("drift corrected", extra={**self.log, "kind": obj["kind"], "child": obj["metadata"]["name"],
                                               "fields": [d.field for d in drifts]})
            await self.record(drift_note(live, drifts))
        return result

    async def prune(self, desired: Desired) -> None:
        """Delete the children an earlier apply made that this render no longer has (lifecycle.children)."""
        uid, instance = self.app["metadata"]["uid"], f"{self.name}-{self.app['spec']['environment']}"
        for kind in KINDS:
            cache = self.controller.cache(kind)
            for obj in prunable(cache.owned_by(uid), desired.objects, self.namespace, instance):
                child = obj["metadata"]["name"]
                await self.kube.delete(kind, child, self.namespace)
                cache.forget(self.namespace, child)
                log.info("pruned", extra={**self.log, "kind": kind.kind, "child": child})

    async def record(self, note: Note) -> None:
        await record(self.recorder, self.app, note)

    async def write_status(self, update: StatusUpdate) -> None:
        # No resourceVersion precondition: every field states what this pass applied (observedGeneration says
        # for which generation); a spec edited meanwhile is the next pass's, and a re-stamp that failed on a
        # conflict after its children were applied would leave the baseline behind the cluster.
        before = self.app
        self.app = await write_status(self.kube, self.controller.cache(APPLICATION), self.app, update)
        if self.app is not before:
            log.info("status", extra={**self.log, "phase": (self.app.get("status") or {}).get("phase"),
                                      "generation": update.generation,
                                      "reason": update.conditions[0].reason if update.conditions else ""})


async def _all(calls: Iterable[Awaitable[Any]]) -> None:
    """Independent writes at the same time; the first failure is raised once all have finished."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
