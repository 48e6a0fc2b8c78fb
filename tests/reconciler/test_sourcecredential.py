"""The SourceCredential decisions without a cluster: coverage, material, the derived Secrets, the webhook's rules."""

from __future__ import annotations

import base64
import json
from typing import Any

from admission.review import Settings, validating
from lifecycle.credential_outputs import (
    Material,
    attachment,
    covers,
    material,
    pull_secret,
    pull_secrets_for,
    repo_creds,
)
from lifecycle.secrets import granted
from lifecycle.sourcecredential import Backend, Credential, Half, check, read

SEALED = Backend("login", None)
CRED = Credential("myorg", Half(SEALED, ("github.com/myorg/", "http://git.local:3000/team/")),
                  Half(SEALED, ("ghcr.io/myorg/", "registry.local:5000")))
LOGIN = Material("deploy", "s3cret")


def test_coverage_is_by_path_component_with_docker_hub_names_normalised() -> None:
    half = CRED.registry
    assert covers(half, "ghcr.io/myorg/app:1") and covers(half, "ghcr.io/myorg/team/app@sha256:" + "a" * 64)
    assert not covers(half, "ghcr.io/myorganisation/app:1") and not covers(half, "ghcr.io/other/app")
    assert covers(half, "registry.local:5000/anything:2") and not covers(half, "registry.local:5001/x")
    assert covers(Half(SEALED, ("docker.io/library/",)), "nginx:1")
    assert not covers(None, "ghcr.io/myorg/app")
    assert pull_secrets_for("ghcr.io/myorg/app", [CRED, Credential("b", None, Half(SEALED, ("ghcr.io/",)))]) == [
        "apprafter-pull-b", "apprafter-pull-myorg"]


def test_material_problems_name_keys_never_values() -> None:
    assert material(None, "login") == material(None, "login")
    assert "Secret login not found" in str(material(None, "login"))
    bad = material({"data": {"username": base64.b64encode(b"u").decode(), "password": "%%%not-base64"}}, "login")
    assert isinstance(bad, str) and "password" in bad and "%%%" not in bad
    two_lines = material({"data": {"username": base64.b64encode(b"u").decode(),
                                   "password": base64.b64encode(b"a\nb").decode()}}, "login")
    assert isinstance(two_lines, str) and "a\nb" not in two_lines
    found = material({"data": {k: base64.b64encode(v.encode()).decode() for k, v in LOGIN._asdict().items()}}, "l")
    assert found == LOGIN and "s3cret" not in repr(found)


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_repo_creds_are_argo_cd_credential_templates_one_per_prefix() -> None:
    secrets = repo_creds(CRED, LOGIN, "argocd")
    assert [s["metadata"]["labels"]["argocd.argoproj.io/secret-type"] for s in secrets] == ["repo-creds"] * 2
    assert sorted(_decoded(s)["url"] for s in secrets) == ["http://git.local:3000/team/", "https://github.com/myorg/"]
    assert {_decoded(s)["type"] for s in secrets} == {"git"}
    assert repo_creds(CRED, LOGIN, "argocd") == secrets  # same input, same objects


def test_the_pull_secret_has_one_auths_entry_per_host() -> None:
    secret = pull_secret(CRED, LOGIN, "team")
    config = json.loads(_decoded(secret)[".dockerconfigjson"])
    assert sorted(config["auths"]) == ["ghcr.io/myorg", "registry.local:5000"]
    assert base64.b64decode(config["auths"]["ghcr.io/myorg"]["auth"]).decode() == "deploy:s3cret"
    assert secret["type"] == "kubernetes.io/dockerconfigjson"


def test_the_attachment_carries_only_the_pod_templates_pull_secrets() -> None:
    deployment = {"metadata": {"name": "demo", "namespace": "team"}, "spec": {"replicas": 3}}
    assert attachment(deployment, ["apprafter-pull-myorg"]) == {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo", "namespace": "team"},
        "spec": {"template": {"spec": {"imagePullSecrets": [{"name": "apprafter-pull-myorg"}]}}}}
    assert "spec" not in attachment(deployment, [])  # applying nothing gives the field back


def test_a_derived_pull_secret_is_not_an_env_secret_the_app_may_read() -> None:
    # the pods reference it for the kubelet only; an env reference would print the registry password
    assert not granted("demo", {"image": "ghcr.io/myorg/demo"}, "apprafter-pull-myorg", {})


def test_check_refuses_what_the_crd_refuses_and_reads_what_it_admits() -> None:
    good = {"metadata": {"name": "myorg", "namespace": "apprafter-system"},
            "spec": {"git": {"backend": {"sealedSecretRef": {"name": "login"}}, "repoPrefixes": ["github.com/o/"]}}}
    assert check(good, "apprafter-system") == []
    assert read(good).git == Half(Backend("login", None), ("github.com/o/",)) and read(good).registry is None
    dup = {**good, "spec": {"registry": {"backend": {"openBaoPath": "kv/x"}, "hosts": ["ghcr.io/o/", "ghcr.io/o/"]}}}
    assert ("spec.registry.hosts", "an entry is listed twice") in check(dup)
    newline = {**good, "spec": {"registry": {"backend": {"openBaoPath": "kv/x\n"}, "hosts": ["ghcr.io/o/\n"]}}}
    assert {f for f, _ in check(newline)} == {"spec.registry.hosts[0]", "spec.registry.backend.openBaoPath"}


def _review(obj: dict[str, Any], user: str = "alice") -> dict[str, Any]:
    request = {"uid": "u1", "kind": {"group": "apprafter.io", "version": "v1alpha1", "kind": "SourceCredential"},
               "operation": "CREATE", "userInfo": {"username": user}, "namespace": "apprafter-system",
               "object": obj}
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    return validating(body.encode(), Settings()).review["response"]


def test_the_webhook_refuses_a_credential_outside_the_operators_namespace_and_nonsense() -> None:
    obj = {"apiVersion": "apprafter.io/v1alpha1", "kind": "SourceCredential",
           "metadata": {"name": "x", "namespace": "apprafter-system"},
           "spec": {"registry": {"backend": {"sealedSecretRef": {"name": "l"}}, "hosts": ["ghcr.io/o/"]}}}
    assert _review(obj)["allowed"] is True
    elsewhere = _review({**obj, "metadata": {"name": "x", "namespace": "team"}})
    assert not elsewhere["allowed"] and "operator's namespace" in elsewhere["status"]["message"]
    schemed = _review({**obj, "spec": {"registry": {"backend": {"sealedSecretRef": {"name": "l"}},
                                                     "hosts": ["https://ghcr.io/o/"]}}})
    assert not schemed["allowed"] and "has no scheme" in schemed["status"]["message"]
