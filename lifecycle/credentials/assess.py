"""One pass of the SourceCredential controller (spec §3.12) as pure decisions: the gate on its coverage change (held:
nothing derived changes, the status names the plan), what to read and check outside the cluster first, then the
Secrets to derive, those a half keeps as they were, those to prune, the Deployments' pull-secret attachments, the
status (per half Present and Valid, the coverage as derived: the gate's baseline), the finalizer, the plan carried
out and when to look again; and once it is deleted, what goes with it.
reconciler/sourcecredential.py reads the cluster, calls `assess` (again after each look it asks for), writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from compatibility.gate import APPLIED, ExistingPlan, GateDecision, PlanPhase, decide_credential
from compatibility.text import approve_command
from controller_runtime.outcomes import NextCheck, soonest
from lifecycle.conditions import Condition, render
from lifecycle.credentials import looks
from lifecycle.credentials.checks import Checked, check_request, derives, valid_condition
from lifecycle.credentials.coverage import users
from lifecycle.credentials.gate import planned
from lifecycle.credentials.material import Found, Material, Unreadable
from lifecycle.credentials.outputs import (
    FINALIZER,
    attachments,
    derived_by,
    half_of,
    pull_secret,
    repo_creds,
    repository_secrets,
    served_namespaces,
)
from lifecycle.credentials.spec import HALVES, Credential, argocd_url, pull_key, read
from lifecycle.plans import credential_of

__all__ = ["CHECK_INTERVAL", "Assessment", "Cluster", "Settings", "assess", "half_conditions", "held", "material_names",
           "status", "status_fields"]

CHECK_INTERVAL = 600.0  # seconds between two checks of a half whose last check gave a verdict


class Settings(NamedTuple):
    """How the controller runs: its records namespace (the credentials, their material and plans), Argo CD's
    namespace (the repo-creds), the coverage gate (`present` | `confirmed`), and how often it looks outside."""

    records_namespace: str = "apprafter-system"
    argocd_namespace: str = "argocd"
    gate: str = "present"
    timing: looks.Timing = looks.Timing(CHECK_INTERVAL, 300.0, False)


class Cluster(NamedTuple):
    """What a pass reads of the cluster (the caches): every SourceCredential and credential-scope MigrationPlan of
    the records namespace, the unsealed Secrets the credential's halves name (by name; None: not found), every Secret
    a credential derived, our Deployments, and Argo CD's Applications."""

    credentials: Sequence[Mapping[str, Any]]
    plans: Sequence[Mapping[str, Any]]
    materials: Mapping[str, Mapping[str, Any] | None]
    derived: Sequence[Mapping[str, Any]]
    deployments: Sequence[Mapping[str, Any]]
    argo_applications: Sequence[Mapping[str, Any]]
    applications: Sequence[Mapping[str, Any]] = ()  # ours (apprafter.io): a pull secret precedes the first Deployment


class Assessment(NamedTuple):
    """What a pass does, in this order: the gate's plan and phases (`decision`; `created` the Event when its plan is
    created), the finalizers added, the Secrets derived and those pruned, the attachments, the status (None: none
    written), the finalizers removed, the plan carried out (marked applied), the controller's memory of the
    credential (None: forgotten, the credential is gone) and when to look again."""

    decision: GateDecision | None
    created: str
    finalizers_added: tuple[str, ...]
    derive: list[dict[str, Any]]
    prune: list[Mapping[str, Any]]
    attach: list[dict[str, Any]]
    status: dict[str, Any] | None
    finalizers_removed: tuple[str, ...]
    consumed: PlanPhase | None
    memory: looks.Memory | None
    next_check: NextCheck | None = None


def material_names(obj: Mapping[str, Any]) -> list[str]:
    """The unsealed Secrets a SourceCredential's halves name (what Cluster.materials holds)."""
    credential = read(obj)
    return sorted({h.backend.sealed_secret for h in (credential.git, credential.registry)
                   if h is not None and h.backend.sealed_secret})


