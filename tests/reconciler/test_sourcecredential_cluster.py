"""SourceCredential on the bare API server, from the user's side: the CRD refuses material and nonsense by itself, the
webhook's twin refuses the same, and the operator derives the Argo CD repo-creds and the workloads' pull secrets from
the unsealed material, re-derives on rotation, puts back a hand edit, and removes it all with the credential. It
checks each half for real (the token registry's `GET /v2/`, `git ls-remote` against a Basic-auth git server):
Valid, Invalid in the server's words, Unverified with no route or a failing server; the `confirmed` gate derives
only what was checked Valid. No password in any log the bed wrote, in an Event or in the status."""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lifecycle.credentials.outputs import CREDENTIAL_LABEL, FINALIZER, pull_secret_name
from lifecycle.credentials.spec import check
from tests.lifecycle.credentials.test_gate import documented_hash
from tests.reconciler.credential_bed import (  # noqa: F401 - the module's fixtures
    Servers,
    approve,
    credential_argocd_namespace,
    credential_operator,
    credential_plans,
    credential_servers,
    pending,
)
from tests.reconciler.helpers import API, apply, cr, edit, events, fresh_namespace, plan_phase, wait
from tests.reconciler.helpers import status as app_status
from tests.reconciler.operator_proc import FAST, Operator
from tests.testbed.kube import ApplyRejected, KubeTestBed
from tests.testbed.procs import free_port, log_files

pytestmark = pytest.mark.testbed

PASSWORD = f"pw-{uuid.uuid4().hex}"  # grepped for in every log this module makes
ROTATED = f"rotated-{uuid.uuid4().hex}"


def credential(namespace: str, spec: dict[str, Any], name: str = "myorg") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "SourceCredential", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


SEALED = {"sealedSecretRef": {"name": "myorg-login"}}
GOOD = {"git": {"backend": SEALED, "repoPrefixes": ["http://127.0.0.1:3000/myorg/"]},
        "registry": {"backend": SEALED, "hosts": ["registry.test.example/myorg/"]}}


def material(bed: KubeTestBed, namespace: str, password: str) -> None:
    """The Secret the SealedSecrets controller would unseal from SealedSecret myorg-login (its field manager)."""
    bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
               "metadata": {"name": "myorg-login", "namespace": namespace},
               "stringData": {"username": "deploy", "password": password}}, field_manager="sealed-secrets-controller")


BAD = [
    ("no half", {}, "spec.git or spec.registry is required"),
    ("an empty prefix", {"git": {"backend": SEALED, "repoPrefixes": [""]}}, "should be at least 1 chars long"),
    ("no prefix", {"git": {"backend": SEALED, "repoPrefixes": []}}, "should have at least 1 items"),
    ("a token in a prefix", {"git": {"backend": SEALED, "repoPrefixes": ["https://x:ghp_secret@github.com/o/"]}},
     "no user:token@"),
    ("a host with a scheme", {"registry": {"backend": SEALED, "hosts": ["https://ghcr.io/myorg/"]}},
     "a registry host has no scheme"),
    ("both backends", {"registry": {"backend": {**SEALED, "openBaoPath": "secret/data/x"},
                                    "hosts": ["ghcr.io/myorg/"]}}, "must validate one and only one schema"),
    ("no backend", {"registry": {"backend": {}, "hosts": ["ghcr.io/myorg/"]}}, "must validate one and only one"),
    ("a URL as the OpenBao path", {"git": {"backend": {"openBaoPath": "https://bao/x?token=s"},
                                           "repoPrefixes": ["github.com/o/"]}}, "openBaoPath is <mount>/<path>"),
    ("a parent segment in the OpenBao path", {"git": {"backend": {"openBaoPath": "secret/../sys/raw"},
                                                      "repoPrefixes": ["github.com/o/"]}}, "none empty or starting"),
    ("an OpenBao path without a mount", {"git": {"backend": {"openBaoPath": "github"},
                                                 "repoPrefixes": ["github.com/o/"]}}, "openBaoPath is <mount>/<path>"),
    ("an empty scope", {"registry": {"backend": SEALED, "hosts": ["ghcr.io/o/"], "namespaces": []}},
     "1 to 64 namespaces; leave spec.registry.namespaces out for every namespace"),
    ("a namespace that is none", {"registry": {"backend": SEALED, "hosts": ["ghcr.io/o/"],
                                               "namespaces": ["team", "Team_B"]}},
     "a namespace is a Kubernetes namespace name"),
    ("a namespace too long", {"registry": {"backend": SEALED, "hosts": ["ghcr.io/o/"], "namespaces": ["a" * 64]}},
     "may not be more than 63 bytes|Too long"),
    ("a namespace twice", {"registry": {"backend": SEALED, "hosts": ["ghcr.io/o/"], "namespaces": ["team", "team"]}},
     "duplicate entries for key"),  # server-side apply of a list-type set
    ("too many namespaces", {"registry": {"backend": SEALED, "hosts": ["ghcr.io/o/"],
                                          "namespaces": [f"ns-{i}" for i in range(65)]}}, "must have at most 64 items"),
    ("an empty project list", {"git": {"backend": SEALED, "repoPrefixes": ["github.com/o/"], "projects": []}},
     "1 to 64 Argo CD projects; leave spec.git.projects out for every project"),
    ("a project that is none", {"git": {"backend": SEALED, "repoPrefixes": ["github.com/o/"],
                                        "projects": ["team/a"]}}, "a project is an Argo CD AppProject's name"),
]


