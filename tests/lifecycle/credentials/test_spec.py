"""The SourceCredential decisions without a cluster: coverage, material, the derived Secrets, the webhook's rules."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from admission.review import Settings, validating
from lifecycle.credentials.concerns import concerned_by_image_of
from lifecycle.credentials.material import Material, material
from lifecycle.credentials.outputs import (
    attachment,
    covered_deployments,
    covers,
    pull_secret,
    pull_secrets_for,
    repo_creds,
    served_namespaces,
)
from lifecycle.credentials.spec import Backend, Credential, Half, check, read
from lifecycle.secrets import granted

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
    assert pull_secrets_for("ghcr.io/myorg/app", "team", [CRED, Credential("b", None, Half(SEALED, ("ghcr.io/",)))]
                            ) == ["apprafter-pull-b", "apprafter-pull-myorg"]


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


def _deployment(namespace: str, image: str) -> dict[str, Any]:
    return {"metadata": {"name": "demo", "namespace": namespace},
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}


def test_a_scoped_registry_half_serves_only_its_namespaces() -> None:
    scoped = CRED._replace(registry=CRED.registry._replace(namespaces=("team",)))  # type: ignore[union-attr]
    assert pull_secrets_for("ghcr.io/myorg/app", "team", [scoped]) == ["apprafter-pull-myorg"]
    assert pull_secrets_for("ghcr.io/myorg/app", "intruder", [scoped]) == []  # the image alone no longer suffices
    assert pull_secrets_for("ghcr.io/myorg/app", "intruder", [CRED]) == ["apprafter-pull-myorg"]  # unscoped: every
    deployments = [_deployment("team", "ghcr.io/myorg/app:1"), _deployment("intruder", "ghcr.io/myorg/app:1"),
                   _deployment("team", "ghcr.io/other/app:1")]
    assert [d["metadata"]["namespace"] for d in covered_deployments(scoped, deployments)] == ["team"]
    assert [d["metadata"]["namespace"] for d in covered_deployments(CRED, deployments)] == ["team", "intruder"]


def test_the_pull_secret_goes_where_an_application_names_a_served_image_before_its_first_deployment() -> None:
    assert CRED.registry is not None
    scoped = CRED._replace(registry=CRED.registry._replace(namespaces=("team", "new")))
    def app(namespace: str, image: str, override: str | None = None) -> dict[str, Any]:
        """An Application CR: its image in base, or overridden by its environment's."""
        return {"metadata": {"name": "shop", "namespace": namespace},
                "spec": {"environment": "prod", "base": {"image": image},
                         "environments": {"prod": {"image": override} if override else {}}}}

    applications = [app("new", "ghcr.io/other/shop:1", override="ghcr.io/myorg/shop:1"),
                    app("intruder", "ghcr.io/myorg/app:1"), app("team", "ghcr.io/other/app:1")]
    assert served_namespaces(scoped, [_deployment("team", "ghcr.io/myorg/app:1")], applications) == ["new", "team"]
    assert served_namespaces(scoped, [], applications[1:]) == []
    obj = {"metadata": {"name": "myorg", "namespace": "apprafter-system"},
           "spec": {"registry": {"hosts": ["ghcr.io/myorg/"], "backend": {"sealedSecretRef": {"name": "login"}}}}}
    assert concerned_by_image_of([obj], applications[0]) == ["myorg"]
    assert concerned_by_image_of([obj], applications[2]) == []


SCOPE_PROBLEMS = [
    ([], "spec.registry.namespaces", "1 to 64 namespaces; leave spec.registry.namespaces out for every namespace"),
    ("team", "spec.registry.namespaces", "1 to 64 namespaces"),
    ([f"ns-{i}" for i in range(65)], "spec.registry.namespaces", "1 to 64 namespaces"),
    (["team", "team"], "spec.registry.namespaces", "a namespace is listed twice"),
    (["Team"], "spec.registry.namespaces[0]", "a namespace is a Kubernetes namespace name"),
    (["ok", "-team"], "spec.registry.namespaces[1]", "a namespace is a Kubernetes namespace name"),
    (["a" * 64], "spec.registry.namespaces[0]", "at most 63"),
    (["team/x"], "spec.registry.namespaces[0]", "lowercase letters, digits and '-'"),
    ([7], "spec.registry.namespaces[0]", "a namespace is a Kubernetes namespace name"),
]


@pytest.mark.parametrize(("scope", "field", "said"), SCOPE_PROBLEMS, ids=[str(s[0])[:20] for s in SCOPE_PROBLEMS])
def test_the_webhook_twin_refuses_a_malformed_scope(scope: Any, field: str, said: str) -> None:
    obj = {"metadata": {"name": "x", "namespace": "apprafter-system"},
           "spec": {"registry": {"backend": {"sealedSecretRef": {"name": "l"}}, "hosts": ["ghcr.io/o/"],
                                 "namespaces": scope}}}
    problems = check(obj, "apprafter-system")
    assert any(f == field and said in reason for f, reason in problems), problems


def test_a_scope_is_read_sorted_and_absent_is_every_namespace() -> None:
    obj = {"metadata": {"name": "x", "namespace": "apprafter-system"},
           "spec": {"registry": {"backend": {"sealedSecretRef": {"name": "l"}}, "hosts": ["ghcr.io/o/"],
                                 "namespaces": ["team-b", "team-a"]}}}
    assert check(obj, "apprafter-system") == [] and _review(obj)["allowed"] is True
    assert read(obj).registry.namespaces == ("team-a", "team-b")  # type: ignore[union-attr]
    del obj["spec"]["registry"]["namespaces"]
    assert read(obj).registry.namespaces is None  # type: ignore[union-attr]
    refused = _review({**obj, "spec": {"registry": {**obj["spec"]["registry"], "namespaces": ["Team"]}}})
    assert not refused["allowed"] and "spec.registry.namespaces[0]" in refused["status"]["message"]