def assess(name: str, obj: Mapping[str, Any] | None, cluster: Cluster, memory: looks.Memory, observed: looks.Observed,
           settings: Settings, *, now: float, timestamp: str) -> looks.Looks | Assessment:
    """One pass over the SourceCredential `name` (`obj`: as the API server has it now, None once it is gone), given
    what the controller remembers of it and what this pass looked at outside so far: what to look at first (Looks:
    assess again with what was found), else what to do."""
    if obj is None:
        return _removed(name, None, None, cluster, settings)
    meta = obj["metadata"]
    deleting = bool(meta.get("deletionTimestamp"))
    mine = [p for p in cluster.plans if credential_of(p) == name]
    plan = planned(obj, None if deleting else obj, users(cluster.argo_applications, cluster.deployments))
    decision = decide_credential(plan, [ExistingPlan.of(p) for p in mine], owner_uid=str(meta["uid"]))
    if not decision.allowed:
        return Assessment(decision, _created(decision, meta["namespace"]), (), [], [], [],
                          held(obj.get("status") or {}, decision.waiting_for), (), None, memory)
    if deleting:
        return _removed(name, obj, decision, cluster, settings)
    return _applied(obj, decision, cluster, memory, observed, settings, now, timestamp)


def _created(decision: GateDecision, namespace: str) -> str:
    plan = decision.waiting_for or ""
    return (f"MigrationPlan {plan} created: the change takes coverage from an Application; approve it with "
            f"`{approve_command(plan, namespace)}`")


def _consumed(decision: GateDecision | None) -> PlanPhase | None:
    if decision is None or decision.consumed is None:
        return None
    return PlanPhase(decision.consumed, APPLIED, "applied: the credential's coverage change is carried out")


def _removed(name: str, obj: Mapping[str, Any] | None, decision: GateDecision | None, cluster: Cluster,
             settings: Settings) -> Assessment:
    """A credential gone or being deleted (its deletion allowed): every Secret it derived pruned, its pull secret
    taken out of the Deployments' references, its finalizer removed, the controller's memory of it forgotten."""
    finalizers = (obj or {}).get("metadata", {}).get("finalizers") or []
    return Assessment(decision, "", (), [], derived_by(cluster.derived, settings.records_namespace, name),
                      attachments(name, None, cluster.credentials, cluster.deployments), None,
                      (FINALIZER,) if FINALIZER in finalizers else (), _consumed(decision), None)


def _applied(obj: Mapping[str, Any], decision: GateDecision, cluster: Cluster, memory: looks.Memory,
             observed: looks.Observed, settings: Settings, now: float, timestamp: str) -> looks.Looks | Assessment:
    """A live credential whose change (if any) may be carried out: its material looked at, then derived."""
    meta = obj["metadata"]
    credential, timing = read(obj), settings.timing
    requested = check_request(meta.get("annotations"))
    due_reads = looks.reads_due(credential, memory, observed, now, timing)
    if due_reads:
        return looks.Looks(reads=due_reads)
    found, reads, read_waits = looks.materials(credential, cluster.materials, memory, observed, now, timing)
    due_checks = looks.checks_due(credential, found, memory, observed, now, timing, requested)
    if due_checks:
        return looks.Looks(checks=due_checks)
    last, current, check_waits = looks.checked(credential, found, memory, observed, now, timestamp, timing,
                                               requested)
    deriving = {h: h in current and derives(settings.gate, True, last.get(h), current[h]) for h in HALVES}
    derive = _derive(credential, found, deriving, cluster, settings.argocd_namespace)
    # a half held by the `confirmed` gate, or whose backend could not tell, keeps what it derived before as it was
    holding = {h for h in HALVES if isinstance(found.get(h), Unreadable)
               or (isinstance(found.get(h), Material) and not deriving[h])}
    derived = derived_by(cluster.derived, settings.records_namespace, credential.name)
    kept = [*derive, *(s for s in derived if half_of(s) in holding)]
    keys = {_key(s) for s in kept}
    repo_names = [s["metadata"]["name"] for s in kept if half_of(s) == "git"]
    pulls = [f"{s['metadata']['namespace']}/{s['metadata']['name']}" for s in kept if half_of(s) == "registry"]
    finalizers = meta.get("finalizers") or []
    return Assessment(
        decision, "", () if FINALIZER in finalizers else (FINALIZER,), derive,
        [s for s in derived if _key(s) not in keys],
        attachments(credential.name, credential, cluster.credentials, cluster.deployments),
        status(credential, found, obj.get("status") or {}, repo_names, pulls, int(meta.get("generation") or 0),
               timestamp, {h: last.get(h) for h in current}, requested),
        (), _consumed(decision), looks.Memory(reads, last), soonest([*read_waits, *check_waits]))


