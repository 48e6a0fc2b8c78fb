"""The SourceCredential controller (spec §3.12), the edge: reads a credential, its unsealed Secrets and our
Deployments; asks lifecycle.credential_outputs what to derive; applies the repo-creds and pull Secrets and the
Deployments' imagePullSecrets under its own field manager, puts back a hand edit (DriftCorrected), prunes what is no
longer derived, and removes it all before the credential goes (a finalizer). A coverage change that takes something
from an Application (lifecycle.credential_gate, compatibility.gate) waits for its MigrationPlan: until it is approved
nothing derived changes, a deletion included (the finalizer holds the credential). Never logs material."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compatibility.crd import MIGRATION_PLAN
from compatibility.gate import APPLIED, ExistingPlan, GateDecision, PlanPhase, decide_credential
from compatibility.migrationplan import CREDENTIAL_LABEL as PLAN_CREDENTIAL_LABEL
from compatibility.text import approve_command
from controller_runtime.finalizers import add_finalizer, remove_finalizer
from controller_runtime.informer import Informer
from controller_runtime.kinds import GroupVersionKind, KindLike
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key, itself
from controller_runtime.outcomes import Done, NextCheck, Outcome, soonest
from controller_runtime.writes import ensure, prune, write_status
from lifecycle import credential_checks as checks
from lifecycle import credential_gate as gate
from lifecycle import credential_outputs as outputs
from lifecycle import openbao as bao
from lifecycle.drift import drift, drift_note
from lifecycle.plans import CREDENTIAL_PLAN_LABELS
from lifecycle.sourcecredential import SOURCE_CREDENTIAL, Backend, Credential, Half, read
from reconciler.credential_probes import probe_git, probe_registry
from reconciler.openbao import OpenBao
from reconciler.plans import ensure as ensure_plans
from reconciler.plans import set_phase
from reconciler.stack_sources import in_thread
from reconciler.status import record
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL
from toolchain.timestamps import time_now

__all__ = ["SourceCredentialController"]

log = logging.getLogger("apprafter.sourcecredential")

SECRET = GroupVersionKind("v1", "Secret")
DEPLOYMENT = GroupVersionKind("apps/v1", "Deployment")
ARGO_APPLICATION = GroupVersionKind("argoproj.io/v1alpha1", "Application")
MANAGED = {MANAGED_BY_LABEL: MANAGED_BY}
CHECK_INTERVAL = 600.0  # seconds between two checks of a half whose last check gave a verdict
HalfKey = tuple[str, str]  # (credential, "git" | "registry")
Found = outputs.Material | outputs.Unreadable | str | None  # a half's material, why there is none, or can't tell


class SourceCredentialController:
    """Derives and keeps the Secrets of the SourceCredentials in the operator's namespace (docs/operator.md)."""

    name = "sourcecredential"
    primary: KindLike = SOURCE_CREDENTIAL

    def __init__(self, records_namespace: str = "apprafter-system", argocd_namespace: str = "argocd",
                 field_manager: str = "apprafter-operator-credentials", gate: str = "present",
                 check_interval: float = CHECK_INTERVAL, max_backoff: float = 300.0,
                 openbao: OpenBao | None = None) -> None:
        self.records_namespace = records_namespace
        self.gate = gate
        self.check_interval = check_interval
        self.max_backoff = max_backoff
        self.checked: dict[HalfKey, checks.Checked] = {}  # the last check of each half (memory only)
        self.openbao = openbao  # None: no --openbao-address (an openBaoPath half is Present Unknown)
        self.reads: dict[HalfKey, bao.Read] = {}  # the last OpenBao read of each openBaoPath half (memory only)
        self.namespaces: tuple[str, ...] = (records_namespace,)
        self.argocd_namespace = argocd_namespace
        self.field_manager = field_manager
        self.runtime: Runtime | None = None

    def watches(self) -> Sequence[Watch]:
        records = (self.records_namespace,)
        return [Watch(SOURCE_CREDENTIAL, {}, itself, records), Watch(SECRET, {}, self._material_of, records),
                Watch(SECRET, MANAGED, self._derived_from), Watch(DEPLOYMENT, MANAGED, self._deployment_of),
                Watch(MIGRATION_PLAN, CREDENTIAL_PLAN_LABELS, self._plan_of, records),
                Watch(ARGO_APPLICATION, {}, self._argo_application_of, (self.argocd_namespace,))]

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _informer(self, kind: KindLike, labels: Mapping[str, str], namespaces: tuple[str, ...] = ()) -> Informer:
        assert self.runtime is not None
        return self.runtime.informer(kind, labels, namespaces)

    def _objects(self) -> list[dict[str, Any]]:
        return self._informer(SOURCE_CREDENTIAL, {}, self.namespaces).items(self.records_namespace)

    def _credentials(self, carried: tuple[str, Credential | None] | None = None) -> list[Credential]:
        """What each credential covers now: a held one (its change waits for a plan) what it last applied, a deleted
        one nothing; `carried` is the one this pass carries out (None: being deleted), as it is now."""
        out = []
        for obj in self._objects():
            if carried is not None and obj["metadata"]["name"] == carried[0]:
                out += [carried[1]] if carried[1] is not None else []
                continue
            held = (obj.get("status") or {}).get("migrationPlan")
            if held:
                out.append(_as_applied(read(obj), gate.applied_coverage(obj.get("status"))))
            elif not obj["metadata"].get("deletionTimestamp"):
                out.append(read(obj))
        return out

    def _covering(self, half: str, target: str) -> list[Key]:
        """The credentials whose spec or last-applied coverage covers a repository URL or an image."""
        names = []
        for obj in self._objects():
            for coverage in (gate.coverage_of(read(obj)), gate.applied_coverage(obj.get("status"))):
                entries = getattr(coverage, half) if coverage is not None else None
                if entries and (gate.covers_repository(entries, target) if half == "git"
                                else gate.covers_image(entries, target)):
                    names.append(obj["metadata"]["name"])
        return self._keys(names)

    def _plan_of(self, plan: Mapping[str, Any]) -> Iterable[Key]:
        name = (plan["metadata"].get("labels") or {}).get(PLAN_CREDENTIAL_LABEL)
        return self._keys([name] if name else [])

    def _argo_application_of(self, application: Mapping[str, Any]) -> Iterable[Key]:
        return [key for user in gate.repository_users([application]) for key in self._covering("git", user.target)]

    def _keys(self, names: Iterable[str]) -> list[Key]:
        return [(self.records_namespace, n) for n in sorted(set(names))]

    def _material_of(self, secret: Mapping[str, Any]) -> Iterable[Key]:
        name = secret["metadata"]["name"]
        return self._keys(c.name for c in self._credentials()
                          if any(h is not None and h.backend.sealed_secret == name for h in (c.git, c.registry)))

    def _derived_from(self, secret: Mapping[str, Any]) -> Iterable[Key]:
        source = outputs.derived_from(secret)
        return self._keys([source[1]] if source and source[0] == self.records_namespace else [])

    def _deployment_of(self, deployment: Mapping[str, Any]) -> Iterable[Key]:
        image = outputs.deployment_image(deployment)
        attached = set(_attached(deployment))
        holders = self._keys(c.name for c in self._credentials() if outputs.pull_secret_name(c.name) in attached)
        return sorted({*(self._covering("registry", image) if image else []), *holders})

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        kube = self.runtime.kube
        cache = self._informer(SOURCE_CREDENTIAL, {}, self.namespaces)
        obj = await kube.get(SOURCE_CREDENTIAL, name, namespace)
        decision: GateDecision | None = None
        live: dict[str, dict[str, Any]] = {}
        if obj is not None:
            cache.update(obj)
            decision, live = await self._gate(obj)
            if not decision.allowed:
                return await self._hold(obj, decision)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            await self._prune(name, keep=())
            await self._attach(name, (name, None))
            await self._consumed(decision, live)
            if obj is not None:
                await remove_finalizer(kube, cache, obj, outputs.FINALIZER)
            cache.forget(namespace, name)
            for half_name in ("git", "registry"):
                self.checked.pop((name, half_name), None)
                self.reads.pop((name, half_name), None)
            log.info("gone", extra={"controller": self.name, "namespace": namespace, "object": name})
            return Done()
        obj = await add_finalizer(kube, cache, obj, outputs.FINALIZER)
        credential = read(obj)
        materials = self._informer(SECRET, {}, self.namespaces)
        found: dict[str, Found] = {}
        for half_name, half in (("git", credential.git), ("registry", credential.registry)):
            if half is not None and half.backend.sealed_secret:
                secret = materials.get(namespace, half.backend.sealed_secret)
                found[half_name] = outputs.material(secret, half.backend.sealed_secret)
        requested = checks.check_request(obj["metadata"].get("annotations"))
        read_waits = await self._read_openbao(credential, found)
        latest, waits, derives = await self._check(credential, found, requested)
        waits += read_waits
        desired: list[dict[str, Any]] = []
        git, registry = found.get("git"), found.get("registry")
        if isinstance(git, outputs.Material) and derives["git"]:
            desired += outputs.repo_creds(credential, git, self.argocd_namespace)
        if isinstance(registry, outputs.Material) and derives["registry"]:
            deployments = self._informer(DEPLOYMENT, MANAGED).items()
            covered = outputs.covered_deployments(credential, deployments)
            for ns in sorted({d["metadata"]["namespace"] for d in covered}):
                desired.append(outputs.pull_secret(credential, registry, ns))
        for secret in desired:
            await self._ensure(obj, secret)
        # a half held by the `confirmed` gate, or whose backend could not tell, keeps what it derived before as it was
        holding = {h for h in ("git", "registry") if isinstance(found.get(h), outputs.Unreadable)
                   or (isinstance(found.get(h), outputs.Material) and not derives[h])}
        held = [s for s in self._derived(name) if _half_of(s) in holding]
        kept = [*desired, *held]
        await self._prune(name, keep=[(s["metadata"]["namespace"], s["metadata"]["name"]) for s in kept])
        await self._attach(name, (name, credential))
        repo_names = [s["metadata"]["name"] for s in kept if _half_of(s) == "git"]
        pulls = [f"{s['metadata']['namespace']}/{s['metadata']['name']}" for s in kept if _half_of(s) == "registry"]
        await self._write_status(obj, outputs.status(credential, found, obj.get("status") or {}, repo_names, pulls,
                                                     int(obj["metadata"].get("generation") or 0), time_now(),
                                                     latest, requested))
        await self._consumed(decision, live)
        return Done(soonest(waits))

    # --- the gate (spec §3.8) ------------------------------------------------------------------------------

    def _plans(self) -> Informer:
        return self._informer(MIGRATION_PLAN, CREDENTIAL_PLAN_LABELS, self.namespaces)

    def _users(self) -> list[gate.User]:
        """What the coverage serves: the repositories Argo CD's Applications sync, the images our Deployments run."""
        argo = self._informer(ARGO_APPLICATION, {}, (self.argocd_namespace,)).items(self.argocd_namespace)
        return outputs.users(argo, self._informer(DEPLOYMENT, MANAGED).items())

    async def _gate(self, obj: dict[str, Any]) -> tuple[GateDecision, dict[str, dict[str, Any]]]:
        """The credential's plan (its last-applied coverage -> the spec's, or deletion), decided, and its
        MigrationPlans (name -> plan) once ensured and moved to their phases."""
        assert self.runtime is not None
        meta = obj["metadata"]
        name, namespace = meta["name"], meta["namespace"]
        deleting = bool(meta.get("deletionTimestamp"))
        result = gate.credential_plan(name, namespace, gate.applied_coverage(obj.get("status")),
                                      None if deleting else gate.coverage_of(read(obj)), self._users())
        cache = self._plans()
        mine = [p for p in cache.items(namespace)
                if (p["metadata"].get("labels") or {}).get(PLAN_CREDENTIAL_LABEL) == name]
        decision = decide_credential(result, [ExistingPlan.of(p) for p in mine], owner_uid=str(meta["uid"]))
        fields = {"controller": self.name, "namespace": namespace, "object": name}
        if decision.migration_plan is not None or decision.phases:
            live = await ensure_plans(
                self.runtime.kube, cache, self.runtime.recorder, obj, {p["metadata"]["name"]: p for p in mine},
                decision.migration_plan, decision.phases, namespace=namespace, apply=self._ensure_plan,
                created=lambda plan: f"MigrationPlan {plan} created: the change takes coverage from an Application; "
                f"approve it with `{approve_command(plan, namespace)}`", log_fields=fields)
        else:
            live = {p["metadata"]["name"]: p for p in mine}
        if decision.outcome != "apply":
            log.info("gate", extra={**fields, "outcome": decision.outcome,
                                    "plan": decision.waiting_for or decision.consumed})
        return decision, live

    async def _ensure_plan(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.runtime is not None
        return (await ensure(self.runtime.kube, self._plans(), plan)).obj

    async def _hold(self, obj: dict[str, Any], decision: GateDecision) -> Outcome:
        """Nothing derived changes while the plan waits; the status says which plan (its coverage stays the
        last-applied one). The plan's approval is a watch event."""
        previous = {k: v for k, v in (obj.get("status") or {}).items() if k != "migrationPlan"}
        await self._write_status(obj, {**previous, "migrationPlan": decision.waiting_for})
        return Done()

    async def _consumed(self, decision: GateDecision | None, live: Mapping[str, dict[str, Any]]) -> None:
        """The approved plan this pass carried out is marked applied."""
        if decision is None or decision.consumed is None or decision.consumed not in live:
            return
        assert self.runtime is not None
        await set_phase(
            self.runtime.kube, self._plans(), live[decision.consumed],
            PlanPhase(decision.consumed, APPLIED, "applied: the credential's coverage change is carried out"),
            {"controller": self.name, "object": decision.consumed})

    async def _read_openbao(self, credential: Credential, found: dict[str, Found]) -> list[NextCheck]:
        """Each openBaoPath half's material into `found`: read from OpenBao when due (never read, its path changed,
        the check interval passed, or its backoff after a read that could not tell), else as last read; one read per
        path and pass, in a thread. When each is due again."""
        waits: list[NextCheck] = []
        this_pass: dict[str, outputs.Material | outputs.Unreadable | str] = {}
        for half_name, half in (("git", credential.git), ("registry", credential.registry)):
            path = half.backend.openbao_path if half is not None else None
            key = (credential.name, half_name)
            if path is None:
                self.reads.pop(key, None)
                continue
            if self.openbao is None:
                found[half_name] = bao.not_configured()
                continue
            last = self.reads.get(key)
            if path not in this_pass and bao.wait_before_read(last, path, time.monotonic(), self.check_interval,
                                                              self.max_backoff).due:
                kv = bao.kv_path(path)
                this_pass[path] = (await in_thread(functools.partial(self.openbao.read, kv)) if kv is not None
                                   else outputs.Unreadable(bao.BACKEND_UNAVAILABLE, "not an openBaoPath"))
                outcome = this_pass[path]
                log.info("read", extra={"controller": self.name, "object": credential.name, "half": half_name,
                                        "path": path, "outcome": _outcome(outcome)})
            if path in this_pass:
                last = self.reads[key] = bao.after_read(last, path, this_pass[path], time.monotonic())
            assert last is not None
            found[half_name] = last.found
            waits.append(bao.wait_before_read(last, path, time.monotonic(), self.check_interval, self.max_backoff))
        return waits

    async def _check(self, credential: Credential, found: Mapping[str, Found], requested: str) -> tuple[
            dict[str, checks.Checked | None], list[NextCheck], dict[str, bool]]:
        """Check each half whose material is there and that is due (changed, requested, or its interval or backoff
        passed) against its servers, in a thread, bounded; its last check, when the next is due, whether it
        derives."""
        latest: dict[str, checks.Checked | None] = {}
        waits: list[NextCheck] = []
        derives: dict[str, bool] = {}
        for half_name, half in (("git", credential.git), ("registry", credential.registry)):
            login = found.get(half_name)
            key = (credential.name, half_name)
            if half is None or not isinstance(login, outputs.Material):
                self.checked.pop(key, None)
                derives[half_name] = False
                continue
            current = checks.fingerprint(half, login.username, login.password)
            last = self.checked.get(key)
            if checks.wait_before_check(last, current, time.monotonic(), self.check_interval, self.max_backoff,
                                        requested).due:
                verdict = await in_thread(functools.partial(_probe, half_name, half, login))
                last = self.checked[key] = checks.after_check(last, current, verdict, time.monotonic(), time_now(),
                                                              requested)
                log.info("checked", extra={"controller": self.name, "object": credential.name, "half": half_name,
                                           "state": verdict.state, "detail": verdict.message})
            latest[half_name] = last
            waits.append(checks.wait_before_check(last, current, time.monotonic(), self.check_interval,
                                                  self.max_backoff, requested))
            derives[half_name] = checks.derives(self.gate, True, last, current)
        return latest, waits, derives

    def _derived(self, credential: str) -> list[dict[str, Any]]:
        """The Secrets derived from `credential` that the cache holds."""
        return [s for s in self._informer(SECRET, MANAGED).items()
                if outputs.derived_from(s) == (self.records_namespace, credential)]

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

    async def _prune(self, credential: str, keep: Sequence[tuple[str, str]]) -> None:
        """Delete the Secrets derived from `credential` that this pass does not derive (exactly those seen)."""
        assert self.runtime is not None
        unkept = [s for s in self._derived(credential)
                  if (s["metadata"]["namespace"], s["metadata"]["name"]) not in keep]
        async for gone in prune(self.runtime.kube, self._informer(SECRET, MANAGED), unkept):
            meta = gone.obj["metadata"]
            log.info("pruned", extra={"controller": self.name, "object": credential, "kind": "Secret",
                                      "child": f"{meta['namespace']}/{meta['name']}"})

    async def _attach(self, credential: str, carried: tuple[str, Credential | None]) -> None:
        """Give each Deployment this credential covers, or once covered, the pull secrets every credential now
        gives its image (one field manager holds the whole list, so it is computed from all credentials, `carried`
        as this pass carries it out)."""
        assert self.runtime is not None
        credentials = self._credentials(carried)
        mine = outputs.pull_secret_name(credential)
        cache = self._informer(DEPLOYMENT, MANAGED)
        for deployment in cache.items():
            image = outputs.deployment_image(deployment)
            attached = _attached(deployment)
            wanted = outputs.pull_secrets_for(image, str(deployment["metadata"]["namespace"]), credentials)
            if mine not in wanted and mine not in attached:
                continue
            await ensure(self.runtime.kube, cache, outputs.attachment(deployment, wanted),
                         field_manager=self.field_manager)

    async def _write_status(self, obj: dict[str, Any], document: dict[str, Any]) -> None:
        assert self.runtime is not None
        await write_status(self.runtime.kube, self._informer(SOURCE_CREDENTIAL, {}, self.namespaces), obj, document)


def _attached(deployment: Mapping[str, Any]) -> list[str]:
    """The pull secrets a Deployment's pod template references, sorted."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return sorted(str(s["name"]) for s in spec.get("imagePullSecrets") or [] if s.get("name"))


def _outcome(found: Found) -> str:
    """A read's outcome for the log: found (where), or why not, in words that carry no material."""
    if isinstance(found, outputs.Material):
        return f"found ({found.origin})"
    if isinstance(found, outputs.Unreadable):
        return f"{found.reason}: {found.message}"
    return f"missing: {found}"


def _half_of(secret: Mapping[str, Any]) -> str:
    """Which half a derived Secret comes from: a repo-creds template is git's, a pull secret the registry's."""
    return "registry" if secret.get("type") == "kubernetes.io/dockerconfigjson" else "git"


def _probe(half_name: str, half: Half, login: outputs.Material) -> checks.Verdict:
    """One half checked against each of its registries or repository prefixes (blocking)."""
    if half_name == "registry":
        return checks.combined(probe_registry(host, login) for host in checks.registry_hosts(half))
    return checks.combined(probe_git(url, login) for url in checks.git_urls(half))


def _as_applied(credential: Credential, applied: gate.Coverage | None) -> Credential:
    """A held credential as it was last applied: its coverage (hosts and namespaces) from the status, the backends of
    its spec."""
    if applied is None:
        return credential

    def half(spec: Half | None, entries: tuple[str, ...] | None,
             namespaces: tuple[str, ...] | None = None) -> Half | None:
        return None if entries is None else Half(spec.backend if spec else Backend(None, None), entries, namespaces)

    return credential._replace(git=half(credential.git, applied.git),
                               registry=half(credential.registry, applied.registry, applied.namespaces))
