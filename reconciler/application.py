"""The Application controller (spec §4.5), the edge: reads the Application, its claims and MigrationPlans; asks
lifecycle.application what to apply and what the status says; applies, prunes, and writes status, plan phases
and events. Every decision is the core's (docs/rules.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import Counter

from compatibility.crd import MIGRATION_PLAN
from compatibility.gate import APPLIED, PlanPhase
from controller_runtime.client import ALL_NAMESPACES
from controller_runtime.errors import KubeError
from controller_runtime.informer import Informer
from controller_runtime.kinds import GroupVersionKind, KindLike, gvk_of
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key, controller_owners, itself, key_of
from controller_runtime.outcomes import Done, NextCheck, Outcome, Terminal, soonest
from controller_runtime.writes import ensure, prune, write_status
from lifecycle import listeners
from lifecycle.application import (
    Desired,
    Refusal,
    apply_failed,
    assess,
    awaiting_pull_secrets,
    refused,
    settle,
    waiting_claims,
    waiting_note,
)
from lifecycle.baseline import identity, record, record_name
from lifecycle.children import in_use, prunable
from lifecycle.conditions import StatusUpdate
from lifecycle.crd import BASELINE, HOSTNAME_POLICY, PUBLIC_HOSTNAME
from lifecycle.credentials.coverage import application_image, coverage_of, covers_image, deployment_image
from lifecycle.credentials.outputs import derived_from
from lifecycle.credentials.reports import scoped_out
from lifecycle.credentials.spec import SOURCE_CREDENTIAL
from lifecycle.credentials.spec import read as read_credential
from lifecycle.drift import Drift, drift, drift_note
from lifecycle.health import POD_INDEX, Workload, pods_key, workload
from lifecycle.hostnames import HOLDER_INDEX, holder, records_key
from lifecycle.image_digest import pinned
from lifecycle.notes import Note
from lifecycle.plans import APPLICATION_PLAN_LABELS, PLAN_INDEX, plans_of
from lifecycle.private_images import private_hosts, pull_always, pull_secrets_awaited, with_pull_secrets
from lifecycle.retention import DROP_ANNOTATION, claims_to_drop, drop_mark
from lifecycle.rotation import stamped
from reconciler.cache_indexes import indexed as _indexed
from reconciler.image_digests import resolve as resolve_images
from reconciler.plans import ensure as ensure_plans
from reconciler.plans import set_phase
from reconciler.status import record as record_event
from reconciler.status import status_of
from reconciler.tenancy import Tenancy
from renderer.context import PlatformContext
from renderer.crds import APPLICATION
from renderer.manifests import CLAIM, HTTPROUTE, KINDS
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL

__all__ = ["ApplicationController"]

log = logging.getLogger("apprafter.application")

MANAGED = {MANAGED_BY_LABEL: MANAGED_BY}
# The pods of our Deployments (they carry the pod template's labels): their container states are the health.
POD = GroupVersionKind("v1", "Pod")
DEPLOYMENT = GroupVersionKind("apps/v1", "Deployment")
SECRET = GroupVersionKind("v1", "Secret")
# A removed need's claim held for a pod that still reads it is looked at again this soon at the latest.
HELD_AGAIN = NextCheck(5.0)
DRIFT_CORRECTIONS = Counter("apprafter_drift_corrections", "Children put back after another field manager changed "
                            "them (each a DriftCorrected Event on the Application)", ["kind"])


def pod_primaries(pod: Mapping[str, Any]) -> Iterable[Key]:
    """The Application a pod of ours runs for: named by the pod's app label, in its namespace."""
    meta = pod.get("metadata", {})
    labels = meta.get("labels") or {}
    return [(str(meta.get("namespace", "")), labels[NAME_LABEL])] if NAME_LABEL in labels else []


def baseline_primaries(obj: Mapping[str, Any]) -> Iterable[Key]:
    """The Application an ApplicationBaseline remembers (a forgotten baseline is looked at again at once)."""
    application = (obj.get("spec") or {}).get("application") or {}
    return [(str(application.get("namespace")), str(application.get("name")))] if application else []


def hostname_primaries(obj: Mapping[str, Any]) -> Iterable[Key]:
    namespace, name, _ = holder(obj)
    return [(namespace, name)]


def plan_primaries(plan: Mapping[str, Any]) -> Iterable[Key]:
    """The Application a MigrationPlan belongs to: its controlling owner, else its labels."""
    found = list(controller_owners(APPLICATION)(plan))
    if found:
        return found
    meta = plan.get("metadata", {})
    name = (meta.get("labels") or {}).get(NAME_LABEL)
    return [(str(meta.get("namespace", "")), name)] if name else []


