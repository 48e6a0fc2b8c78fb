"""One SourceCredential pass decided without a cluster (lifecycle.credentials.assess): what it looks at first, what
it derives, keeps, prunes and attaches, the status, the finalizer and the next check; a held change that changes
nothing but the status; a deletion that takes everything away."""

from __future__ import annotations

import base64
import copy
from typing import Any

from lifecycle.credentials import looks
from lifecycle.credentials.assess import Assessment, Cluster, Settings, assess, material_names
from lifecycle.credentials.checks import INVALID, UNVERIFIED, VALID, Verdict
from lifecycle.credentials.material import Material, Unreadable
from lifecycle.credentials.openbao import KvPath
from lifecycle.credentials.outputs import FINALIZER, pull_secret, pull_secret_name, repo_creds
from lifecycle.credentials.spec import read
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL

RECORDS = "apprafter-system"
SETTINGS = Settings(RECORDS, "argocd", "present", looks.Timing(600.0, 60.0, True))
LOGIN = Material("deploy", "pw-never-in-a-message")
NOW, STAMP = 1000.0, "2026-01-02T03:04:05Z"
FORGOTTEN, ACCEPTED = looks.Memory(), Verdict(VALID, "accepted")
SPEC = {"git": {"backend": {"sealedSecretRef": {"name": "login"}}, "repoPrefixes": ["github.com/myorg/"]},
        "registry": {"backend": {"sealedSecretRef": {"name": "login"}}, "hosts": ["ghcr.io/myorg/"]}}


def credential(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
               **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "SourceCredential",
            "metadata": {"name": "myorg", "namespace": RECORDS, "uid": "uid-1", "generation": 2, **meta},
            "spec": copy.deepcopy(spec or SPEC), "status": status or {}}


def deployment(namespace: str, image: str, pull_secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    template: dict[str, Any] = {"containers": [{"name": "app", "image": image}]}
    if pull_secrets:
        template["imagePullSecrets"] = [{"name": n} for n in pull_secrets]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace,
                         "labels": {MANAGED_BY_LABEL: MANAGED_BY, NAME_LABEL: "web"}},
            "spec": {"template": {"spec": template}}}


def unsealed() -> dict[str, Any]:
    return {"data": {"username": base64.b64encode(b"deploy").decode(),
                     "password": base64.b64encode(LOGIN.password.encode()).decode()}}


def cluster(obj: dict[str, Any] | None, derived: list[dict[str, Any]] | None = None,
            deployments: list[dict[str, Any]] | None = None, plans: list[dict[str, Any]] | None = None,
            argo: list[dict[str, Any]] | None = None) -> Cluster:
    return Cluster([obj] if obj else [], plans or [], {n: unsealed() for n in material_names(obj)} if obj else {},
                   derived or [], [deployment("shop", "ghcr.io/myorg/web:1")] if deployments is None else deployments,
                   argo or [])


def run(name: str, obj: dict[str, Any] | None, world: Cluster, memory: looks.Memory = FORGOTTEN,
        verdict: Verdict = ACCEPTED, settings: Settings = SETTINGS,
        now: float = NOW) -> tuple[Assessment, list[looks.Looks]]:
    """assess, answering each look it asks for as an edge would (OpenBao has the login; each check says `verdict`)."""
    observed, asked = looks.Observed(), []
    while True:
        decided = assess(name, obj, world, memory, observed, settings, now=now, timestamp=STAMP)
        if isinstance(decided, Assessment):
            return decided, asked
        asked.append(decided)
        assert not any(str(r.path) in observed.reads for r in decided.reads)  # never asks twice
        assert not any(c.half in observed.verdicts for c in decided.checks)
        observed = looks.Observed({**observed.reads, **{str(r.path): LOGIN for r in decided.reads}},
                                  {**observed.verdicts, **{c.half: [verdict] * len(c.registries + c.repositories)
                                                           for c in decided.checks}})


def test_a_new_credential_is_checked_then_derives_attaches_and_says_so() -> None:
    obj = credential()
    decided, asked = run("myorg", obj, cluster(obj))
    assert [(c.half, c.registries, c.repositories, c.login) for a in asked for c in a.checks] == [
        ("git", (), ("https://github.com/myorg/",), LOGIN), ("registry", ("ghcr.io",), (), LOGIN)]
    assert decided.finalizers_added == (FINALIZER,) and decided.finalizers_removed == ()
    spec = read(obj)
    assert decided.derive == [*repo_creds(spec, LOGIN, "argocd"), pull_secret(spec, LOGIN, "shop")]
    assert decided.prune == [] and decided.consumed is None
    assert decided.attach == [{"apiVersion": "apps/v1", "kind": "Deployment",
                               "metadata": {"name": "web", "namespace": "shop"},
                               "spec": {"template": {"spec": {"imagePullSecrets": [
                                   {"name": pull_secret_name("myorg")}]}}}}]
    status = decided.status
    assert status is not None and status["pullSecrets"] == [f"shop/{pull_secret_name('myorg')}"]
    assert status["registry"]["lastValidated"] == STAMP and status["git"]["repoPrefixes"] == [
        "https://github.com/myorg/"]
    assert [c["reason"] for c in status["git"]["conditions"]] == ["MaterialFound", VALID]
    assert LOGIN.password not in str(status)
    assert decided.memory is not None and set(decided.memory.checks) == {"git", "registry"}
    assert decided.next_check is not None and decided.next_check.seconds == 600.0