@pytest.mark.parametrize(("case", "spec", "said"), BAD, ids=[b[0] for b in BAD])
def test_the_crd_and_the_webhook_refuse_nonsense_and_material(bed: KubeTestBed, case: str, spec: dict[str, Any],
                                                              said: str) -> None:
    namespace = fresh_namespace(bed, "cred")
    obj = credential(namespace, spec)
    with pytest.raises(ApplyRejected, match=said):
        bed.apply(obj)
    assert check(obj, namespace), f"the webhook's twin admits what the CRD refuses ({case})"


def test_a_field_that_could_hold_material_is_refused_or_never_stored(bed: KubeTestBed) -> None:
    namespace = fresh_namespace(bed, "cred")
    obj = credential(namespace, copy.deepcopy(GOOD))
    obj["spec"]["git"]["backend"]["sealedSecretRef"]["token"] = PASSWORD
    obj["spec"]["registry"]["password"] = PASSWORD
    with pytest.raises(ApplyRejected, match=r"\.spec\.registry\.password: field not declared in schema"):
        bed.apply(obj)  # server-side apply (kubectl apply --server-side, Argo CD's) refuses an unknown field
    info = bed.resource_for(API, "SourceCredential")
    strict = bed.http.post(info.path(None, namespace), params={"fieldValidation": "Strict"},
                           content=json.dumps(obj).encode(), headers={"Content-Type": "application/json"})
    assert strict.status_code == 400 and 'unknown field ' in strict.text and 'spec.registry.password' in strict.text
    ignored = bed.http.post(info.path(None, namespace), params={"fieldValidation": "Ignore"},
                            content=json.dumps(obj).encode(), headers={"Content-Type": "application/json"})
    assert ignored.status_code == 201, ignored.text[:300]
    stored = bed.get(API, "SourceCredential", "myorg", namespace)
    assert stored is not None and PASSWORD not in json.dumps(stored)  # pruned: never at rest
    assert check(credential(namespace, GOOD), namespace) == []
    assert check(credential(namespace, GOOD), "apprafter-system")[0][0] == "metadata.namespace"


def _secret(bed: KubeTestBed, namespace: str, name: str) -> dict[str, Any] | None:
    return bed.get("v1", "Secret", name, namespace)


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def _repo_creds(bed: KubeTestBed, namespace: str) -> list[dict[str, Any]]:
    resp = bed.http.get(f"/api/v1/namespaces/{namespace}/secrets",
                        params={"labelSelector": "argocd.argoproj.io/secret-type=repo-creds"})
    resp.raise_for_status()
    items: list[dict[str, Any]] = resp.json()["items"]
    return items


def _pull_secrets(bed: KubeTestBed, namespace: str) -> list[str]:
    deployment = bed.get("apps/v1", "Deployment", "demo", namespace) or {}
    return sorted(s["name"] for s in deployment.get("spec", {}).get("template", {}).get("spec", {})
                  .get("imagePullSecrets") or [])


