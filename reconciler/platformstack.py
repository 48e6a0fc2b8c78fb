"""The PlatformStack controller (spec §3.11): on a spec or plan change, and every checkInterval, it looks at the chart
repository, cosign-verifies the target's digest before anything is pulled, classifies what runs against the target
with the charts' compatibility metadata, and applies the umbrella Argo CD Application or waits for a platform-scope
MigrationPlan. Every decision is the core's (platform_stack.channels and .upstream, compatibility.gate's
decide_platform); this module reads, calls them and writes (docs/platform-stack.md).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from prometheus_client import Histogram

from compatibility.gate import APPLIED, PENDING, PlanPhase, PlatformDecision, PlatformPlan, Rejection, decide_platform
from compatibility.migrationplan import previous_pin
from platform_stack import umbrella as umbrella_
from platform_stack.channels import upgrade_available
from platform_stack.credentials import DockerConfig, parse_docker_config
from platform_stack.errors import StackError
from platform_stack.registry import RegistryFailure
from platform_stack.resource import NAME, NAMESPACE, StackSpec, push_history, read_spec
from platform_stack.upstream import Baseline, Check, Finding, PublicKeys, Upstream, check, keys_from_secret
from reconciler.compare import foreign_writers, status_up_to_date, up_to_date
from reconciler.conditions import Condition, now, render
from reconciler.conditions import Status as ConditionStatus
from reconciler.informer import Informer, Key, controller_uid
from reconciler.kube import ARGO_APPLICATION_KIND, MIGRATION_PLAN_KIND, PLATFORM_STACK_KIND, SECRET_KIND, KubeError
from reconciler.loop import RetryLater, Runtime, Watch, itself
from reconciler.plans import ensure as ensure_plans
from reconciler.plans import set_phase
from renderer.manifests import Kind
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL
from toolchain.errors import ToolFailure, UserError

log = logging.getLogger("apprafter.platformstack")
CHECK_SECONDS = Histogram("apprafter_platform_check_seconds", "One look at the chart repository: tags, digests, "
                          "cosign, charts, classification", buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120))

PLAN_LABELS = {MANAGED_BY_LABEL: MANAGED_BY, "apprafter.io/scope": "platform"}
COMPONENT_LABELS = {MANAGED_BY_LABEL: "apprafter-platform-stack"}  # the chart's Application per component
COMPONENT_LABEL = "apprafter.io/component"
DOCKER_CONFIG_KEY = ".dockerconfigjson"

READY, SOURCE_VERIFIED, UPGRADE_AVAILABLE, MIGRATION_APPROVED = (
    "Ready", "SourceVerified", "UpgradeAvailable", "MigrationApproved")
# Findings retried with backoff (outside the cluster, or may change without a spec change); the others wait for
# the spec to change (or the next check).
RETRIED = frozenset({"RegistryUnavailable", "CheckFailed", "VerificationFailed", "TagMoved", "VersionNotFound",
                     "NoVersionAvailable", "KeysUnavailable", "CredentialsUnavailable"})
# Findings about the signature or its keys: SourceVerified=False with the same reason.
SOURCE_FINDINGS = frozenset({"VerificationFailed", "TagMoved", "NotConfigured", "KeysUnavailable"})
# Status fields a pass that learnt nothing new about them carries over as they are.
KEPT = ("currentVersion", "targetVersion", "availableVersion", "lastUpstreamCheck", "components", "versionHistory",
        "lastApplied", "migrationPlan", "rejectedPlan", "unverifiedVersions")

T = TypeVar("T")


class _Stop(Exception):
    """The pass ends here; the status says why."""


class _Found(Exception):
    """Nothing can be checked or applied now, for this reason."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def to_stack(obj: Mapping[str, Any]) -> Iterable[Key]:
    """Every watched object concerns the one PlatformStack."""
    yield NAMESPACE, NAME


@dataclasses.dataclass(frozen=True)
class _Memo:
    """When the repository was last looked at, for which object, generation and plan phases."""

    uid: str
    generation: int
    at: float
    plans: frozenset[tuple[str, str]]


def _plan_phases(plans: Iterable[Mapping[str, Any]]) -> frozenset[tuple[str, str]]:
    return frozenset((p["metadata"]["name"], str((p.get("status") or {}).get("phase") or "")) for p in plans)


