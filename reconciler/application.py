"""The Application reconciler (spec §4.5): read the Application, its claims and MigrationPlans; ask the renderer
for the children and the gate for what may apply; apply, prune, and write status, plan phases and events."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any

from compatibility.application import Deployment
from compatibility.gate import APPLIED, PENDING, REJECTED, Decision, ExistingPlan, PlanPhase, decide
from compatibility.inputs import load_document
from compatibility.plan import canonical
from compatibility.shape import Unreadable
from compatibility.sides import side
from reconciler.compare import foreign_writers, status_up_to_date, up_to_date
from reconciler.conditions import Condition, now, render
from reconciler.conditions import Status as ConditionStatus
from reconciler.informer import Informer, Key, controller_uid, key_of
from reconciler.kube import APPLICATION_KIND, MIGRATION_PLAN_KIND, KubeError, kind_of
from reconciler.loop import Runtime, Watch, controller_owners, itself
from reconciler.plans import ensure as ensure_plans
from reconciler.plans import set_phase
from renderer.context import PlatformContext
from renderer.effective import spec_for
from renderer.errors import Problem, UserError
from renderer.load import LoadedApp
from renderer.manifests import CLAIM, KINDS
from renderer.names import ENVIRONMENT_LABEL, INSTANCE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL
from renderer.render import render_loaded

log = logging.getLogger("apprafter.application")

MANAGED = {MANAGED_BY_LABEL: MANAGED_BY}
PLAN_LABELS = {**MANAGED, "apprafter.io/scope": "application"}

READY, CLAIMS_READY, MIGRATION_APPROVED = "Ready", "ClaimsReady", "MigrationApproved"


class Stop(Exception):
    """The Application cannot go further now; its status says why (not an operator error)."""


def read_application(obj: Mapping[str, Any]) -> LoadedApp:
    """The Application as `apprafter plan` reads a CR file (and the webhook an object): the CUE-generated schema,
    then the renderer's rules (compatibility.sides.side)."""
    meta = obj.get("metadata", {})
    doc = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
           "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta},
           "spec": obj.get("spec")}
    return load_document(doc, f"Application {meta.get('namespace')}/{meta.get('name')}")


def describe(problems: Iterable[Problem]) -> str:
    """Problems as `field: message`, joined (positions point into a JSON dump of the CR: left out)."""
    return "; ".join(f"{p.field}: {p.message}" if p.field else p.message for p in problems)


def plan_primaries(plan: Mapping[str, Any]) -> Iterable[Key]:
    """The Application a MigrationPlan belongs to: its controlling owner, else its labels."""
    found = list(controller_owners(APPLICATION_KIND)(plan))
    if found:
        return found
    meta = plan.get("metadata", {})
    name = (meta.get("labels") or {}).get(NAME_LABEL)
    return [(str(meta.get("namespace", "")), name)] if name else []


class ApplicationController:
    """Reconciles apprafter.io/v1alpha1 Applications into their children (see docs/operator.md)."""

    name = "application"
    primary = APPLICATION_KIND
    namespaces: tuple[str, ...] = ()  # the operator's --namespace list

    def __init__(self, context: PlatformContext) -> None:
        self.context = context
        self.runtime: Runtime | None = None

    def watches(self) -> Sequence[Watch]:
        owners = controller_owners(APPLICATION_KIND)
        return [Watch(APPLICATION_KIND, {}, itself), Watch(MIGRATION_PLAN_KIND, PLAN_LABELS, plan_primaries),
                *(Watch(kind, MANAGED, owners) for kind in KINDS)]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def cache(self, obj_or_kind: Any) -> Informer:
        assert self.runtime is not None
        kind = kind_of(obj_or_kind) if isinstance(obj_or_kind, Mapping) else obj_or_kind
        if kind == APPLICATION_KIND:
            return self.runtime.informer(kind)
        return self.runtime.informer(kind, PLAN_LABELS if kind == MIGRATION_PLAN_KIND else MANAGED)

    async def reconcile(self, namespace: str, name: str) -> float | None:
        assert self.runtime is not None
        # The plans first, the Application after: an approval this pass sees is never newer than the spec it
        # is checked against. Plan phase writes carry the plans' resourceVersions (a 409 starts over).
        plans = [p for p in self.cache(MIGRATION_PLAN_KIND).items(namespace)
                 if (p["metadata"].get("labels") or {}).get(NAME_LABEL) == name]
        app = await self.runtime.kube.get(APPLICATION_KIND, name, namespace)  # fresh: the gate's baseline
        if app is None or app["metadata"].get("deletionTimestamp"):
            self.cache(APPLICATION_KIND).forget(namespace, name)
            return None
        self.cache(APPLICATION_KIND).update(app)
        await _Pass(self, app, plans).run()
        return None