def _derived_versions(bed: KubeTestBed, argocd_namespace: str, covered: str) -> dict[str, Any]:
    """What the gate keeps while a plan waits: each derived Secret's resourceVersion and the pods' references."""
    pull = _secret(bed, covered, pull_secret_name("myorg"))
    return {"repo-creds": sorted(s["metadata"]["resourceVersion"] for s in _repo_creds(bed, argocd_namespace)),
            "pull": pull and pull["metadata"]["resourceVersion"], "references": _pull_secrets(bed, covered)}


def _checked_plan(plan: dict[str, Any], name: str, rules: set[str]) -> None:
    """A credential-scope plan of `name` with these gated rules and the documented approvedSpecHash."""
    spec = plan["spec"]
    assert spec["scope"]["type"] == "credential" and spec["scope"]["credential"]["ref"]["name"] == name
    gated = [c for c in spec["changes"] if c["classification"] != "safe"]
    assert {c["rule"] for c in gated} == rules and spec["risks"]["classification"] == "breaking"
    assert spec["trigger"]["approvedSpecHash"] == documented_hash(gated, name)
    assert plan["metadata"]["name"] == f"{name}-credential-{spec['trigger']['approvedSpecHash'][7:17]}"
    assert plan["metadata"]["ownerReferences"][0]["kind"] == "SourceCredential"


