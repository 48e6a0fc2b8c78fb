"""The SourceCredential controller (spec §3.12), the edge: reads a credential, its unsealed Secrets, what it derived,
our Deployments and Applications, Argo CD's Applications and its MigrationPlans from the caches, and what
lifecycle.credentials.assess asks it to look at outside the cluster (OpenBao reads, registry and git checks:
blocking, bounded, in threads); then writes what the core decided, in its order: the plan, the finalizer, the
derived Secrets (a hand edit put back and named: DriftCorrected), the prune, the Deployments' imagePullSecrets, the
status, the plan carried out. Every decision is the core's (docs/rules.md). Never logs material."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compatibility.crd import MIGRATION_PLAN
from controller_runtime.finalizers import add_finalizer, remove_finalizer
from controller_runtime.informer import Informer
from controller_runtime.kinds import GroupVersionKind, KindLike
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key, itself
from controller_runtime.outcomes import Done, Outcome
from controller_runtime.writes import ensure, prune, write_status
from lifecycle.credentials import concerns, looks
from lifecycle.credentials.assess import CHECK_INTERVAL, Assessment, Cluster, Settings, assess, material_names
from lifecycle.credentials.checks import Verdict
from lifecycle.credentials.material import Material, Unreadable
from lifecycle.credentials.spec import SOURCE_CREDENTIAL
from lifecycle.drift import drift, drift_note
from lifecycle.plans import CREDENTIAL_PLAN_LABELS, credential_of
from reconciler.credential_probes import probe_git, probe_registry
from reconciler.openbao import OpenBao
from reconciler.plans import ensure as ensure_plans
from reconciler.plans import set_phase
from reconciler.stack_sources import in_thread
from reconciler.status import record
from renderer.crds import APPLICATION
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL
from toolchain.timestamps import time_now

__all__ = ["SourceCredentialController"]

log = logging.getLogger("apprafter.sourcecredential")

SECRET = GroupVersionKind("v1", "Secret")
DEPLOYMENT = GroupVersionKind("apps/v1", "Deployment")
ARGO_APPLICATION = GroupVersionKind("argoproj.io/v1alpha1", "Application")
MANAGED = {MANAGED_BY_LABEL: MANAGED_BY}


class SourceCredentialController:
    """Derives and keeps the Secrets of the SourceCredentials in the operator's namespace (docs/operator.md)."""

    name = "sourcecredential"
    primary: KindLike = SOURCE_CREDENTIAL

    def __init__(self, records_namespace: str = "apprafter-system", argocd_namespace: str = "argocd",
                 field_manager: str = "apprafter-operator-credentials", gate: str = "present",
                 check_interval: float = CHECK_INTERVAL, max_backoff: float = 300.0,
                 openbao: OpenBao | None = None, insecure_registries: Sequence[str] = ()) -> None:
        self.insecure_registries = tuple(insecure_registries)  # asked over plain HTTP (--insecure-registries)
        self.settings = Settings(records_namespace, argocd_namespace, gate,
                                 looks.Timing(check_interval, max_backoff, openbao is not None))
        self.openbao = openbao  # None: no --openbao-address (an openBaoPath half is Present Unknown)
        self.memory: dict[str, looks.Memory] = {}  # each credential's last reads and checks (memory only)
        self.records_namespace = records_namespace
        self.namespaces: tuple[str, ...] = (records_namespace,)
        self.field_manager = field_manager
        self.runtime: Runtime | None = None

    def watches(self) -> Sequence[Watch]:
        records = (self.records_namespace,)
        return [Watch(SOURCE_CREDENTIAL, {}, itself, records),
                Watch(SECRET, {}, lambda s: self._keys(concerns.backed_by(self._objects(), s["metadata"]["name"])),
                      records),
                Watch(SECRET, MANAGED, lambda s: self._keys(concerns.deriving(s, self.records_namespace))),
                Watch(DEPLOYMENT, MANAGED, lambda d: self._keys(concerns.concerned_by_deployment(self._objects(), d))),
                Watch(APPLICATION, {}, lambda a: self._keys(concerns.concerned_by_image_of(self._objects(), a))),
                Watch(MIGRATION_PLAN, CREDENTIAL_PLAN_LABELS, lambda p: self._keys(concerns.planning(p)), records),
                Watch(ARGO_APPLICATION, {}, lambda a: self._keys(concerns.concerned_by_application(self._objects(), a)),
                      (self.settings.argocd_namespace,))]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _informer(self, kind: KindLike, labels: Mapping[str, str], namespaces: tuple[str, ...] = ()) -> Informer:
        assert self.runtime is not None
        return self.runtime.informer(kind, labels, namespaces)

    def _credentials(self) -> Informer:
        return self._informer(SOURCE_CREDENTIAL, {}, self.namespaces)

    def _objects(self) -> list[dict[str, Any]]:
        return self._credentials().items(self.records_namespace)

    def _plans(self) -> Informer:
        return self._informer(MIGRATION_PLAN, CREDENTIAL_PLAN_LABELS, self.namespaces)

    def _keys(self, names: Iterable[str]) -> list[Key]:
        return [(self.records_namespace, n) for n in names]

    def _cluster(self, obj: Mapping[str, Any] | None) -> Cluster:
        """What a pass reads of the caches (lifecycle.credentials.assess.Cluster)."""
        materials = self._informer(SECRET, {}, self.namespaces)
        argocd = self.settings.argocd_namespace
        return Cluster(self._objects(), self._plans().items(self.records_namespace),
                       {n: materials.get(self.records_namespace, n) for n in (material_names(obj) if obj else [])},
                       self._informer(SECRET, MANAGED).items(), self._informer(DEPLOYMENT, MANAGED).items(),
                       self._informer(ARGO_APPLICATION, {}, (argocd,)).items(argocd),
                       self._informer(APPLICATION, {}).items())

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        obj = await self.runtime.kube.get(SOURCE_CREDENTIAL, name, namespace)
        if obj is not None:
            self._credentials().update(obj)
        observed = looks.Observed()
        while True:
            decided = assess(name, obj, self._cluster(obj), self.memory.get(name, looks.Memory()), observed,
                             self.settings, now=time.monotonic(), timestamp=time_now())
            if isinstance(decided, Assessment):
                break
            looked = await self._look(name, decided, observed)
            # the core asks only for what this pass has not looked at yet: the loop ends
            assert len(looked.reads) + len(looked.verdicts) > len(observed.reads) + len(observed.verdicts)
            observed = looked
        if decided.memory is None:
            self.memory.pop(name, None)
        else:
            self.memory[name] = decided.memory
        await self._carry_out(namespace, name, obj, decided)
        return Done(decided.next_check)

    async def _look(self, name: str, asked: looks.Looks, observed: looks.Observed) -> looks.Observed:
        """Read the OpenBao paths and check the halves the core asked for, each in a thread."""
        reads = dict(observed.reads)
        for request in asked.reads:
            assert self.openbao is not None
            reads[str(request.path)] = found = await in_thread(functools.partial(self.openbao.read, request.path))
            log.info("read", extra={"controller": self.name, "object": name, "half": request.half,
                                    "path": str(request.path), "outcome": _outcome(found)})
        verdicts = dict(observed.verdicts)
        for check in asked.checks:
            verdicts[check.half] = said = await in_thread(functools.partial(_probe, check,
                                                                                   self.insecure_registries))
            for verdict in said:
                log.info("checked", extra={"controller": self.name, "object": name, "half": check.half,
                                           "state": verdict.state, "detail": verdict.message})
        return looks.Observed(reads, verdicts)

    async def _carry_out(self, namespace: str, name: str, obj: dict[str, Any] | None, decided: Assessment) -> None:
        """What the core decided, in its order; every write skipped when the cluster already is so."""
        assert self.runtime is not None
        kube, fields = self.runtime.kube, {"controller": self.name, "namespace": namespace, "object": name}
        decision = decided.decision
        live = {p["metadata"]["name"]: p for p in self._plans().items(namespace) if credential_of(p) == name}
        if obj is not None and decision is not None and (decision.migration_plan is not None or decision.phases):
            live = await ensure_plans(kube, self._plans(), self.runtime.recorder, obj, live, decision.migration_plan,
                                      decision.phases, namespace=namespace, apply=self._ensure_plan,
                                      created=lambda _: decided.created, log_fields=fields)
        if decision is not None and decision.outcome != "apply":
            log.info("gate", extra={**fields, "outcome": decision.outcome,
                                    "plan": decision.waiting_for or decision.consumed})
        for finalizer in decided.finalizers_added:
            assert obj is not None
            obj = await add_finalizer(kube, self._credentials(), obj, finalizer)
        for secret in decided.derive:
            assert obj is not None
            await self._ensure(obj, secret)
        secrets = self._informer(SECRET, MANAGED)
        async for gone in prune(kube, secrets, decided.prune):
            meta = gone.obj["metadata"]
            log.info("pruned", extra={**fields, "kind": "Secret", "child": f"{meta['namespace']}/{meta['name']}"})
        deployments = self._informer(DEPLOYMENT, MANAGED)
        for attachment in decided.attach:
            await ensure(kube, deployments, attachment, field_manager=self.field_manager)
        if obj is not None and decided.status is not None:
            obj = await write_status(kube, self._credentials(), obj, decided.status)
        if decided.consumed is not None and decided.consumed.name in live:
            await set_phase(kube, self._plans(), live[decided.consumed.name], decided.consumed,
                            {"controller": self.name, "object": decided.consumed.name})
        for finalizer in decided.finalizers_removed:
            assert obj is not None
            obj = await remove_finalizer(kube, self._credentials(), obj, finalizer)
        if decided.memory is None:
            self._credentials().forget(namespace, name)
            log.info("gone", extra=fields)

    async def _ensure_plan(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.runtime is not None
        return (await ensure(self.runtime.kube, self._plans(), plan)).obj

    async def _ensure(self, owner: Mapping[str, Any], secret: dict[str, Any]) -> None:
        """Apply a derived Secret unless it is as derived; a field someone else changed is put back and named."""
        assert self.runtime is not None
        meta = secret["metadata"]
        done = await ensure(self.runtime.kube, self._informer(SECRET, MANAGED), secret,
                            field_manager=self.field_manager)
        if done.written and (drifted := drift(done.before, secret, self.field_manager)) is not None:
            # paths and managers only: a derived Secret's drift is in its data, whose values are never named
            log.warning("drift corrected", extra={"controller": self.name, "object": owner["metadata"]["name"],
                                                  "kind": "Secret", "child": meta["name"],
                                                  "fields": [f.path for f in drifted.fields]})
            await record(self.runtime.recorder, owner, drift_note(drifted))


def _outcome(found: Material | Unreadable | str) -> str:
    """A read's outcome for the log: found (where), or why not, in words that carry no material."""
    if isinstance(found, Material):
        return f"found ({found.origin})"
    if isinstance(found, Unreadable):
        return f"{found.reason}: {found.message}"
    return f"missing: {found}"


def _probe(check: looks.CheckRequest, insecure: Sequence[str]) -> list[Verdict]:
    """One half checked against each of its registries and repository URLs (blocking)."""
    return [*(probe_registry(host, check.login, insecure=insecure) for host in check.registries),
            *(probe_git(url, check.login) for url in check.repositories)]