class _Pass:
    """One reconcile of one Application."""

    def __init__(self, controller: ApplicationController, app: dict[str, Any], plans: list[dict[str, Any]]) -> None:
        assert controller.runtime is not None
        self.c = controller
        self.plans = plans
        self.kube = controller.runtime.kube
        self.recorder = controller.runtime.recorder
        self.app = app
        meta = app["metadata"]
        self.namespace, self.name, self.uid = meta["namespace"], meta["name"], meta["uid"]
        self.generation = int(meta.get("generation") or 0)
        self.status: dict[str, Any] = dict(app.get("status") or {})
        self.environment = str((app.get("spec") or {}).get("environment") or "")
        self.log = {"controller": "application", "namespace": self.namespace, "object": self.name}

    # --- the pass ----------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._run()
        except Stop:
            return

    async def _run(self) -> None:
        loaded, desired = await self._desired()
        decision = await self._decide(desired)
        objects, warnings = await self._render(loaded, decision)
        plans = await self._plans(decision)
        claims = [o for o in objects if o["kind"] == CLAIM.kind]
        await _all(self._ensure(claim) for claim in claims)
        waiting = [c["metadata"]["name"] for c in claims if not self._claim_ready(c)]
        if not waiting:
            await _all(self._ensure(obj) for obj in objects if obj["kind"] != CLAIM.kind)
            await self._prune(objects)
        await self._finish(decision, plans, claims, waiting, len(objects), warnings)

    async def _desired(self) -> tuple[LoadedApp, Deployment]:
        try:
            if not self.environment:
                raise UserError([Problem("", 0, 0, "spec.environment", "required: the plugin stamps the "
                                         "environment this Application deploys")])
            loaded = read_application(self.app)
            desired = side(loaded, self.environment, required=True)
        except UserError as e:
            await self._fail("InvalidSpec", describe(e.problems))
            raise Stop from None
        assert desired is not None
        return loaded, desired

    async def _decide(self, desired: Deployment) -> Decision:
        baseline = self.status.get("lastAppliedSpec")
        if baseline is not None and not isinstance(baseline, Mapping):
            await self._fail("InvalidStatus", "status.lastAppliedSpec: not a mapping (fail closed: nothing applied)")
            raise Stop
        foreign = foreign_writers(self.app, "lastAppliedSpec", self.kube.status_field_manager)
        if baseline is not None and foreign:
            await self._fail("InvalidStatus", f"status.lastAppliedSpec was written by {', '.join(foreign)}, not by "
                             "the operator: it is not trusted as the gate's baseline (nothing applied)")
            raise Stop
        plans = [ExistingPlan(p["metadata"]["name"], (p.get("spec") or {}).get("trigger", {}).get("approvedSpecHash")
                              or None, str((p.get("status") or {}).get("phase") or ""), controller_uid(p))
                 for p in self._my_plans()]
        try:
            return decide(desired, baseline, plans, owner_uid=self.uid,
                          applied_plan=self.status.get("appliedMigrationPlan"), domain=self.c.context.domain)
        except Unreadable as e:
            field = f"status.lastAppliedSpec.{e.field}" if e.field else "status.lastAppliedSpec"
            await self._fail("InvalidStatus", f"{field}: {e.message} (fail closed: nothing applied)")
            raise Stop from None

    async def _render(self, loaded: LoadedApp, decision: Decision) -> tuple[list[dict[str, Any]], list[str]]:
        """The children for the decision's target: the current spec, or the last applied one while holding."""
        try:
            if decision.outcome == "hold":
                doc = {"apiVersion": APPLICATION_KIND.api_version, "kind": APPLICATION_KIND.kind,
                       "metadata": {"name": self.name, "namespace": self.namespace},
                       "spec": spec_for(self.environment, decision.target)}
                loaded = load_document(doc, f"Application {self.namespace}/{self.name} status.lastAppliedSpec")
            rendered = render_loaded(loaded, self.environment, "manifests", self.namespace, self.c.context)
        except UserError as e:
            where = "status.lastAppliedSpec" if decision.outcome == "hold" else "spec"
            await self._fail("InvalidStatus" if decision.outcome == "hold" else "InvalidSpec",
                             f"{where}: {describe(e.problems)}")
            raise Stop from None
        owner = {"apiVersion": APPLICATION_KIND.api_version, "kind": APPLICATION_KIND.kind, "name": self.name,
                 "uid": self.uid, "controller": True, "blockOwnerDeletion": True}
        objects = []
        for obj in rendered.objects:
            obj = dict(obj)
            obj["metadata"] = {**obj["metadata"], "namespace": self.namespace, "ownerReferences": [owner]}
            objects.append(obj)
        return objects, [w.split(": ", 2)[-1] for w in rendered.warnings]

    # --- MigrationPlans ----------------------------------------------------------------------------

    def _my_plans(self) -> list[dict[str, Any]]:
        return [p for p in self.plans if (p["metadata"].get("labels") or {}).get(ENVIRONMENT_LABEL) == self.environment]

    async def _plans(self, decision: Decision) -> dict[str, dict[str, Any]]:
        """Ensure the plan a held change waits for, and move every plan to the phase the gate decided."""
        return await ensure_plans(self.kube, self.c.cache(MIGRATION_PLAN_KIND), self.recorder, self.app,
                                  {p["metadata"]["name"]: p for p in self._my_plans()}, decision.migration_plan,
                                  decision.phases, namespace=self.namespace, apply=self._ensure,
                                  created=lambda _: _waiting_note(decision, self.namespace), log_fields=self.log)

    # --- children ----------------------------------------------------------------------------------

    async def _ensure(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply unless the live object already is what the apply would make it."""
        cache = self.c.cache(obj)
        meta = obj["metadata"]
        live = cache.get(meta["namespace"], meta["name"])
        if live is not None and up_to_date(live, obj, self.kube.field_manager):
            return live
        try:
            result = await self.kube.apply(obj)
        except KubeError as e:
            await self._apply_failed(e)
            raise
        cache.update(result)
        return result

    def _claim_ready(self, claim: Mapping[str, Any]) -> bool:
        meta = claim["metadata"]
        live = self.c.cache(CLAIM).get(meta["namespace"], meta["name"]) or {}
        return (live.get("status") or {}).get("ready") is True

    async def _prune(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Delete children an earlier apply made that this render no longer has (by owner and instance label)."""
        wanted = {(o["kind"], o["metadata"]["name"]) for o in objects}
        instance = f"{self.name}-{self.environment}"
        for kind in KINDS:
            cache = self.c.cache(kind)
            for obj in cache.owned_by(self.uid):
                meta = obj["metadata"]
                if (kind.kind, meta["name"]) in wanted or (meta.get("labels") or {}).get(INSTANCE_LABEL) != instance \
                        or meta.get("namespace") != self.namespace:
                    continue
                try:
                    await self.kube.delete(kind, meta["name"], self.namespace)
                except KubeError as e:
                    await self._apply_failed(e)
                    raise
                cache.forget(self.namespace, meta["name"])
                log.info("pruned", extra={**self.log, "kind": kind.kind, "child": meta["name"]})

    # --- status ------------------------------------------------------------------------------------

    async def _finish(self, decision: Decision, plans: Mapping[str, dict[str, Any]],
                      claims: Sequence[Mapping[str, Any]], waiting: Sequence[str], count: int,
                      warnings: Sequence[str]) -> None:
        claims_cond = None
        if claims:
            claims_cond = (Condition(CLAIMS_READY, "False", "WaitingForClaims", "waiting for ResourceClaims to be "
                                     f"ready: {', '.join(waiting)}") if waiting
                           else Condition(CLAIMS_READY, "True", "ClaimsReady", f"{len(claims)} ResourceClaims ready"))
        migration = self._migration_condition(decision, plans)
        status = self._kept("lastAppliedSpec", "appliedMigrationPlan", "image")
        if decision.outcome == "hold":
            phase = "AwaitingMigrationApproval"
            ready = Condition(READY, "False", "AwaitingMigrationApproval", _waiting_note(decision, self.namespace))
            status["migrationPlan"] = decision.waiting_for
        elif waiting:
            phase = "Pending"
            ready = Condition(READY, "False", "WaitingForClaims", f"no workload until every ResourceClaim is ready "
                              f"(waiting for {', '.join(waiting)})")
        else:
            phase = "Ready"
            note = f"; warnings: {'; '.join(warnings)}" if warnings else ""
            ready = Condition(READY, "True", "Applied", f"{count} objects applied for generation {self.generation}"
                              + note)
            await self._restamp(decision, status)
        conditions = [ready, *(c for c in (claims_cond, migration) if c is not None)]
        await self._write_status(phase, conditions, status)
        if phase == "Ready" and decision.consumed:
            plan = plans.get(decision.consumed)
            if plan is not None:
                await set_phase(self.kube, self.c.cache(MIGRATION_PLAN_KIND), plan,
                                PlanPhase(decision.consumed, APPLIED, "applied"), self.log)
                await self.recorder.event(self.app, "MigrationApplied", f"MigrationPlan {decision.consumed} was "
                                          "approved; its change is applied", decision.consumed)

    async def _restamp(self, decision: Decision, status: dict[str, Any]) -> None:
        """The applied spec becomes the gate's baseline; the approved plan it consumed is recorded first."""
        target = dict(decision.target)
        old = self.status.get("lastAppliedSpec")
        if decision.soft_destructive and old != target:
            note = "; ".join(f"{c.field}: {c.reason} ({c.rule})" for c in decision.soft_destructive)
            occurrence = hashlib.sha256(canonical([old, target]).encode()).hexdigest()
            await self.recorder.event(self.app, "SoftDestructiveChange", f"applied without approval: {note}",
                                      occurrence, type_="Warning")
        status["lastAppliedSpec"] = target
        if decision.consumed:
            status["appliedMigrationPlan"] = decision.consumed
        elif old != target:
            status.pop("appliedMigrationPlan", None)
        if target.get("image"):
            status["image"] = target["image"]

    def _migration_condition(self, decision: Decision, plans: Mapping[str, Mapping[str, Any]]) -> Condition | None:
        if decision.outcome == "hold":
            waiting = decision.waiting_for or ""
            phase = ((plans.get(waiting) or {}).get("status") or {}).get("phase")
            if phase == REJECTED:
                return Condition(MIGRATION_APPROVED, "False", "Rejected", f"MigrationPlan {waiting} was rejected: "
                                 "revert the change in git")
            return Condition(MIGRATION_APPROVED, "False", "AwaitingApproval", f"MigrationPlan {waiting} is "
                             f"{phase or PENDING}")
        if decision.consumed:
            return Condition(MIGRATION_APPROVED, "True", "Approved", f"MigrationPlan {decision.consumed} approved")
        previous = next((c for c in self.status.get("conditions") or [] if c.get("type") == MIGRATION_APPROVED), None)
        if previous and previous.get("status") == "True":
            return Condition(MIGRATION_APPROVED, "True", str(previous.get("reason")), str(previous.get("message")))
        return None

    async def _write_status(self, phase: str, conditions: Sequence[Condition], fields: Mapping[str, Any]) -> None:
        status = {"phase": phase, "observedGeneration": self.generation,
                  "conditions": render(conditions, self.status.get("conditions") or [], self.generation, now()),
                  **{k: v for k, v in fields.items() if v is not None}}
        if status_up_to_date(self.app, status, self.kube.status_field_manager):
            return
        # No resourceVersion precondition: every field states what this pass applied (observedGeneration says
        # for which generation); a spec edited meanwhile is the next pass's, and a re-stamp that failed on a
        # conflict after its children were applied would leave the baseline behind the cluster.
        body = {"apiVersion": APPLICATION_KIND.api_version, "kind": APPLICATION_KIND.kind,
                "metadata": {"name": self.name, "namespace": self.namespace}, "status": status}
        self.app = await self.kube.apply(body, status=True)
        self.status = dict(self.app.get("status") or {})
        self.c.cache(APPLICATION_KIND).update(self.app)
        log.info("status", extra={**self.log, "phase": phase, "generation": self.generation,
                                  "reason": conditions[0].reason})

    def _kept(self, *fields: str) -> dict[str, Any]:
        """Status fields carried over as they are (an apply that leaves out a field we own removes it)."""
        return {k: self.status[k] for k in fields if k in self.status}

    async def _fail(self, reason: str, message: str) -> None:
        """The Application cannot be applied as it is: Failed, Ready=False, children untouched."""
        log.info("not applied", extra={**self.log, "reason": reason, "detail": message})
        keep = self._kept("lastAppliedSpec", "appliedMigrationPlan", "image", "migrationPlan")
        others = [Condition(str(c["type"]), _status(c.get("status")), str(c.get("reason")), str(c.get("message")))
                  for c in self.status.get("conditions") or [] if c.get("type") in (CLAIMS_READY, MIGRATION_APPROVED)]
        await self._write_status("Failed", [Condition(READY, "False", reason, message), *others], keep)

    async def _apply_failed(self, error: KubeError) -> None:
        """A child the API server refused: Failed (its message) or, when worth retrying, Progressing."""
        phase, reason = ("Progressing", "Retrying") if error.retryable else ("Failed", "ApplyFailed")
        keep = self._kept("lastAppliedSpec", "appliedMigrationPlan", "image", "migrationPlan")
        try:
            await self._write_status(phase, [Condition(READY, "False" if phase == "Failed" else "Unknown", reason,
                                                       str(error))], keep)
        except KubeError as e:
            log.warning("status not written", extra={**self.log, "error": str(e)})


async def _all(calls: Iterable[Awaitable[Any]]) -> None:
    """Independent writes at the same time; the first failure is raised once all have finished."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


def _status(value: Any) -> ConditionStatus:
    return "True" if value == "True" else "False" if value == "False" else "Unknown"


def _waiting_note(decision: Decision, namespace: str) -> str:
    assert decision.plan is not None
    name = decision.waiting_for
    classes = ", ".join(decision.plan.classifications)
    return (f"MigrationPlan {name} ({decision.plan.primary}; classes: {classes}) awaits approval: "
            f"apprafter migration approve {name} -n {namespace}")


__all__ = ["ApplicationController", "key_of", "read_application"]