def test_the_operator_derives_rotates_repairs_and_removes(bed: KubeTestBed, operator: Operator,
                                                          argocd_namespace: str) -> None:
    records = operator.records_namespace
    covered, other = fresh_namespace(bed, "cred"), fresh_namespace(bed, "cred")
    simple = edit(needs=None, env={"LOG_LEVEL": "info"}, expose={"port": 8080})
    apply(bed, cr(covered, edit(simple, image="registry.test.example/myorg/demo:1")))
    apply(bed, cr(other, edit(simple, image="registry.test.example/elsewhere/demo:1")))
    wait("both Deployments", lambda: bed.get("apps/v1", "Deployment", "demo", covered)
         and bed.get("apps/v1", "Deployment", "demo", other))
    material(bed, records, PASSWORD)
    bed.apply(credential(records, GOOD))

    # derived: one repo-creds per prefix, as Argo CD reads it; a pull secret where the rendered image is covered
    repo = wait("the repo-creds Secret", lambda: _repo_creds(bed, argocd_namespace) or None)[0]
    assert _decoded(repo) == {"type": "git", "url": "http://127.0.0.1:3000/myorg/", "username": "deploy",
                              "password": PASSWORD}
    assert repo["metadata"]["labels"][CREDENTIAL_LABEL] == "myorg"
    pull = wait("the pull secret", lambda: _secret(bed, covered, pull_secret_name("myorg")))
    assert pull["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(_decoded(pull)[".dockerconfigjson"])["auths"]
    assert auths["registry.test.example/myorg"]["password"] == PASSWORD
    assert base64.b64decode(auths["registry.test.example/myorg"]["auth"]).decode() == f"deploy:{PASSWORD}"
    wait("the pods to reference it", lambda: _pull_secrets(bed, covered) == [pull_secret_name("myorg")] or None)
    assert _secret(bed, other, pull_secret_name("myorg")) is None and _pull_secrets(bed, other) == []
    status = wait("the status", lambda: (bed.get(API, "SourceCredential", "myorg", records) or {}).get("status"))
    for half in ("git", "registry"):
        conditions = {c["type"]: (c["status"], c["reason"]) for c in status[half]["conditions"]}
        assert conditions == {"Present": ("True", "MaterialFound"), "Valid": ("Unknown", "Unverified")}
    assert status["git"]["repoPrefixes"] == ["http://127.0.0.1:3000/myorg/"]
    assert status["pullSecrets"] == [f"{covered}/{pull_secret_name('myorg')}"]
    assert FINALIZER in bed.get(API, "SourceCredential", "myorg", records)["metadata"]["finalizers"]  # type: ignore[index]

    # rotation: the new material reaches both halves, under the same names, and needs no plan
    material(bed, records, ROTATED)
    wait("the rotated repo-creds", lambda: _decoded(_repo_creds(bed, argocd_namespace)[0])["password"] == ROTATED
         or None)
    wait("the rotated pull secret", lambda: ROTATED in _decoded(_secret(bed, covered, pull_secret_name("myorg"))
                                                                or {})[".dockerconfigjson"] or None)
    assert credential_plans(bed, records, "myorg") == []

    # a hand edit is put back, and said so on the credential
    name = repo["metadata"]["name"]
    edited = bed.http.patch(f"/api/v1/namespaces/{argocd_namespace}/secrets/{name}",
                            params={"fieldManager": "kubectl-edit"},  # what `kubectl edit` sends
                            content=json.dumps({"data": {"password": base64.b64encode(b"typed-by-hand").decode()}}),
                            headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert edited.status_code == 200, edited.text[:300]
    wait("the hand edit put back", lambda: _decoded(_secret(bed, argocd_namespace, name) or {}).get("password")
         == ROTATED or None)
    drift = wait("DriftCorrected", lambda: events(bed, records, "DriftCorrected") or None)
    assert "data.password by kubectl-edit" in drift[0]["note"] and "typed-by-hand" not in drift[0]["note"]

    # an Argo CD Application syncs a repository under the prefix
    bed.apply({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
               "metadata": {"name": "shop", "namespace": argocd_namespace},
               "spec": {"project": "default",
                        "source": {"repoURL": "http://127.0.0.1:3000/myorg/shop.git", "path": "."},
                        "destination": {"server": "https://kubernetes.default.svc", "namespace": covered}}})

    # narrowing both halves away from what matches them is destructive (§3.8): a MigrationPlan with the documented
    # hash, and until it is approved nothing derived changes
    before = _derived_versions(bed, argocd_namespace, covered)
    narrowed = copy.deepcopy(GOOD)
    narrowed["git"]["repoPrefixes"] = ["http://127.0.0.1:3000/myorg/other/"]
    narrowed["registry"]["hosts"] = ["registry.test.example/someone-else/"]
    bed.apply(credential(records, narrowed))
    plan = wait("the narrowing's plan", lambda: pending(bed, records, "myorg"))
    _checked_plan(plan, "myorg", {"AR-SC001", "AR-SC002"})
    said = json.dumps(plan["spec"]["changes"])
    assert f"Application {covered}/demo" in said and f"Argo CD Application {argocd_namespace}/shop" in said
    held = wait("the status naming the plan", lambda: (bed.get(API, "SourceCredential", "myorg", records) or {})
                .get("status", {}).get("migrationPlan") == plan["metadata"]["name"] or None)
    assert held
    status = bed.get(API, "SourceCredential", "myorg", records)["status"]  # type: ignore[index]
    assert status["registry"]["hosts"] == ["registry.test.example/myorg"]  # the last-applied coverage
    assert events(bed, records, "MigrationPlanCreated")
    assert _derived_versions(bed, argocd_namespace, covered) == before
    approve(bed, records, plan)
    wait("the reference removed", lambda: _pull_secrets(bed, covered) == [] or None)
    wait("the pull secret removed", lambda: _secret(bed, covered, pull_secret_name("myorg")) is None or None)
    wait("the repo-creds narrowed", lambda: [_decoded(s)["url"] for s in _repo_creds(bed, argocd_namespace)]
         == ["http://127.0.0.1:3000/myorg/other/"] or None)
    wait("the plan applied", lambda: plan_phase(bed, records, plan["metadata"]["name"]) == "applied" or None)
    wait("the status without a plan", lambda: "migrationPlan" not in (bed.get(API, "SourceCredential", "myorg",
                                                                              records) or {}).get("status", {}) or None)

    # widening back is soft: no plan, the pull secret and the reference come back
    bed.apply(credential(records, GOOD))
    wait("the pull secret again", lambda: _pull_secrets(bed, covered) == [pull_secret_name("myorg")] or None)
    wait("its Secret again", lambda: _secret(bed, covered, pull_secret_name("myorg")))
    # and the repo-creds widened back, the narrowed one pruned: that pass is done (the Application controller lists
    # the pull secret in its own apply, so the reference alone may come before it)
    wait("the repo-creds widened", lambda: [_decoded(s)["url"] for s in _repo_creds(bed, argocd_namespace)]
         == GOOD["git"]["repoPrefixes"] or None)
    assert [p["metadata"]["name"] for p in credential_plans(bed, records, "myorg")] == [plan["metadata"]["name"]]

    # deleting it while Applications match it: held by our finalizer for a plan; approval removes it all
    before = _derived_versions(bed, argocd_namespace, covered)
    bed.delete(API, "SourceCredential", "myorg", records)
    deletion = wait("the deletion's plan", lambda: pending(bed, records, "myorg"))
    _checked_plan(deletion, "myorg", {"AR-SC001", "AR-SC002", "AR-SC003"})
    wait("the status naming it", lambda: (bed.get(API, "SourceCredential", "myorg", records) or {})
         .get("status", {}).get("migrationPlan") == deletion["metadata"]["name"] or None)
    still = bed.get(API, "SourceCredential", "myorg", records)
    assert still and still["metadata"].get("deletionTimestamp") and FINALIZER in still["metadata"]["finalizers"]
    assert _derived_versions(bed, argocd_namespace, covered) == before
    approve(bed, records, deletion)
    wait("the credential gone", lambda: bed.get(API, "SourceCredential", "myorg", records) is None or None)
    assert _repo_creds(bed, argocd_namespace) == []
    assert _secret(bed, covered, pull_secret_name("myorg")) is None
    wait("the reference gone", lambda: _pull_secrets(bed, covered) == [] or None)
    for log in operator.log_path.parent.glob("*.log"):
        text = log.read_text()
        assert PASSWORD not in text and ROTATED not in text, f"material in {log}"


def test_material_missing_says_so_without_deriving(bed: KubeTestBed, operator: Operator,
                                                   argocd_namespace: str) -> None:
    records = operator.records_namespace
    bed.apply(credential(records, {"git": {"backend": {"sealedSecretRef": {"name": "not-unsealed"}},
                                           "repoPrefixes": ["github.com/nobody/"]},
                                   "registry": {"backend": {"openBaoPath": "secret/nobody/login"},
                                                "hosts": ["ghcr.io/nobody/"]}}, name="nobody"))

    def reported() -> dict[str, Any] | None:
        found = (bed.get(API, "SourceCredential", "nobody", records) or {}).get("status") or {}
        return found if "git" in found and "registry" in found else None

    status = reported() or wait("the status", reported)
    git = {c["type"]: c for c in status["git"]["conditions"]}
    assert (git["Present"]["status"], git["Present"]["reason"]) == ("False", "MaterialMissing")
    assert "Secret not-unsealed not found" in git["Present"]["message"]
    assert {c["type"]: c["reason"] for c in status["registry"]["conditions"]}["Present"] == "BackendUnavailable"
    assert not [s for s in _repo_creds(bed, argocd_namespace) if s["metadata"]["labels"][CREDENTIAL_LABEL] == "nobody"]
    bed.delete(API, "SourceCredential", "nobody", records)
    wait("the credential gone", lambda: bed.get(API, "SourceCredential", "nobody", records) is None or None)


def _valid(bed: KubeTestBed, records: str, name: str, generation_of: int | None = None) -> dict[str, Any] | None:
    """Each half's Valid condition (status, reason, message) and lastValidated, once both halves were checked for
    the current generation and material."""
    obj = bed.get(API, "SourceCredential", name, records) or {}
    found = obj.get("status") or {}
    out = {}
    for half in ("git", "registry"):
        conditions = {c["type"]: c for c in (found.get(half) or {}).get("conditions") or []}
        if "Valid" not in conditions or found.get("observedGeneration") != obj["metadata"]["generation"]:
            return None
        valid = conditions["Valid"]
        out[half] = (valid["status"], valid["reason"], valid["message"], found[half].get("lastValidated"))
    return out


def _bed_logs(bed: KubeTestBed, *directories: Path) -> list[Path]:
    roots = {p.log_path.parent for p in bed.processes} | set(directories)
    return log_files(*roots)


def test_validation_for_real_each_state_in_the_servers_words(bed: KubeTestBed, operator: Operator,
                                                             servers: Servers) -> None:
    records = operator.records_namespace
    bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
               "metadata": {"name": "checked-login", "namespace": records},
               "stringData": {"username": servers.user, "password": servers.password}},
              field_manager="sealed-secrets-controller")
    backend = {"sealedSecretRef": {"name": "checked-login"}}
    spec = {"git": {"backend": backend, "repoPrefixes": [servers.private.url("myorg/")]},
            "registry": {"backend": backend, "hosts": [f"{servers.registry_host}/myorg/"]}}
    bed.apply(credential(records, spec, name="checked"))

    states = wait("both halves checked", lambda: _valid(bed, records, "checked"))
    assert states["git"][:2] == ("True", "Valid") and states["registry"][:2] == ("True", "Valid"), states
    assert "accepted the login" in states["registry"][2] and states["git"][3] and states["registry"][3]

    # the wrong password (a rotation to a bad token): Invalid, in the registry's and git's own words
    wrong = f"wrong-{uuid.uuid4().hex}"
    bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
               "metadata": {"name": "checked-login", "namespace": records},
               "stringData": {"username": servers.user, "password": wrong}}, field_manager="sealed-secrets-controller")
    states = wait("both halves refused", lambda: ((s := _valid(bed, records, "checked")) and s["git"][1] == "Invalid"
                  and s["registry"][1] == "Invalid" and s) or None)
    assert states["registry"][:3] == ("False", "Invalid", f"registry {servers.registry_host} refused the login: "
                                      "GET /v2/: HTTP 401 Unauthorized: authentication required")
    assert states["git"][0] == "False" and "fatal: Authentication failed for" in states["git"][2]

    # no route to the git server, a registry answering 503: Unverified (not a verdict on the login), not Invalid
    closed = free_port()
    unreachable = {"git": {"backend": backend, "repoPrefixes": [f"http://127.0.0.1:{closed}/myorg/"]},
                   "registry": {"backend": backend, "hosts": [f"127.0.0.1:{servers.failing.server_address[1]}/x/"]}}
    bed.apply(credential(records, unreachable, name="checked"))
    states = wait("both halves unverified", lambda: ((s := _valid(bed, records, "checked")) and
                  s["git"][1] == "Unverified" and s["registry"][1] == "Unverified" and s) or None)
    assert states["git"][0] == "Unknown" and "Failed to connect" in states["git"][2]
    assert states["registry"][0] == "Unknown" and "HTTP 503 Service Unavailable" in states["registry"][2]

    bed.delete(API, "SourceCredential", "checked", records)
    wait("the credential gone", lambda: bed.get(API, "SourceCredential", "checked", records) is None or None)
    said = json.dumps(events(bed, records))
    assert servers.password not in said and wrong not in said
    logs = _bed_logs(bed, operator.log_path.parent, servers.workdir)
    assert any("git-http" in log.name for log in logs) and any("operator" in log.name for log in logs)
    for log in logs:
        text = log.read_text(errors="replace")
        assert servers.password not in text and wrong not in text, f"material in {log}"