def test_the_next_pass_looks_at_nothing_until_the_interval_passes() -> None:
    obj = credential(finalizers=[FINALIZER])
    first, _ = run("myorg", obj, cluster(obj))
    assert first.memory is not None
    again, asked = run("myorg", obj, cluster(obj), first.memory, now=NOW + 100)
    assert asked == [] and again.derive == first.derive and again.finalizers_added == ()
    assert again.next_check is not None and again.next_check.seconds == 500.0
    _, asked = run("myorg", obj, cluster(obj), first.memory, now=NOW + 600)
    assert [c.half for a in asked for c in a.checks] == ["git", "registry"]


def test_the_confirmed_gate_keeps_what_an_unverified_half_derived_and_prunes_the_rest() -> None:
    obj = credential(finalizers=[FINALIZER])
    spec = read(obj)
    kept = {**pull_secret(spec, LOGIN, "shop"), "metadata": {**pull_secret(spec, LOGIN, "shop")["metadata"]}}
    gone = {**pull_secret(spec, LOGIN, "old"), "metadata": {**pull_secret(spec, LOGIN, "old")["metadata"]}}
    stale = repo_creds(spec, LOGIN, "argocd")[0]
    decided, _ = run("myorg", obj, cluster(obj, derived=[kept, gone, stale]), verdict=Verdict(UNVERIFIED, "down"),
                     settings=SETTINGS._replace(gate="confirmed"))
    assert decided.derive == []  # nothing checked Valid: nothing written
    assert decided.prune == []  # both halves keep what they derived, as it was
    refused, _ = run("myorg", obj, cluster(obj, derived=[kept, gone, stale]), verdict=Verdict(INVALID, "no"),
                     settings=SETTINGS._replace(gate="confirmed"))
    assert refused.derive == [] and refused.prune == []
    present, _ = run("myorg", obj, cluster(obj, derived=[kept, gone, stale]), verdict=Verdict(UNVERIFIED, "down"))
    assert present.prune == [gone]  # the present gate derives anyway: a namespace no longer served loses its copy
    assert present.next_check is not None and present.next_check.seconds == 5.0  # backoff while it cannot tell


def test_an_openbao_half_is_read_first_and_kept_while_openbao_cannot_tell() -> None:
    spec = {"git": {"backend": {"openBaoPath": "secret/myorg/github"}, "repoPrefixes": ["github.com/myorg/"]}}
    obj = credential(spec, finalizers=[FINALIZER])
    decided, asked = run("myorg", obj, cluster(obj))
    assert [r for a in asked for r in a.reads] == [looks.ReadRequest("git", KvPath("secret", "myorg/github"))]
    assert [c.half for a in asked for c in a.checks] == ["git"]  # checked once read
    assert decided.derive == repo_creds(read(obj), LOGIN, "argocd")
    assert decided.memory is not None and set(decided.memory.reads) == {"git"}
    # OpenBao down at the next read: Present Unknown, what the half derived stays
    down = looks.Memory({"git": decided.memory.reads["git"]._replace(
        found=Unreadable("BackendUnavailable", "no answer"), unreadable_runs=1)}, decided.memory.checks)
    held, asked = run("myorg", obj, cluster(obj, derived=decided.derive), down, now=NOW + 1)
    assert asked == [] and held.derive == [] and held.prune == []
    assert held.status is not None and held.status["git"]["conditions"][0]["status"] == "Unknown"
    # no OpenBao configured: never read
    unconfigured, asked = run("myorg", obj, cluster(obj), settings=SETTINGS._replace(
        timing=looks.Timing(600.0, 60.0, False)))
    assert asked == [] and unconfigured.derive == []


def test_a_held_change_writes_only_the_status_naming_its_plan() -> None:
    applied = {"git": {"repoPrefixes": ["https://github.com/myorg/"]}, "registry": {"hosts": ["ghcr.io/myorg"]},
               "pullSecrets": ["shop/apprafter-pull-myorg"]}
    narrowed = copy.deepcopy(SPEC)
    narrowed["registry"]["hosts"] = ["ghcr.io/elsewhere/"]
    obj = credential(narrowed, applied, finalizers=[FINALIZER])
    memory = looks.Memory({}, {})
    decided, asked = run("myorg", obj, cluster(obj), memory)
    assert asked == [] and decided.decision is not None and decided.decision.outcome == "hold"
    plan = decided.decision.waiting_for
    assert plan and decided.decision.migration_plan is not None and plan in decided.created
    assert decided.status == {**applied, "migrationPlan": plan}
    assert (decided.derive, decided.prune, decided.attach, decided.finalizers_added) == ([], [], [], ())
    assert decided.memory is memory and decided.next_check is None


def test_a_deletion_nobody_loses_by_takes_everything_away() -> None:
    obj = credential(finalizers=[FINALIZER], deletionTimestamp="2026-01-01T00:00:00Z",
                     status={"registry": {"hosts": ["ghcr.io/myorg"]}})
    spec = read(obj)
    derived = [*repo_creds(spec, LOGIN, "argocd"), pull_secret(spec, LOGIN, "shop")]
    attached = deployment("shop", "ghcr.io/myorg/web:1", (pull_secret_name("myorg"),))
    world = cluster(obj, derived=derived, deployments=[attached, deployment("x", "nginx:1")])
    decided, asked = run("myorg", obj, world._replace(argo_applications=[]))
    assert decided.decision is not None and decided.decision.outcome == "hold"  # the image still uses it
    world = world._replace(deployments=[deployment("x", "nginx:1")])
    decided, asked = run("myorg", obj, world)
    assert asked == [] and decided.prune == derived and decided.finalizers_removed == (FINALIZER,)
    assert decided.status is None and decided.memory is None
    gone, _ = run("myorg", None, cluster(None, derived=derived, deployments=[attached]))
    assert gone.prune == derived and gone.finalizers_removed == () and gone.memory is None
    assert gone.attach == [{"apiVersion": "apps/v1", "kind": "Deployment",
                            "metadata": {"name": "web", "namespace": "shop"}}]  # the reference taken out