class PlatformStackController:
    """Reconciles the PlatformStack `default` in apprafter-system into the umbrella Argo CD Application."""

    name = "platformstack"
    primary = PLATFORM_STACK_KIND
    namespaces: tuple[str, ...] = (NAMESPACE,)

    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        self.upstream = Upstream()
        self.memo: _Memo | None = None

    def watches(self) -> Sequence[Watch]:
        return [Watch(PLATFORM_STACK_KIND, {}, itself, (NAMESPACE,)),
                Watch(MIGRATION_PLAN_KIND, PLAN_LABELS, to_stack, (NAMESPACE,)),
                Watch(ARGO_APPLICATION_KIND, umbrella_.LABELS, to_stack, (umbrella_.NAMESPACE,)),
                Watch(ARGO_APPLICATION_KIND, COMPONENT_LABELS, to_stack, (umbrella_.NAMESPACE,))]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def cache(self, kind: Kind, labels: Mapping[str, str] | None, namespace: str) -> Informer:
        assert self.runtime is not None
        return self.runtime.informer(kind, labels, (namespace,))

    def due(self, obj: Mapping[str, Any], plans: Sequence[Mapping[str, Any]], interval: float) -> float:
        """Seconds until the repository must be looked at again (0: now): never yet, a new spec, a plan that moved,
        or checkInterval elapsed."""
        memo, meta = self.memo, obj["metadata"]
        if memo is None or memo.uid != meta["uid"] or memo.generation != int(meta.get("generation") or 0) \
                or memo.plans != _plan_phases(plans):
            return 0.0
        return max(0.0, memo.at + interval - time.monotonic())

    def remember(self, obj: Mapping[str, Any], plans: Iterable[Mapping[str, Any]]) -> None:
        meta = obj["metadata"]
        self.memo = _Memo(meta["uid"], int(meta.get("generation") or 0), time.monotonic(), _plan_phases(plans))

    async def reconcile(self, namespace: str, name: str) -> float | None:
        assert self.runtime is not None
        if (namespace, name) != (NAMESPACE, NAME):
            return None  # a cluster has one PlatformStack (the admission webhook refuses others)
        plans = self.cache(MIGRATION_PLAN_KIND, PLAN_LABELS, NAMESPACE).items(NAMESPACE)
        obj = await self.runtime.kube.get(PLATFORM_STACK_KIND, NAME, NAMESPACE)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self.cache(PLATFORM_STACK_KIND, None, NAMESPACE).forget(NAMESPACE, NAME)
            self.memo = None
            return None
        self.cache(PLATFORM_STACK_KIND, None, NAMESPACE).update(obj)
        return await _Pass(self, obj, plans).run()