def test_the_confirmed_gate_derives_only_what_was_checked_valid(bed: KubeTestBed, servers: Servers,
                                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    argocd = fresh_namespace(bed, "argocd")
    quiet = fresh_namespace(bed, "none")  # its Application controller has nothing to do: the other operator's
    op = Operator(bed, tmp_path_factory.mktemp("confirmed"), ("--no-leader-elect", "--no-platform-stack",
                                                              "--namespace", quiet, "--argocd-namespace", argocd,
                                                              "--credential-gate", "confirmed", *FAST),
                  name="confirmed").start()
    try:
        records = op.records_namespace

        def login(password: str) -> None:
            bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
                       "metadata": {"name": "gated-login", "namespace": records},
                       "stringData": {"username": servers.user, "password": password}},
                      field_manager="sealed-secrets-controller")

        def git_valid() -> tuple[str, str] | None:
            found = (bed.get(API, "SourceCredential", "gated", records) or {}).get("status") or {}
            conditions = {c["type"]: c for c in (found.get("git") or {}).get("conditions") or []}
            return (conditions["Valid"]["reason"], found["git"].get("lastValidated")) if "Valid" in conditions \
                else None

        wrong = f"wrong-{uuid.uuid4().hex}"
        login(wrong)
        bed.apply(credential(records, {"git": {"backend": {"sealedSecretRef": {"name": "gated-login"}},
                                               "repoPrefixes": [servers.private.url("myorg/")]}}, name="gated"))
        assert wait("the refused check", git_valid)[0] == "Invalid"
        assert _repo_creds(bed, argocd) == []  # refused: nothing derived
        login(servers.password)
        wait("the valid check", lambda: ((v := git_valid()) and v[0] == "Valid") or None)
        repo = wait("the repo-creds Secret", lambda: _repo_creds(bed, argocd) or None)[0]
        assert _decoded(repo)["password"] == servers.password
        login(wrong)  # a rotation to a bad token: the working Secret stays as it was
        wait("the refused rotation", lambda: ((v := git_valid()) and v[0] == "Invalid") or None)
        assert [_decoded(s)["password"] for s in _repo_creds(bed, argocd)] == [servers.password]
        bed.delete(API, "SourceCredential", "gated", records)
        wait("the credential gone", lambda: bed.get(API, "SourceCredential", "gated", records) is None or None)
        assert _repo_creds(bed, argocd) == []
    finally:
        op.stop()
    for log in _bed_logs(bed, op.log_path.parent):
        assert servers.password not in log.read_text(errors="replace"), f"material in {log}"