CLUSTER = (ALL_NAMESPACES,)


def no_primaries(obj: Mapping[str, Any]) -> Iterable[Key]:
    return ()


class ApplicationController:
    """Reconciles apprafter.io/v1alpha1 Applications into their children (see docs/operator.md)."""

    name = "application"
    primary: KindLike = APPLICATION
    namespaces: tuple[str, ...] = ()  # the operator's --namespace list

    def __init__(self, context: PlatformContext, records_namespace: str = "apprafter-system",
                 image_registries: Sequence[str] = (), insecure_registries: Sequence[str] = ()) -> None:
        self.context = context
        self.records_namespace = records_namespace  # the operator's own: baselines and hostname records
        self.image_registries = tuple(image_registries)  # the registries image updates may ask (none: every one)
        self.insecure_registries = tuple(insecure_registries)  # those asked over plain HTTP (loopback is anyway)
        self.runtime: Runtime | None = None

    def watches(self) -> Sequence[Watch]:
        owners = controller_owners(APPLICATION)
        records = (self.records_namespace,)
        return [Watch(APPLICATION, {}, itself), Watch(MIGRATION_PLAN, APPLICATION_PLAN_LABELS, plan_primaries),
                *(Watch(kind, MANAGED, owners) for kind in KINDS), Watch(POD, MANAGED, pod_primaries),
                Watch(BASELINE, {}, baseline_primaries, records),
                Watch(PUBLIC_HOSTNAME, {}, hostname_primaries, records),
                Watch(SOURCE_CREDENTIAL, {}, self.credential_primaries, records),
                Watch(SECRET, MANAGED, self.pull_secret_primaries),
                # read when a pass checks a hostname: who may use it, and which routes not ours already serve it
                Watch(HOSTNAME_POLICY, {}, no_primaries, CLUSTER), Watch(HTTPROUTE, {}, no_primaries, CLUSTER)]

    def credential_primaries(self, credential: Mapping[str, Any]) -> Iterable[Key]:
        """The Applications whose Deployment runs an image the SourceCredential covers (its validity is in their
        status), by the Deployments' controlling owner."""
        hosts = coverage_of(read_credential(credential)).registry
        if not hosts:
            return []
        owners = controller_owners(APPLICATION)
        running = {key for d in self.cache(DEPLOYMENT).items()
                   if (image := deployment_image(d)) and covers_image(hosts, image) for key in owners(d)}
        # and those waiting for its pull secret before their first Deployment (lifecycle.private_images)
        named = {key_of(a) for a in self.cache(APPLICATION).items()
                 if (image := application_image(a)) is not None and covers_image(hosts, image)}
        return sorted(running | named)

    def pull_secret_primaries(self, secret: Mapping[str, Any]) -> Iterable[Key]:
        """The Applications of the namespace a SourceCredential's derived Secret is in: one may wait for it."""
        if derived_from(secret) is None:
            return []
        return [key_of(a) for a in self.cache(APPLICATION).items(str(secret["metadata"].get("namespace") or ""))]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def cache(self, kind: KindLike) -> Informer:
        assert self.runtime is not None
        if (kind.api_version, kind.kind) == (APPLICATION.api_version, APPLICATION.kind):
            return _indexed(self.runtime.informer(kind), kind)
        labels = APPLICATION_PLAN_LABELS if kind.kind == MIGRATION_PLAN.kind else MANAGED
        return _indexed(self.runtime.informer(kind, labels), kind)

    def cluster(self, kind: KindLike) -> Informer:
        """The cache of every object of a kind in the cluster, whoever made it (HostnamePolicies, HTTPRoutes)."""
        assert self.runtime is not None
        return _indexed(self.runtime.informer(kind, {}, CLUSTER), kind)

    def records(self, kind: KindLike) -> Informer:
        """The cache of a kind the operator keeps in its own namespace (lifecycle.crd)."""
        assert self.runtime is not None
        return _indexed(self.runtime.informer(kind, {}, (self.records_namespace,)), kind)

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        # The plans first, the Application after: an approval this pass sees is never newer than the spec it
        # is checked against. Plan phase writes carry the plans' resourceVersions (a 409 starts over).
        plans = [dict(p) for p in plans_of(self.cache(MIGRATION_PLAN).indexed(PLAN_INDEX, f"{namespace}/{name}"), name)]
        app = await self.runtime.kube.get(APPLICATION, name, namespace)  # fresh: the gate's baseline
        if app is None or app["metadata"].get("deletionTimestamp"):
            self.cache(APPLICATION).forget(namespace, name)
            # its ApplicationBaseline and hostnames stay (lifecycle.baseline): a new object of the name is gated
            log.info("gone", extra={"controller": "application", "namespace": namespace, "object": name})
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
        self.tenancy = Tenancy(controller, self.kube, app)
        self.recorded_version: str | None = None  # the ApplicationBaseline the gate read (lifecycle.baseline)

    async def run(self) -> Outcome:
        recorded = self.controller.records(BASELINE).get(self.controller.records_namespace,
                                                         record_name(*identity(self.app)))
        self.recorded_version = (recorded or {}).get("metadata", {}).get("resourceVersion")
        desired = assess(self.app, self.plans, self.controller.context, status_manager=self.kube.status_field_manager,
                         recorded=recorded, field_manager=self.kube.field_manager)
        if isinstance(desired, Refusal):
            return await self.refuse(desired)
        credentials = self.controller.records(SOURCE_CREDENTIAL).items(self.controller.records_namespace)
        desired = desired._replace(children=with_pull_secrets(pull_always(desired.children, private_hosts(credentials)),
                                                              credentials))
        secrets = self.controller.cache(SECRET)
        if awaited := pull_secrets_awaited(desired.children, credentials,
                                           lambda name: secrets.get(self.namespace, name) is not None):
            # its event brings the next pass (pull_secret_primaries)
            await self.write_status(awaiting_pull_secrets(self.app, awaited))
            return Done()
        # a followed tag is applied as its digest (lifecycle.image_digest): the gate compared the spec, not this
        images = await resolve_images(self.kube, self.app, desired.children, credentials,
                                      self.controller.image_registries, self.controller.insecure_registries)
        desired = desired._replace(children=pinned(desired.children, images.entries))
        # a hostname placed on a Gateway past the chart's: its routes attach there (lifecycle.listeners)
        hostnames = self.controller.records(PUBLIC_HOSTNAME).indexed(HOLDER_INDEX, records_key(self.app))
        context = self.controller.context
        desired = desired._replace(children=listeners.on_placed_gateways(
            desired.children, hostnames, context.gateway_name, context.gateway_namespace))
        try:
            refusal = await self.tenancy.refusal(desired)
        except KubeError as e:
            with contextlib.suppress(KubeError):
                await self.write_status(apply_failed(self.app, str(e), e.retryable))
            raise
        if refusal is not None:
            return await self.refuse(refusal)
        live_plans = await self.ensure_plans(desired)
        held = False
        try:
            await _all(self.ensure(claim) for claim in desired.claims)
            claims = {c["metadata"]["name"]: self.cached(c) or {} for c in desired.claims}
            waiting = waiting_claims(desired.claims, claims)
            if not waiting:
                # a rotated claim's request on the pod templates that read its Secret: a new one rolls the pods
                # (lifecycle.rotation), applied after the gate like a digest
                desired = desired._replace(children=stamped(desired.children, claims.values()))
                await _all(self.ensure(child) for child in desired.children)
                held = await self.prune(desired, live_plans)
        except KubeError as e:
            with contextlib.suppress(KubeError):
                await self.write_status(apply_failed(self.app, str(e), e.retryable))
            raise
        settled = settle(self.app, desired, live_plans, waiting, None if waiting else self.workload(desired),
                         self.controller.records(SOURCE_CREDENTIAL).items(self.controller.records_namespace), images)
        for note in settled.notes:
            await self.record(note)
        await self.remember(settled.status, desired)
        await self.write_status(settled.status)
        if settled.consumed and settled.consumed in live_plans:
            await set_phase(self.kube, self.controller.cache(MIGRATION_PLAN), live_plans[settled.consumed],
                            PlanPhase(settled.consumed, APPLIED, "applied"), self.log)
            if settled.consumed_note is not None:
                await self.record(settled.consumed_note)
        if held:  # a removed need's claim waits for its last pod: its deletion brings a pass, this bounds the wait
            return Done(soonest([HELD_AGAIN, *([images.next_check] if images.next_check else [])]))
        return Done(images.next_check)  # a followed tag is looked at again when due

    async def refuse(self, refusal: Refusal) -> Outcome:
        log.info("not applied", extra={**self.log, "reason": refusal.reason, "detail": refusal.message})
        await self.write_status(refused(self.app, refusal))
        return Terminal(f"{refusal.reason}: {refusal.message}")

    async def remember(self, update: StatusUpdate, desired: Desired) -> None:
        """The baseline the status is about to carry, first into the ApplicationBaseline that outlives this object
        (lifecycle.baseline); once applied, the hostnames the render no longer has are given back."""
        spec = update.fields.get("lastAppliedSpec")
        if not isinstance(spec, Mapping):
            return
        wanted = record(self.app, spec, update.fields.get("appliedMigrationPlan"), self.controller.records_namespace)
        # only over the baseline this pass was gated against: one changed meanwhile (its event not handled yet) is
        # a 409 and the next pass judges it, never written over
        await ensure(self.kube, self.controller.records(BASELINE), wanted, over=self.recorded_version)
        if update.fields.get("phase") == "Ready":
            await self.tenancy.release(desired)

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
        """The child (or plan) as applied; a field someone else changed is put back and said (lifecycle.drift)."""
        done = await ensure(self.kube, self.controller.cache(gvk_of(obj)), obj, force=self.tenancy.force(obj))
        if done.written and (drifted := drift(done.before, obj, self.kube.field_manager)) is not None:
            await self.drift_corrected(drifted)
        return done.obj

    async def drift_corrected(self, drifted: Drift) -> None:
        """Say loudly that a child someone changed by hand was put back (lifecycle.drift)."""
        DRIFT_CORRECTIONS.labels(drifted.kind).inc()
        log.warning("drift corrected", extra={**self.log, "kind": drifted.kind, "child": drifted.name,
                                              "fields": [f.path for f in drifted.fields],
                                              "managers": list(drifted.managers)})
        await self.record(drift_note(drifted))

    def workload(self, desired: Desired) -> Workload:
        """The live children and the pods of this Application, as lifecycle.health reads them."""
        live = {(o["kind"], o["metadata"]["name"]): found for o in desired.children if (found := self.cached(o))}
        pods = self.controller.cache(POD).indexed(POD_INDEX, pods_key(self.app))
        image = next((deployment_image(c) for c in desired.children if c.get("kind") == "Deployment"), None)
        credentials = self.controller.records(SOURCE_CREDENTIAL).items(self.controller.records_namespace)
        held = self.controller.records(PUBLIC_HOSTNAME).indexed(HOLDER_INDEX, records_key(self.app))
        return workload(desired.children, live, pods, scoped_out(image, self.namespace, credentials),
                        listeners.full(held))

    async def prune(self, desired: Desired, plans: Mapping[str, Mapping[str, Any]]) -> bool:
        """Delete the children an earlier apply made that this render no longer has (lifecycle.children). A claim
        whose need the approved plan this pass carries out removes is marked first (lifecycle.retention): its
        backend drops its data; every other claim's data stays. A claim a pod still reads waits (in_use): true
        when one does."""
        uid = self.app["metadata"]["uid"]
        held = False
        consumed = desired.decision.consumed
        for kind in KINDS:
            cache = self.controller.cache(kind)
            chosen = prunable(cache.owned_by(uid), desired.objects, self.namespace, uid)
            if kind == CLAIM and consumed:
                for claim in claims_to_drop(plans.get(consumed), chosen):
                    marked = await self.kube.merge(CLAIM, claim["metadata"]["name"], self.namespace, {"metadata": {
                        "annotations": {DROP_ANNOTATION: drop_mark(consumed)}}},
                        resource_version=claim["metadata"].get("resourceVersion"))
                    cache.update(marked)
                    chosen = [marked if c["metadata"]["name"] == marked["metadata"]["name"] else c for c in chosen]
                    log.info("claim data to drop", extra={**self.log, "child": claim["metadata"]["name"],
                                                          "plan": consumed})
            if kind == CLAIM and chosen:
                busy = in_use(chosen, self.controller.cache(POD).indexed(POD_INDEX, pods_key(self.app)))
                if busy:
                    held = True
                    log.info("claim kept while pods read it", extra={**self.log, "children": sorted(busy)})
                    chosen = [c for c in chosen if c["metadata"]["name"] not in busy]
            async for gone in prune(self.kube, cache, chosen):
                log.info("pruned", extra={**self.log, "kind": kind.kind, "child": gone.obj["metadata"]["name"]})
        return held

    async def record(self, note: Note) -> None:
        await record_event(self.recorder, self.app, note)

    async def write_status(self, update: StatusUpdate) -> None:
        # No resourceVersion precondition: every field states what this pass applied (observedGeneration says
        # for which generation); a spec edited meanwhile is the next pass's, and a re-stamp that failed on a
        # conflict after its children were applied would leave the baseline behind the cluster.
        before = self.app
        self.app = await write_status(self.kube, self.controller.cache(APPLICATION), self.app,
                                      status_of(self.app, update))
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
