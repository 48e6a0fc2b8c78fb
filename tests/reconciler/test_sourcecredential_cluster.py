"""SourceCredential on the bare API server, from the user's side: the CRD refuses material and nonsense by itself, the
webhook's twin refuses the same, and the operator derives the Argo CD repo-creds and the workloads' pull secrets from
the unsealed material, re-derives on rotation, puts back a hand edit, and removes it all with the credential. No
password in the operator's log."""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from lifecycle.credential_outputs import CREDENTIAL_LABEL, FINALIZER, pull_secret_name
from lifecycle.sourcecredential import check
from tests.reconciler.helpers import API, apply, cr, edit, events, fresh_namespace, wait
from tests.reconciler.operator_proc import FAST, Operator
from tests.testbed.kube import ApplyRejected, KubeTestBed

pytestmark = pytest.mark.testbed

PASSWORD = f"pw-{uuid.uuid4().hex}"  # grepped for in every log this module makes
ROTATED = f"rotated-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def argocd_namespace(bed: KubeTestBed) -> str:
    name = f"argocd-{uuid.uuid4().hex[:6]}"
    bed.ensure_namespace(name)
    return name


@pytest.fixture(scope="module")
def operator(bed: KubeTestBed, argocd_namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    op = Operator(bed, tmp_path_factory.mktemp("operator"), ("--no-leader-elect", "--no-platform-stack",
                                                             "--argocd-namespace", argocd_namespace, *FAST)).start()
    try:
        yield op
    finally:
        op.stop()


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
                                           "repoPrefixes": ["github.com/o/"]}}, "openBaoPath is a KV path"),
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

    # rotation: the new material reaches both halves, under the same names
    material(bed, records, ROTATED)
    wait("the rotated repo-creds", lambda: _decoded(_repo_creds(bed, argocd_namespace)[0])["password"] == ROTATED
         or None)
    wait("the rotated pull secret", lambda: ROTATED in _decoded(_secret(bed, covered, pull_secret_name("myorg"))
                                                                or {})[".dockerconfigjson"] or None)

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

    # the credential stops covering the image (an image repository change would be gated: §3.8): its pull secret
    # and the reference go; covering it again brings both back
    narrowed = copy.deepcopy(GOOD)
    narrowed["registry"]["hosts"] = ["registry.test.example/someone-else/"]
    bed.apply(credential(records, narrowed))
    wait("the reference removed", lambda: _pull_secrets(bed, covered) == [] or None)
    wait("the pull secret removed", lambda: _secret(bed, covered, pull_secret_name("myorg")) is None or None)
    bed.apply(credential(records, GOOD))
    wait("the pull secret again", lambda: _pull_secrets(bed, covered) == [pull_secret_name("myorg")] or None)
    wait("its Secret again", lambda: _secret(bed, covered, pull_secret_name("myorg")))

    # deleting the credential removes what it derived, then the credential itself
    bed.delete(API, "SourceCredential", "myorg", records)
    wait("the credential gone", lambda: bed.get(API, "SourceCredential", "myorg", records) is None or None)
    assert _repo_creds(bed, argocd_namespace) == []
    assert _secret(bed, covered, pull_secret_name("myorg")) is None
    assert _pull_secrets(bed, covered) == []
    for log in operator.log_path.parent.glob("*.log"):
        text = log.read_text()
        assert PASSWORD not in text and ROTATED not in text, f"material in {log}"


def test_material_missing_says_so_without_deriving(bed: KubeTestBed, operator: Operator,
                                                   argocd_namespace: str) -> None:
    records = operator.records_namespace
    bed.apply(credential(records, {"git": {"backend": {"sealedSecretRef": {"name": "not-unsealed"}},
                                           "repoPrefixes": ["github.com/nobody/"]},
                                   "registry": {"backend": {"openBaoPath": "secret/data/nobody"},
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