def test_an_application_names_the_invalid_credential_covering_its_image(bed: KubeTestBed, operator: Operator,
                                                                        servers: Servers) -> None:
    records = operator.records_namespace
    wrong = f"wrong-{uuid.uuid4().hex}"

    def login(password: str) -> None:
        bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
                   "metadata": {"name": "pull-login", "namespace": records},
                   "stringData": {"username": servers.user, "password": password}},
                  field_manager="sealed-secrets-controller")

    login(wrong)
    bed.apply(credential(records, {"registry": {"backend": {"sealedSecretRef": {"name": "pull-login"}},
                                                "hosts": [f"{servers.registry_host}/team/"]}}, name="pull"))
    namespace = fresh_namespace(bed, "cred")
    apply(bed, cr(namespace, edit(edit(needs=None, env={"LOG_LEVEL": "info"}, expose={"port": 8080}),
                                  image=f"{servers.registry_host}/team/demo:1")))

    def credential_condition() -> dict[str, Any] | None:
        found = [c for c in (app_status(bed, namespace).get("conditions") or [])
                 if c["type"] == "SourceCredentialValid"]
        return found[0] if found else None

    named = wait("the Application naming the refused credential", credential_condition)
    assert (named["status"], named["reason"]) == ("False", "CredentialInvalid")
    assert f"SourceCredential {records}/pull" in named["message"] and wrong not in named["message"]
    login(servers.password)  # re-sealed: the condition goes
    wait("the condition gone", lambda: credential_condition() is None or None)

    # deleting it while the Application's image is covered waits for a plan; approving lets it go
    bed.delete(API, "SourceCredential", "pull", records)
    plan = wait("the deletion's plan", lambda: pending(bed, records, "pull"))
    _checked_plan(plan, "pull", {"AR-SC002", "AR-SC003"})
    approve(bed, records, plan)
    wait("the credential gone", lambda: bed.get(API, "SourceCredential", "pull", records) is None or None)
    for log in _bed_logs(bed, operator.log_path.parent):
        assert wrong not in log.read_text(errors="replace") and servers.password not in log.read_text(
            errors="replace"), f"material in {log}"


