"""The PlatformStack controller (spec §3.11), the edge: reads the PlatformStack, its Secrets, its plans and the
cluster's version; runs a check of the chart repository (platform_stack.upstream, cosign-verified by digest before
anything is pulled) in a thread; carries out what lifecycle.platformstack and compatibility.gate decide: the
umbrella Argo CD Application, platform-scope MigrationPlans, the status and Events (docs/platform-stack.md)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from prometheus_client import Histogram

from compatibility.crd import MIGRATION_PLAN
from compatibility.gate import APPLIED, PlanPhase, PlatformDecision, decide_platform
from controller_runtime.errors import KubeError
from controller_runtime.informer import Informer
from controller_runtime.kinds import GroupVersionKind, KindLike
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key, itself
from controller_runtime.outcomes import Done, Outcome, Terminal
from controller_runtime.writes import ensure, write_status
from lifecycle import platformstack as decisions
from lifecycle import stack_inputs as inputs
from lifecycle.conditions import StatusUpdate
from lifecycle.notes import Note
from lifecycle.plans import PLATFORM_PLAN_LABELS
from platform_stack import umbrella
from platform_stack.check_result import Baseline, Finding
from platform_stack.errors import StackError
from platform_stack.resource import NAME, NAMESPACE, PLATFORM_STACK, StackSpec, read_spec
from platform_stack.upstream import Upstream
from reconciler.plans import ensure as ensure_plans
from reconciler.plans import set_phase
from reconciler.stack_sources import in_thread, look, read_credentials, read_keys
from reconciler.status import record, status_of
from toolchain.errors import AppRafterError
from toolchain.timestamps import time_now

__all__ = ["PlatformStackController"]

log = logging.getLogger("apprafter.platformstack")
CHECK_SECONDS = Histogram("apprafter_platform_check_seconds", "One look at the chart repository: tags, digests, "
                          "cosign, charts, classification", buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120))

SECRET = GroupVersionKind("v1", "Secret")
ARGO_APPLICATION = GroupVersionKind(umbrella.API_VERSION, umbrella.KIND)

T = TypeVar("T")


def to_stack(obj: Mapping[str, Any]) -> Iterable[Key]:
    """Every watched object concerns the one PlatformStack."""
    yield NAMESPACE, NAME


class PlatformStackController:
    """Reconciles the PlatformStack `default` in apprafter-system into the umbrella Argo CD Application."""

    name = "platformstack"
    primary: KindLike = PLATFORM_STACK
    namespaces: tuple[str, ...] = (NAMESPACE,)

    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        self.upstream = Upstream()
        self.memo: inputs.CheckMemo | None = None

    def watches(self) -> Sequence[Watch]:
        return [Watch(PLATFORM_STACK, {}, itself, (NAMESPACE,)),
                Watch(MIGRATION_PLAN, PLATFORM_PLAN_LABELS, to_stack, (NAMESPACE,)),
                Watch(ARGO_APPLICATION, umbrella.LABELS, to_stack, (umbrella.NAMESPACE,)),
                Watch(ARGO_APPLICATION, inputs.COMPONENT_LABELS, to_stack, (umbrella.NAMESPACE,))]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def cache(self, kind: KindLike, labels: Mapping[str, str] | None, namespace: str) -> Informer:
        assert self.runtime is not None
        return self.runtime.informer(kind, labels, (namespace,))

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        if (namespace, name) != (NAMESPACE, NAME):
            return Done()  # a cluster has one PlatformStack (the admission webhook refuses others)
        plans = self.cache(MIGRATION_PLAN, PLATFORM_PLAN_LABELS, NAMESPACE).items(NAMESPACE)
        obj = await self.runtime.kube.get(PLATFORM_STACK, NAME, NAMESPACE)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self.cache(PLATFORM_STACK, None, NAMESPACE).forget(NAMESPACE, NAME)
            self.memo = None
            return Done()
        self.cache(PLATFORM_STACK, None, NAMESPACE).update(obj)
        return await PlatformStackPass(self, obj, plans).run()


class PlatformStackPass:
    """One reconcile of the PlatformStack: the core's decisions carried out against the cluster."""

    def __init__(self, controller: PlatformStackController, obj: dict[str, Any],
                 plans: list[dict[str, Any]]) -> None:
        assert controller.runtime is not None
        self.controller = controller
        self.kube = controller.runtime.kube
        self.recorder = controller.runtime.recorder
        self.obj = obj
        self.plans = plans
        self.generation = int(obj["metadata"].get("generation") or 0)
        self.log = {"controller": "platformstack", "namespace": NAMESPACE, "object": NAME}

    async def run(self) -> Outcome:
        spec, problems = read_spec(self.obj)
        if spec is None:
            message = "; ".join(f"{field}: {reason}" for field, reason in problems)
            await self.write(decisions.invalid(self.obj, "InvalidSpec", message))
            return Terminal(f"InvalidSpec: {message}")
        try:
            baseline = inputs.read_baseline(self.obj, self.kube.status_field_manager)
        except StackError as e:
            message = f"{e}: it is not trusted as the gate's baseline (fail closed: nothing applied)"
            await self.write(decisions.invalid(self.obj, "InvalidStatus", message))
            return Terminal(f"InvalidStatus: {message}")
        wait = inputs.check_due(self.controller.memo, self.obj, self.plans, spec.check_interval, time.monotonic())
        if not wait.due:
            automated, update = decisions.between_checks(self.obj, baseline, self.component_apps())
            if baseline is not None:
                await self.apply_umbrella(baseline, automated)  # drift of the umbrella is repaired
            if update is not None:
                await self.write(update)
            return Done(wait)
        started = time.perf_counter()
        try:
            return await self.check(spec, baseline)
        finally:
            CHECK_SECONDS.observe(time.perf_counter() - started)

    async def check(self, spec: StackSpec, baseline: Baseline | None) -> Outcome:
        """Look at the repository and carry out what the gate decides for what it found."""
        keys = await read_keys(self.kube, spec)
        if isinstance(keys, Finding):
            return await self.carry_out(decisions.found(self.obj, spec, baseline, keys), {})
        configs = await read_credentials(self.kube, spec)
        if isinstance(configs, Finding):
            return await self.carry_out(decisions.found(self.obj, spec, baseline, configs), {})
        kube_version = await self.kube.version()
        try:
            result = await in_thread(lambda: look(self.controller.upstream, spec, baseline, keys, configs,
                                                       kube_version))
        except AppRafterError as e:
            return await self.carry_out(decisions.found(self.obj, spec, baseline, inputs.finding_of(e)), {})
        checked = time_now()
        for note in inputs.reported(result, baseline):
            await self.record(note)
        if result.target is None:
            assert result.finding is not None
            phases = decisions.refused_plans(result, inputs.existing_plans(self.plans), baseline)
            live = await self.move_plans(phases) if phases else {}
            return await self.carry_out(decisions.found(self.obj, spec, baseline, result.finding, result, checked),
                                        live)
        status = self.obj.get("status") or {}
        decision = decide_platform(
            result.plan, inputs.existing_plans(self.plans), owner_uid=self.obj["metadata"]["uid"],
            applied_plan=baseline.plan if baseline else None, from_digest=baseline.digest if baseline else None,
            to_digest=result.target.digest, previous_pin=baseline.pin if baseline else None, pin=spec.pin,
            rejection=inputs.rejection(status), generation=self.generation)
        log.info("checked", extra={**self.log, "target": result.target_version, "available": result.available,
                                   "outcome": decision.outcome, "plan": decision.waiting_for or decision.consumed})
        live = await self.ensure_plans(decision)
        if decision.allowed:
            verdict = decisions.applied(self.obj, spec, baseline, result, decision, self.component_apps(), checked)
        elif decision.outcome == "hold":
            assert baseline is not None  # a plan needs something that runs
            verdict = decisions.held(self.obj, spec, baseline, result, decision, live, checked)
        else:
            assert baseline is not None
            reverted = await self.revert_pin(decision) if decision.outcome == "revert" else None
            verdict = decisions.rejected(self.obj, spec, baseline, result, decision, checked, self.generation,
                                         reverted)
        return await self.carry_out(verdict, live)

    async def revert_pin(self, decision: PlatformDecision) -> int:
        """A rejected plan's spec.pin goes back to what it was when the running version was applied; the new
        generation."""
        self.obj = await self.kube.merge(PLATFORM_STACK, NAME, NAMESPACE, {"spec": {"pin": decision.revert_pin}},
                                         resource_version=self.obj["metadata"].get("resourceVersion"))
        self.controller.cache(PLATFORM_STACK, None, NAMESPACE).update(self.obj)
        await self.record(decisions.pin_reverted(decision))
        log.info("pin reverted", extra={**self.log, "plan": decision.rejected, "pin": decision.revert_pin})
        return int(self.obj["metadata"].get("generation") or 0)

    async def carry_out(self, verdict: decisions.StackVerdict, live: Mapping[str, dict[str, Any]]) -> Outcome:
        """The umbrella, the status, the plan the apply carried out, the events; the check remembered."""
        if verdict.umbrella is not None:
            await self.apply_umbrella(verdict.umbrella, verdict.automated)
        for note in verdict.notes:  # before the status, as for Applications: a status one sees has its events
            await self.record(note)
        await self.write(verdict.status)
        if verdict.consumed and verdict.consumed in live:
            await self.ensure_phase(live[verdict.consumed], PlanPhase(verdict.consumed, APPLIED, "applied"))
        if verdict.remember:
            self.controller.memo = inputs.memo_of(self.obj, verdict.status.generation,
                                                  live.values() if live else self.plans, time.monotonic())
        return verdict.outcome

    # --- MigrationPlans ------------------------------------------------------------------------------------

    def plan_cache(self) -> Informer:
        return self.controller.cache(MIGRATION_PLAN, PLATFORM_PLAN_LABELS, NAMESPACE)

    async def ensure_plans(self, decision: PlatformDecision) -> dict[str, dict[str, Any]]:
        """Ensure the plan a held target waits for and move every plan to the phase the gate decided."""
        return await ensure_plans(self.kube, self.plan_cache(), self.recorder, self.obj,
                            {p["metadata"]["name"]: p for p in self.plans}, decision.migration_plan,
                            decision.phases, namespace=NAMESPACE, apply=self.ensure_plan,
                            created=lambda name: decisions.plan_created_note(decision, name), log_fields=self.log)

    async def move_plans(self, phases: tuple[PlanPhase, ...]) -> dict[str, dict[str, Any]]:
        """Move plans to the phases decided when no target is held (nothing to create)."""
        return await ensure_plans(self.kube, self.plan_cache(), self.recorder, self.obj,
                                  {p["metadata"]["name"]: p for p in self.plans}, None, phases, namespace=NAMESPACE,
                                  apply=self.ensure_plan, created=str, log_fields=self.log)  # none is created

    async def ensure_plan(self, obj: dict[str, Any]) -> dict[str, Any]:
        return (await ensure(self.kube, self.plan_cache(), obj)).obj

    async def ensure_phase(self, plan: dict[str, Any], phase: PlanPhase) -> None:
        await set_phase(self.kube, self.plan_cache(), plan, phase, self.log)

    # --- the umbrella and the components ---------------------------------------------------------------------

    def component_apps(self) -> list[dict[str, Any]]:
        return self.controller.cache(ARGO_APPLICATION, inputs.COMPONENT_LABELS, umbrella.NAMESPACE) \
            .items(umbrella.NAMESPACE)

    async def apply_umbrella(self, base: Baseline, automated: bool) -> None:
        """Server-side apply the umbrella Application for `base` unless it already is that."""
        desired = umbrella.of(base, automated=automated)
        cache = self.controller.cache(ARGO_APPLICATION, umbrella.LABELS, umbrella.NAMESPACE)
        try:
            done = await ensure(self.kube, cache, desired)
        except KubeError as e:
            message = f"Argo CD Application {umbrella.NAMESPACE}/{umbrella.NAME}: {e}"
            with contextlib.suppress(KubeError):
                await self.write(decisions.umbrella_failed(self.obj, message, e.retryable))
            raise
        if not done.written:
            return
        log.info("umbrella applied", extra={**self.log, "version": base.version, "digest": base.digest,
                                            "automated": automated})

    # --- status and events -----------------------------------------------------------------------------------

    async def record(self, note: Note) -> None:
        await record(self.recorder, self.obj, note)

    async def write(self, update: StatusUpdate) -> None:
        before = self.obj
        self.obj = await write_status(self.kube, self.controller.cache(PLATFORM_STACK, None, NAMESPACE), self.obj,
                                      status_of(self.obj, update))
        if self.obj is not before:
            status = self.obj.get("status") or {}
            log.info("status", extra={**self.log, "reason": update.conditions[0].reason if update.conditions else "",
                                      "current": status.get("currentVersion"), "target": status.get("targetVersion")})