def _derive(credential: Credential, found: Mapping[str, Found], deriving: Mapping[str, bool], cluster: Cluster,
            argocd_namespace: str) -> list[dict[str, Any]]:
    """The Secrets the halves that derive write now: the repo-creds (or, scoped to Argo CD projects, a repository
    Secret per repository an Application of those projects syncs), a pull secret per namespace it serves."""
    out: list[dict[str, Any]] = []
    git, registry = found.get("git"), found.get("registry")
    if isinstance(git, Material) and deriving["git"]:
        assert credential.git is not None
        out += (repo_creds(credential, git, argocd_namespace) if credential.git.projects is None
                else repository_secrets(credential, git, argocd_namespace, cluster.argo_applications))
    if isinstance(registry, Material) and deriving["registry"]:
        out += [pull_secret(credential, registry, ns)
                for ns in served_namespaces(credential, cluster.deployments, cluster.applications)]
    return out


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(obj["metadata"].get("namespace") or ""), str(obj["metadata"]["name"])


# --- the status (what a pass writes; messages name keys and objects, never a value of the material) ---------------

def half_conditions(found: Found, checked: Checked | None = None) -> list[Condition]:
    """Present and Valid of one half: Present Unknown when the backend could not tell; Valid is the last check's
    verdict (lifecycle.credentials.checks), Unknown (Unverified) while there is no material to check."""
    if isinstance(found, Unreadable):
        present = Condition("Present", "Unknown", found.reason, found.message)
    elif isinstance(found, Material):
        present = Condition("Present", "True", "MaterialFound", "the material was found with its keys"
                            + (f" ({found.origin})" if found.origin else ""))
    else:
        present = Condition("Present", "False", "MaterialMissing", str(found))
    unchecked = None if isinstance(found, Material) else "no material to check"
    return [present, valid_condition(checked if isinstance(found, Material) else None, unchecked)]


def status_fields(credential: Credential, repo_secrets: Sequence[str], pulls: Sequence[str]) -> dict[str, Any]:
    """What the status says each half covers (as derived: Argo CD's urls, the pull secret's keys) and the derived
    Secrets by name."""
    fields: dict[str, Any] = {"repoCredsSecrets": sorted(repo_secrets) or None, "pullSecrets": sorted(pulls) or None}
    if credential.git is not None:
        fields["git"] = {"repoPrefixes": sorted(argocd_url(p) for p in credential.git.covers)}
        if credential.git.projects is not None:
            fields["git"]["projects"] = sorted(credential.git.projects)
    if credential.registry is not None:
        fields["registry"] = {"hosts": sorted(pull_key(h) for h in credential.registry.covers)}
        if credential.registry.namespaces is not None:
            fields["registry"]["namespaces"] = sorted(credential.registry.namespaces)
    return fields


def status(credential: Credential, found: Mapping[str, Found], previous: Mapping[str, Any],
           repo_secrets: Sequence[str], pulls: Sequence[str], generation: int, timestamp: str,
           checks: Mapping[str, Checked | None] | None = None, check_request: str = "") -> dict[str, Any]:
    """The whole status a pass writes: per half its conditions (times kept while a status holds), coverage and
    lastValidated, the derived Secrets, and the check request this pass answered. `found` holds each half's
    material, or why there is none (a string: Present False; Unreadable: Unknown); `checks` each half's last check."""
    out: dict[str, Any] = {"observedGeneration": generation}
    if check_request:
        out["checkRequest"] = check_request
    fields = status_fields(credential, repo_secrets, pulls)
    for name, half in (("git", credential.git), ("registry", credential.registry)):
        if half is None:
            continue
        before = (previous.get(name) or {}).get("conditions") or []
        checked = (checks or {}).get(name)
        out[name] = {"conditions": render(half_conditions(found.get(name), checked), before, generation,
                                          timestamp), **fields[name]}
        if checked is not None and isinstance(found.get(name), Material):
            out[name]["lastValidated"] = checked.timestamp
    out.update({k: v for k, v in fields.items() if k not in ("git", "registry") and v is not None})
    return out


def held(previous: Mapping[str, Any], plan: str | None) -> dict[str, Any]:
    """The status while a change waits for its plan: as it was (the coverage last applied, the Secrets derived), and
    which plan."""
    return {**{k: v for k, v in previous.items() if k != "migrationPlan"}, "migrationPlan": plan}