async def _in_thread(call: Callable[[], T]) -> T:
    """Blocking I/O (registry requests, cosign) in a daemon thread: the event loop keeps beating and renewing the
    Lease, and SIGTERM never waits for a check to end (every request and cosign run is bounded anyway)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: tuple[bool, Any]) -> None:
        if not future.done():
            if outcome[0]:
                future.set_result(outcome[1])
            else:
                future.set_exception(outcome[1])

    def run() -> None:
        try:
            outcome: tuple[bool, Any] = (True, call())
        except BaseException as e:  # handed to the awaiting coroutine, which reports it
            outcome = (False, e)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the process is stopping
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=run, name="platformstack-check", daemon=True).start()
    return await future


def _baseline(raw: Any) -> Baseline:
    """status.lastApplied read fail-closed (ValueError naming the field)."""
    if not isinstance(raw, Mapping):
        raise ValueError("status.lastApplied: not a mapping")
    for field in ("version", "digest", "repository"):
        if not isinstance(raw.get(field), str) or not raw[field]:
            raise ValueError(f"status.lastApplied.{field}: missing")
    for field in ("values", "overrides"):
        if not isinstance(raw.get(field, {}), Mapping):
            raise ValueError(f"status.lastApplied.{field}: not a mapping")
    for field in ("pin", "plan"):
        if raw.get(field) is not None and not isinstance(raw.get(field), str):
            raise ValueError(f"status.lastApplied.{field}: not a string")
    return Baseline(raw["version"], raw["digest"], raw["repository"], raw.get("pin"), dict(raw.get("values") or {}),
                    dict(raw.get("overrides") or {}), raw.get("plan"))


def _applied(base: Baseline) -> dict[str, Any]:
    """status.lastApplied of a baseline (empty fields left out)."""
    out: dict[str, Any] = {"version": base.version, "digest": base.digest, "repository": base.repository}
    out.update({k: v for k, v in (("pin", base.pin), ("values", dict(base.values)),
                                  ("overrides", dict(base.overrides)), ("plan", base.plan)) if v})
    return out


def _short(digest: str) -> str:
    return digest[:19] + "…" if len(digest) > 19 else digest


class _Pass:
    """One reconcile of the PlatformStack."""

    def __init__(self, controller: PlatformStackController, obj: dict[str, Any],
                 plans: list[dict[str, Any]]) -> None:
        assert controller.runtime is not None
        self.c = controller
        self.kube = controller.runtime.kube
        self.recorder = controller.runtime.recorder
        self.obj = obj
        self.plans = plans
        meta = obj["metadata"]
        self.uid, self.generation = meta["uid"], int(meta.get("generation") or 0)
        self.status: dict[str, Any] = dict(obj.get("status") or {})
        self.log = {"controller": "platformstack", "namespace": NAMESPACE, "object": NAME}

    async def run(self) -> float | None:
        try:
            return await self._run()
        except _Stop:
            return None

    async def _run(self) -> float | None:
        spec, problems = read_spec(self.obj)
        if spec is None:
            await self._write([Condition(READY, "False", "InvalidSpec", "; ".join(f"{f}: {r}" for f, r in problems)),
                               *self._carried(SOURCE_VERIFIED, UPGRADE_AVAILABLE, MIGRATION_APPROVED)],
                              self._kept(*KEPT))
            return None
        baseline = await self._baseline()
        wait = self.c.due(self.obj, self.plans, spec.check_interval)
        if wait > 0:
            await self._light(baseline)
            return wait
        started = time.perf_counter()
        try:
            return await self._full(spec, baseline)
        finally:
            CHECK_SECONDS.observe(time.perf_counter() - started)

    async def _baseline(self) -> Baseline | None:
        raw = self.status.get("lastApplied")
        if raw is None:
            return None
        foreign = foreign_writers(self.obj, "lastApplied", self.kube.status_field_manager)
        try:
            if foreign:
                raise ValueError(f"status.lastApplied was written by {', '.join(foreign)}, not by the operator")
            return _baseline(raw)
        except ValueError as e:
            await self._write([Condition(READY, "False", "InvalidStatus", f"{e}: it is not trusted as the gate's "
                                         "baseline (fail closed: nothing applied)"),
                               *self._carried(SOURCE_VERIFIED, UPGRADE_AVAILABLE, MIGRATION_APPROVED)],
                              self._kept(*KEPT))
            raise _Stop from None

    # --- between checks --------------------------------------------------------------------------------

    async def _light(self, baseline: Baseline | None) -> None:
        """No check due: keep the umbrella as last applied (drift is repaired) and the components' status fresh."""
        if baseline is not None:
            await self._umbrella(baseline, automated=not self._moved_before())
        components = self._components(self.status.get("components") or [])
        if components != (self.status.get("components") or []):
            await self._write(self._carried(READY, SOURCE_VERIFIED, UPGRADE_AVAILABLE, MIGRATION_APPROVED),
                              {**self._kept(*KEPT), "components": components},
                              generation=int(self.status.get("observedGeneration") or 0))

    # --- a check ---------------------------------------------------------------------------------------

    async def _full(self, spec: StackSpec, baseline: Baseline | None) -> float | None:
        try:
            keys = await self._keys(spec)
            configs = await self._credentials(spec)
            kube_version = await self.kube.version()
            try:
                result = await _in_thread(lambda: self._look(spec, baseline, keys, configs, kube_version))
            except RegistryFailure as e:
                raise _Found(Finding("RegistryUnavailable", str(e))) from None
            except ToolFailure as e:
                raise _Found(Finding("CheckFailed", str(e))) from None
            except StackError as e:
                raise _Found(Finding("InvalidSpec", "; ".join(e.lines()))) from None
        except _Found as e:
            return await self._finding(spec, baseline, e.finding)
        checked = now()
        await self._report(result, baseline)
        if result.target is None:
            assert result.finding is not None
            return await self._finding(spec, baseline, result.finding, result, checked)
        decision = decide_platform(
            result.plan, self._platform_plans(), owner_uid=self.uid,
            applied_plan=baseline.plan if baseline else None, from_digest=baseline.digest if baseline else None,
            to_digest=result.target.digest, previous_pin=baseline.pin if baseline else None, pin=spec.pin,
            rejection=self._rejection(), generation=self.generation)
        log.info("checked", extra={**self.log, "target": result.target_version, "available": result.available,
                                   "outcome": decision.outcome, "plan": decision.waiting_for or decision.consumed})
        live = await self._plans(decision)
        if decision.allowed:
            return await self._apply(spec, baseline, result, decision, live, checked)
        assert baseline is not None  # a plan needs something that runs
        if decision.outcome == "hold":
            return await self._hold(spec, baseline, result, decision, live, checked)
        return await self._rejected(spec, baseline, result, decision, live, checked)

    def _look(self, spec: StackSpec, baseline: Baseline | None, keys: PublicKeys, configs: Sequence[DockerConfig],
              kube_version: str) -> Check:
        """The blocking part (run in a thread): the repository, the running version's repository if it moved."""
        session = self.c.upstream.open(spec.repository, spec.insecure, configs)
        running = None
        if baseline is not None and baseline.repository != session.repository:
            running = self.c.upstream.open(baseline.repository, spec.insecure, configs)
        return check(session, keys, channel=spec.channel, pin=spec.pin, auto_upgrade=spec.auto_upgrade,
                     tier=spec.values.get("tier"), overrides=spec.overrides, baseline=baseline,
                     kube_version=kube_version, running=running)

    async def _secret(self, name: str, field: str, reason: str) -> dict[str, Any]:
        found = await self.kube.get(SECRET_KIND, name, NAMESPACE)
        if found is None:
            raise _Found(Finding(reason, f"Secret {NAMESPACE}/{name} ({field}) not found"))
        return found

    async def _keys(self, spec: StackSpec) -> PublicKeys:
        if spec.keys is None:
            raise _Found(Finding("NotConfigured", "spec.verify is not set: nothing is applied without a verified "
                                 "digest (set spec.verify.secretRef to a Secret holding the release's cosign public "
                                 "keys, *.pub)"))
        secret = await self._secret(spec.keys, "spec.verify.secretRef", "KeysUnavailable")
        try:
            return keys_from_secret(secret, f"{NAMESPACE}/{spec.keys}")
        except StackError as e:
            raise _Found(Finding("KeysUnavailable", "; ".join(e.lines()))) from None

    async def _credentials(self, spec: StackSpec) -> list[DockerConfig]:
        if spec.credentials is None:
            return []
        secret = await self._secret(spec.credentials, "spec.source.secretRef", "CredentialsUnavailable")
        display = f"Secret {NAMESPACE}/{spec.credentials} {DOCKER_CONFIG_KEY}"
        try:
            raw = (secret.get("data") or {}).get(DOCKER_CONFIG_KEY)
            if not isinstance(raw, str):
                raise StackError(f"{display}: missing (a kubernetes.io/dockerconfigjson Secret has it)")
            try:
                text = base64.b64decode(raw, validate=True)
            except binascii.Error:
                raise StackError(f"{display}: not base64") from None
            return [parse_docker_config(text, display)]
        except UserError as e:
            raise _Found(Finding("CredentialsUnavailable", "; ".join(e.lines()))) from None

    async def _report(self, result: Check, baseline: Baseline | None) -> None:
        """Events for what the check found: each unverified version, a moved tag, a newer version."""
        for entry in result.unverified:
            await self.recorder.event(self.obj, "VerificationFailed", f"{entry['version']} "
                                      f"({entry.get('digest', 'no digest')}) is not offered: {entry['reason']}",
                                      f"{entry['version']}@{entry.get('digest')}:{entry['reason']}", type_="Warning")
        if baseline is not None and result.current_digest != baseline.digest:
            now_names = result.current_digest or "nothing"
            await self.recorder.event(self.obj, "TagMoved", f"tag {baseline.version} of the running version now "
                                      f"names {now_names}, not the verified {baseline.digest}; the umbrella's "
                                      "automated sync is off until a verified version is applied",
                                      f"{baseline.version}@{result.current_digest}", type_="Warning")
        current = baseline.version if baseline else None
        if result.available and upgrade_available(current, result.available[0]):
            version, digest = result.available
            await self.recorder.event(self.obj, "UpgradeAvailable", f"{version} ({digest}) verifies and is newer "
                                      f"than {current}", f"{version}@{digest}")

    # --- outcomes ----------------------------------------------------------------------------------------

    async def _finding(self, spec: StackSpec, baseline: Baseline | None, finding: Finding,
                       result: Check | None = None, checked: str | None = None) -> float:
        """Nothing new can be applied: what runs keeps running (its umbrella as applied, automated sync off when its
        tag moved), the status says why; retried with backoff when the cause may pass by itself."""
        moved = self._moved(result, baseline) or finding.reason == "TagMoved"
        if baseline is not None:
            await self._umbrella(baseline, automated=not moved)
        fields = self._kept(*KEPT)
        if result is not None:
            fields.update(self._checked(result, checked))
        conditions = [Condition(READY, "False", finding.reason, finding.message)]
        if finding.reason in SOURCE_FINDINGS:
            conditions.append(Condition(SOURCE_VERIFIED, "False", finding.reason, finding.message))
        elif moved and baseline is not None:
            conditions.append(self._moved_condition(baseline))
        else:
            conditions += self._carried(SOURCE_VERIFIED)
        conditions += [self._upgrade(baseline, result)] if result is not None else self._carried(UPGRADE_AVAILABLE)
        conditions += self._carried(MIGRATION_APPROVED)
        await self._write(conditions, fields)
        log.info("not applied", extra={**self.log, "reason": finding.reason, "detail": finding.message})
        if finding.reason == "RegistryUnavailable":
            await self.recorder.event(self.obj, finding.reason, finding.message,
                                      f"{finding.message}\0{self.status.get('lastUpstreamCheck')}", type_="Warning")
        elif finding.reason not in ("VerificationFailed", "TagMoved"):  # those have their events already
            await self.recorder.event(self.obj, finding.reason, finding.message, f"{self.generation}:{finding.message}",
                                      type_="Warning")
        if finding.reason in RETRIED:
            raise RetryLater(f"{finding.reason}: {finding.message}")
        self.c.remember(self.obj, self.plans)
        return spec.check_interval

    async def _apply(self, spec: StackSpec, baseline: Baseline | None, result: Check, decision: PlatformDecision,
                     live: dict[str, dict[str, Any]], checked: str) -> float:
        """The verified target goes to the umbrella; the baseline and history are re-stamped, then the plan marked."""
        target = result.target
        assert target is not None
        unchanged = baseline is not None and (baseline.version, baseline.digest) == (target.version, target.digest)
        keep_plan = baseline.plan if baseline is not None and unchanged and not decision.consumed else None
        new = Baseline(target.version, target.digest, result.repository, spec.pin, spec.values, spec.overrides,
                       decision.consumed or keep_plan)
        await self._umbrella(new, automated=True)
        history = self.status.get("versionHistory") or []
        if not unchanged:
            entry = {"version": new.version, "digest": new.digest, "appliedAt": now()}
            history = push_history(history, {**entry, **({"plan": decision.consumed} if decision.consumed else {})})
        fields = {**self._kept("rejectedPlan"), **self._checked(result, checked), "currentVersion": new.version,
                  "targetVersion": new.version, "components": self._components(list(target.components)),
                  "versionHistory": history, "lastApplied": _applied(new)}
        verified = Condition(SOURCE_VERIFIED, "True", "Verified", f"{new.version} ({new.digest}) verified with "
                             f"{target.key} of Secret {NAMESPACE}/{spec.keys}")
        ready = Condition(READY, "True", "Applied", f"{new.version} ({_short(new.digest)}) is applied to Argo CD "
                          f"Application {umbrella_.NAMESPACE}/{umbrella_.NAME}")
        approved = self._approved(decision)
        await self._write([ready, verified, self._upgrade(new, result), *([approved] if approved else [])], fields)
        if not unchanged:
            via = f" (MigrationPlan {decision.consumed})" if decision.consumed else ""
            await self.recorder.event(self.obj, "UpgradeApplied", f"{baseline.version if baseline else 'nothing'} -> "
                                      f"{new.version} ({new.digest}){via}", f"{new.version}@{new.digest}")
            log.info("applied", extra={**self.log, "version": new.version, "digest": new.digest,
                                       "plan": decision.consumed})
        if decision.consumed and decision.consumed in live:
            await set_phase(self.kube, self._plan_cache(), live[decision.consumed],
                            PlanPhase(decision.consumed, APPLIED, "applied"), self.log)
            await self.recorder.event(self.obj, "MigrationApplied", f"MigrationPlan {decision.consumed} was approved; "
                                      f"{new.version} is applied", decision.consumed)
        self.c.remember(self.obj, live.values())
        return spec.check_interval

    async def _hold(self, spec: StackSpec, baseline: Baseline, result: Check, decision: PlatformDecision,
                    live: dict[str, dict[str, Any]], checked: str) -> float:
        """A gated target: what runs keeps running until the plan is approved."""
        moved = self._moved(result, baseline)
        await self._umbrella(baseline, automated=not moved)
        name = decision.waiting_for or ""
        assert decision.plan is not None and result.target is not None
        note = (f"{result.target.version} waits for MigrationPlan {name} ({decision.plan.primary}; classes: "
                f"{', '.join(decision.plan.classifications)}): apprafter migration approve {name} (or reject it)")
        fields = {**self._kept(*KEPT), **self._checked(result, checked), "migrationPlan": name}
        conditions = [Condition(READY, "False", "AwaitingMigrationApproval", note),
                      self._moved_condition(baseline) if moved else Condition(
                          SOURCE_VERIFIED, "True", "Verified", f"{result.target.version} ({result.target.digest}) "
                          f"verified with {result.target.key} of Secret {NAMESPACE}/{spec.keys}"),
                      self._upgrade(baseline, result),
                      Condition(MIGRATION_APPROVED, "False", "AwaitingApproval", f"MigrationPlan {name} is "
                                f"{(live.get(name, {}).get('status') or {}).get('phase') or PENDING}")]
        await self._write(conditions, fields)
        self.c.remember(self.obj, live.values())
        return spec.check_interval

    async def _rejected(self, spec: StackSpec, baseline: Baseline, result: Check, decision: PlatformDecision,
                        live: dict[str, dict[str, Any]], checked: str) -> float | None:
        """A rejected plan: spec.pin goes back to what it was when the running version was applied (once), and the
        rejected change is not proposed again until the spec changes."""
        rejected = decision.rejected or ""
        generation, again = self.generation, None
        if decision.outcome == "revert":
            self.obj = await self.kube.merge(PLATFORM_STACK_KIND, NAME, NAMESPACE,
                                             {"spec": {"pin": decision.revert_pin}},
                                             resource_version=self.obj["metadata"].get("resourceVersion"))
            self.c.cache(PLATFORM_STACK_KIND, None, NAMESPACE).update(self.obj)
            generation, again = int(self.obj["metadata"].get("generation") or 0), 0.0  # the new spec: look again
            await self.recorder.event(self.obj, "PinReverted", f"MigrationPlan {rejected} was rejected: spec.pin is "
                                      f"{decision.revert_pin or 'unset'} again", rejected)
            log.info("pin reverted", extra={**self.log, "plan": rejected, "pin": decision.revert_pin})
        moved = self._moved(result, baseline)
        await self._umbrella(baseline, automated=not moved)
        fields = {**self._kept(*KEPT), **self._checked(result, checked), "targetVersion": baseline.version,
                  "rejectedPlan": {"name": rejected, "generation": generation}}
        fields.pop("migrationPlan", None)
        target = result.target.version if result.target else result.target_version
        if moved:
            source = self._moved_condition(baseline)
            ready = Condition(READY, "False", "TagMoved", source.message)
        else:
            ready = Condition(READY, "True", "Applied", f"{baseline.version} ({_short(baseline.digest)}) stays "
                              f"applied: {target} was rejected (MigrationPlan {rejected})")
        reverted = f": spec.pin reverted to {decision.revert_pin or 'unset'}" if decision.outcome == "revert" else ""
        conditions = [ready, *([source] if moved else self._carried(SOURCE_VERIFIED)), self._upgrade(baseline, result),
                      Condition(MIGRATION_APPROVED, "False", "Rejected",
                                f"MigrationPlan {rejected} was rejected{reverted}")]
        await self._write(conditions, fields, generation=self.generation)
        if decision.outcome != "revert":
            self.c.remember(self.obj, live.values())
            return spec.check_interval
        return again

    # --- MigrationPlans ------------------------------------------------------------------------------------

    def _platform_plans(self) -> list[PlatformPlan]:
        out = []
        for p in self.plans:
            spec = p.get("spec") or {}
            platform = (spec.get("scope") or {}).get("platform") or {}
            out.append(PlatformPlan(p["metadata"]["name"], (spec.get("trigger") or {}).get("approvedSpecHash") or None,
                                    str((p.get("status") or {}).get("phase") or ""), controller_uid(p),
                                    platform.get("fromDigest"), platform.get("toDigest"), previous_pin(p)))
        return out

    def _rejection(self) -> Rejection | None:
        raw = self.status.get("rejectedPlan")
        if isinstance(raw, Mapping) and isinstance(raw.get("name"), str) and isinstance(raw.get("generation"), int):
            return Rejection(raw["name"], raw["generation"])
        return None

    async def _plans(self, decision: PlatformDecision) -> dict[str, dict[str, Any]]:
        """Ensure the plan a held target waits for and move every plan to the phase the gate decided."""
        def note(name: str) -> str:
            assert decision.plan is not None
            return (f"MigrationPlan {name} ({decision.plan.primary}) waits for approval: apprafter migration "
                    f"approve {name}")
        return await ensure_plans(self.kube, self._plan_cache(), self.recorder, self.obj,
                                  {p["metadata"]["name"]: p for p in self.plans}, decision.migration_plan,
                                  decision.phases, namespace=NAMESPACE, apply=self._ensure_plan, created=note,
                                  log_fields=self.log)

    async def _ensure_plan(self, obj: dict[str, Any]) -> dict[str, Any]:
        live = self._plan_cache().get(NAMESPACE, obj["metadata"]["name"])
        if live is not None and up_to_date(live, obj, self.kube.field_manager):
            return live
        result = await self.kube.apply(obj)
        self._plan_cache().update(result)
        return result

    def _plan_cache(self) -> Informer:
        return self.c.cache(MIGRATION_PLAN_KIND, PLAN_LABELS, NAMESPACE)

    # --- the umbrella and the components ---------------------------------------------------------------------

    async def _umbrella(self, base: Baseline, *, automated: bool) -> None:
        """Server-side apply the umbrella Application for `base` unless it already is that."""
        desired = umbrella_.umbrella(base.repository, base.version, base.digest, base.values, base.overrides,
                                     automated=automated)
        cache = self.c.cache(ARGO_APPLICATION_KIND, umbrella_.LABELS, umbrella_.NAMESPACE)
        live = cache.get(umbrella_.NAMESPACE, umbrella_.NAME)
        if live is not None and up_to_date(live, desired, self.kube.field_manager):
            return
        try:
            result = await self.kube.apply(desired)
        except KubeError as e:
            phase, reason = ("Unknown", "Retrying") if e.retryable else ("False", "ApplyFailed")
            with contextlib.suppress(KubeError):
                await self._write([Condition(READY, _status(phase), reason, f"Argo CD Application "
                                             f"{umbrella_.NAMESPACE}/{umbrella_.NAME}: {e}"),
                                   *self._carried(SOURCE_VERIFIED, UPGRADE_AVAILABLE, MIGRATION_APPROVED)],
                                  self._kept(*KEPT))
            raise
        cache.update(result)
        log.info("umbrella applied", extra={**self.log, "version": base.version, "digest": base.digest,
                                            "automated": automated})

    def _components(self, stored: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The chart's components with the sync and health Argo CD reports on each one's Application."""
        children = {(c["metadata"].get("labels") or {}).get(COMPONENT_LABEL): c
                    for c in self.c.cache(ARGO_APPLICATION_KIND, COMPONENT_LABELS, umbrella_.NAMESPACE)
                    .items(umbrella_.NAMESPACE)}
        out = []
        for component in stored:
            entry = {k: v for k, v in component.items() if k not in ("sync", "health")}
            status = (children.get(component.get("name")) or {}).get("status") or {}
            sync, health = (status.get("sync") or {}).get("status"), (status.get("health") or {}).get("status")
            entry.update({k: v for k, v in (("sync", sync), ("health", health)) if isinstance(v, str) and v})
            out.append(entry)
        return out

    # --- status ------------------------------------------------------------------------------------------

    def _moved(self, result: Check | None, baseline: Baseline | None) -> bool:
        """The running version's tag names other content than was verified (judged by the last check when none)."""
        if result is None:
            return self._moved_before()
        return baseline is not None and result.current_digest != baseline.digest

    def _moved_before(self) -> bool:
        previous = next((c for c in self.status.get("conditions") or [] if c.get("type") == SOURCE_VERIFIED), None)
        return bool(previous and previous.get("reason") == "TagMoved")

    def _moved_condition(self, baseline: Baseline) -> Condition:
        return Condition(SOURCE_VERIFIED, "False", "TagMoved", f"tag {baseline.version} no longer names the verified "
                         f"{baseline.digest}: automated sync of {umbrella_.NAMESPACE}/{umbrella_.NAME} is off")

    def _upgrade(self, baseline: Baseline | None, result: Check) -> Condition:
        current = baseline.version if baseline else None
        if result.available and upgrade_available(current, result.available[0]):
            return Condition(UPGRADE_AVAILABLE, "True", "NewerVersion", f"{result.available[0]} is available "
                             f"(running {current})")
        newest = result.available[0] if result.available else "none verifies"
        return Condition(UPGRADE_AVAILABLE, "False", "UpToDate", f"newest of the channel: {newest}")

    def _approved(self, decision: PlatformDecision) -> Condition | None:
        """MigrationApproved after an apply: Approved for the plan it carried out; the last approval or rejection
        stays on record; a wait for a plan that is no longer needed is over."""
        if decision.consumed:
            return Condition(MIGRATION_APPROVED, "True", "Approved", f"MigrationPlan {decision.consumed} approved")
        previous = self._carried(MIGRATION_APPROVED)
        return previous[0] if previous and previous[0].reason in ("Approved", "Rejected") else None

    def _checked(self, result: Check, checked: str | None) -> dict[str, Any]:
        """The status fields every completed check sets."""
        return {"availableVersion": result.available[0] if result.available else None,
                "targetVersion": result.target_version, "lastUpstreamCheck": checked or now(),
                "unverifiedVersions": list(result.unverified) or None}

    def _kept(self, *fields: str) -> dict[str, Any]:
        return {k: self.status[k] for k in fields if k in self.status}

    def _carried(self, *types: str) -> list[Condition]:
        """Previous conditions of these types, unchanged."""
        return [Condition(str(c["type"]), _status(c.get("status")), str(c.get("reason")), str(c.get("message")))
                for c in self.status.get("conditions") or [] if c.get("type") in types]

    async def _write(self, conditions: Sequence[Condition], fields: Mapping[str, Any],
                     generation: int | None = None) -> None:
        """Server-side apply the whole status (fields left out are removed: every one of them is ours)."""
        observed = self.generation if generation is None else generation
        order = {READY: 0, SOURCE_VERIFIED: 1, UPGRADE_AVAILABLE: 2, MIGRATION_APPROVED: 3}
        ordered = sorted(conditions, key=lambda c: order.get(c.type, 9))
        status = {"observedGeneration": observed,
                  "conditions": render(ordered, self.status.get("conditions") or [], observed, now()),
                  **{k: v for k, v in fields.items() if v is not None}}
        if status_up_to_date(self.obj, status, self.kube.status_field_manager):
            return
        body = {"apiVersion": PLATFORM_STACK_KIND.api_version, "kind": PLATFORM_STACK_KIND.kind,
                "metadata": {"name": NAME, "namespace": NAMESPACE}, "status": status}
        self.obj = await self.kube.apply(body, status=True)
        self.status = dict(self.obj.get("status") or {})
        self.c.cache(PLATFORM_STACK_KIND, None, NAMESPACE).update(self.obj)
        log.info("status", extra={**self.log, "reason": ordered[0].reason if ordered else "",
                                  "current": status.get("currentVersion"), "target": status.get("targetVersion")})


def _status(value: Any) -> ConditionStatus:
    return "True" if value == "True" else "False" if value == "False" else "Unknown"


__all__ = ["PlatformStackController"]