def _credential_condition(bed: KubeTestBed, namespace: str) -> dict[str, Any] | None:
    found = [c for c in (app_status(bed, namespace).get("conditions") or []) if c["type"] == "SourceCredentialValid"]
    return found[0] if found else None


def _pulls_always(bed: KubeTestBed, namespace: str) -> Callable[[], bool | None]:
    def probe() -> bool | None:
        deployment = bed.get("apps/v1", "Deployment", "demo", namespace) or {}
        containers = deployment["spec"]["template"]["spec"]["containers"]
        return [c.get("imagePullPolicy") for c in containers] == ["Always"] or None
    return probe


def test_a_registry_half_scoped_to_namespaces_keeps_its_login_from_other_tenants(
        bed: KubeTestBed, operator: Operator) -> None:
    records = operator.records_namespace
    team, intruder = fresh_namespace(bed, "team"), fresh_namespace(bed, "intruder")
    image = "registry.test.example/scoped/demo:1"  # the intruder names an image under the covered host: that's all
    for namespace in (team, intruder):
        apply(bed, cr(namespace, edit(edit(needs=None, env={"LOG_LEVEL": "info"}, expose={"port": 8080}),
                                      image=image)))
    wait("both Deployments", lambda: bed.get("apps/v1", "Deployment", "demo", team)
         and bed.get("apps/v1", "Deployment", "demo", intruder))
    bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
               "metadata": {"name": "scoped-login", "namespace": records},
               "stringData": {"username": "deploy", "password": PASSWORD}}, field_manager="sealed-secrets-controller")
    spec = {"registry": {"backend": {"sealedSecretRef": {"name": "scoped-login"}},
                         "hosts": ["registry.test.example/scoped/"], "namespaces": [team]}}
    bed.apply(credential(records, spec, name="scoped"))
    name = pull_secret_name("scoped")

    # in the scope: the pull secret and the pods' reference; outside it: neither, and the Application says why
    wait("the team's pull secret", lambda: _secret(bed, team, name))
    wait("the team's reference", lambda: _pull_secrets(bed, team) == [name] or None)
    said = wait("the intruder's Application saying why", lambda: _credential_condition(bed, intruder))
    assert (said["status"], said["reason"]) == ("False", "NamespaceNotCovered")
    assert f"none covers namespace {intruder}" in said["message"] and f"{records}/scoped" not in said["message"]
    assert _secret(bed, intruder, name) is None and _pull_secrets(bed, intruder) == []
    assert _credential_condition(bed, team) is None
    # and neither pulls the private image from a node's cache: both pods ask the registry, with their own login
    for pulling in (team, intruder):
        wait(f"{pulling}'s pods pulling every time", _pulls_always(bed, pulling))
    status = wait("the scope applied", lambda: (bed.get(API, "SourceCredential", "scoped", records) or {})
                  .get("status", {}).get("registry", {}).get("namespaces"))
    assert status == [team]
    assert bed.get(API, "SourceCredential", "scoped", records)["status"]["pullSecrets"] == [  # type: ignore[index]
        f"{team}/{name}"]

    # widening the scope is soft: no plan, the other namespace gets it at once
    bed.apply(credential(records, {"registry": {**spec["registry"], "namespaces": [team, intruder]}}, name="scoped"))
    wait("the widened reference", lambda: _pull_secrets(bed, intruder) == [name] or None)
    wait("its pull secret", lambda: _secret(bed, intruder, name))
    wait("the condition gone", lambda: _credential_condition(bed, intruder) is None or None)
    assert credential_plans(bed, records, "scoped") == []

    # narrowing it takes the login away from an Application: a plan, and until it is approved nothing changes
    before = (_secret(bed, intruder, name) or {})["metadata"]["resourceVersion"], _pull_secrets(bed, intruder)
    bed.apply(credential(records, spec, name="scoped"))
    plan = wait("the narrowing's plan", lambda: pending(bed, records, "scoped"))
    _checked_plan(plan, "scoped", {"AR-SC004"})
    [change] = [c for c in plan["spec"]["changes"] if c["rule"] == "AR-SC004"]
    assert (change["field"], change["from"], change["to"]) == ("registry.namespaces", sorted([team, intruder]),
                                                               [team])
    assert f"Application {intruder}/demo" in change["reason"] and f"{team}/demo" not in change["reason"]
    wait("the status naming the plan", lambda: (bed.get(API, "SourceCredential", "scoped", records) or {})
         .get("status", {}).get("migrationPlan") == plan["metadata"]["name"] or None)
    held = bed.get(API, "SourceCredential", "scoped", records)["status"]  # type: ignore[index]
    assert held["registry"]["namespaces"] == sorted([team, intruder])  # the last-applied scope
    assert ((_secret(bed, intruder, name) or {})["metadata"]["resourceVersion"], _pull_secrets(bed, intruder)) == before
    approve(bed, records, plan)
    wait("the intruder's reference removed", lambda: _pull_secrets(bed, intruder) == [] or None)
    wait("its pull secret removed", lambda: _secret(bed, intruder, name) is None or None)
    wait("the plan applied", lambda: plan_phase(bed, records, plan["metadata"]["name"]) == "applied" or None)
    wait("the Application saying why again", lambda: _credential_condition(bed, intruder))
    assert _pull_secrets(bed, team) == [name] and _secret(bed, team, name) is not None

    # deleting it: only the team's Application loses anything (the intruder had nothing to lose)
    bed.delete(API, "SourceCredential", "scoped", records)
    deletion = wait("the deletion's plan", lambda: pending(bed, records, "scoped"))
    _checked_plan(deletion, "scoped", {"AR-SC002", "AR-SC003"})
    said = json.dumps(deletion["spec"]["changes"])
    assert f"Application {team}/demo" in said and intruder not in said
    approve(bed, records, deletion)
    wait("the credential gone", lambda: bed.get(API, "SourceCredential", "scoped", records) is None or None)
    wait("the team's reference gone", lambda: _pull_secrets(bed, team) == [] or None)
    for log in operator.log_path.parent.glob("*.log"):
        assert PASSWORD not in log.read_text(), f"material in {log}"
