"""What a SourceCredential derives (spec §3.12), decided without a cluster: the material read from its unsealed
Secret, the Argo CD repo-creds Secrets (one per repository prefix), the dockerconfigjson pull secret of each workload
namespace in the registry half's scope whose rendered image it covers, which pull secrets a Deployment's pods
reference, and the status of each half. Messages name keys and objects, never a value of the material."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from lifecycle.conditions import Condition, render
from lifecycle.credentials.checks import Checked, valid_condition
from lifecycle.credentials.gate import User, covers_image, image_users, repository_users
from lifecycle.credentials.spec import Credential, Half, argocd_url, in_scope, pull_key
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL

__all__ = ["CREDENTIAL_LABEL", "CREDENTIAL_NAMESPACE_LABEL", "FINALIZER", "MATERIAL_KEYS", "Material",
           "Unreadable", "attachment", "covered_deployments", "covers", "derived_from", "half_conditions",
           "login_from", "material", "pull_secret", "pull_secret_name", "pull_secrets_for", "repo_creds", "serves",
           "status", "status_fields", "users"]

CREDENTIAL_LABEL = "apprafter.io/source-credential"  # on every derived Secret: which credential it came from
# ... and that credential's namespace: an operator touches only what its own records namespace's credentials derived
CREDENTIAL_NAMESPACE_LABEL = "apprafter.io/source-credential-namespace"
FINALIZER = "apprafter.io/derived-secrets"  # the derived Secrets are removed before the credential goes
ARGOCD_SECRET_TYPE = "argocd.argoproj.io/secret-type"  # Argo CD lists credential templates by this label
MATERIAL_KEYS = ("username", "password")  # kubernetes.io/basic-auth's keys, in the Secret the backend yields
APP_CONTAINER = "app"  # the renderer's container name in every Deployment (renderer/manifests/workload.py)


class Material(NamedTuple):
    """A half's login. Never logged, never in a message or an Event: only the objects derived from it carry it.
    `origin` says where it was read (an OpenBao path and version; empty for an unsealed Secret)."""

    username: str
    password: str
    origin: str = ""

    def __repr__(self) -> str:  # a traceback or a debug print never shows the password
        return "Material(<redacted>)"


class Unreadable(NamedTuple):
    """A backend that could not say whether the material is there (Present Unknown): the reason and why. What the
    half derived before stays as it was."""

    reason: str
    message: str


def material(secret: Mapping[str, Any] | None, name: str) -> Material | str:
    """The login in the unsealed Secret `name`, or why there is none (which keys are missing or unreadable)."""
    if secret is None:
        return (f"Secret {name} not found (the SealedSecrets controller makes it from the SealedSecret of that name; "
                "on a cluster without it, nothing unseals the material)")
    data = secret.get("data") or {}
    values: dict[str, str | None] = {}
    for key in MATERIAL_KEYS:
        try:
            values[key] = base64.b64decode(str(data.get(key) or ""), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            values[key] = None
    return login_from(values, f"Secret {name}")


def login_from(values: Mapping[str, Any], where: str) -> Material | str:
    """The login in a backend's key-value map (the keys MATERIAL_KEYS, one line of text each), or which keys are
    missing or unusable in `where` (never their values)."""
    wrong = [key for key in MATERIAL_KEYS if not isinstance(values.get(key), str) or not values[key]
             or "\n" in values[key] or "\r" in values[key]]
    if wrong:
        return f"{where} lacks a usable {' and '.join(wrong)} (keys {', '.join(MATERIAL_KEYS)}: one line of UTF-8 each)"
    return Material(str(values["username"]), str(values["password"]))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _labels(credential: Credential) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, CREDENTIAL_LABEL: credential.name,
            CREDENTIAL_NAMESPACE_LABEL: credential.namespace}


def derived_from(secret: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the credential a derived Secret came from, None for any other Secret."""
    labels = secret["metadata"].get("labels") or {}
    name, namespace = labels.get(CREDENTIAL_LABEL), labels.get(CREDENTIAL_NAMESPACE_LABEL)
    return (str(namespace), str(name)) if name and namespace else None


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def repo_creds(credential: Credential, login: Material, namespace: str) -> list[dict[str, Any]]:
    """One Argo CD credential template per repository prefix (label secret-type repo-creds; `type`, `url`,
    `username`, `password`), in Argo CD's namespace. Argo CD picks the longest matching `url` for a clone; a
    repository Secret of the repository itself overrides any template."""
    assert credential.git is not None
    out = []
    for prefix in credential.git.covers:
        url = argocd_url(prefix)
        name = f"apprafter-{credential.name}-repo-{_short(url.lower())}"[:253]
        out.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": name, "namespace": namespace,
                                 "labels": {**_labels(credential), ARGOCD_SECRET_TYPE: "repo-creds"}},
                    "data": {"type": _b64("git"), "url": _b64(url), "username": _b64(login.username),
                             "password": _b64(login.password)}})
    return sorted(out, key=lambda s: s["metadata"]["name"])


def pull_secret_name(credential: str) -> str:
    return f"apprafter-pull-{credential}"[:253]


def pull_secret(credential: Credential, login: Material, namespace: str) -> dict[str, Any]:
    """The kubernetes.io/dockerconfigjson Secret of one workload namespace: one `auths` entry per covered host."""
    assert credential.registry is not None
    auth = _b64(f"{login.username}:{login.password}")
    auths = {pull_key(host): {"username": login.username, "password": login.password, "auth": auth}
             for host in credential.registry.covers}
    config = json.dumps({"auths": auths}, sort_keys=True, separators=(",", ":"))
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": pull_secret_name(credential.name), "namespace": namespace,
                         "labels": _labels(credential)},
            "data": {".dockerconfigjson": _b64(config)}}


def covers(half: Half | None, image: str) -> bool:
    """Whether a registry half covers an image: its repository (Docker Hub names normalised) is a host entry or lies
    below one, path component by component (ghcr.io/my does not cover ghcr.io/myorg/app)."""
    return half is not None and covers_image(map(pull_key, half.covers), image)


def serves(half: Half | None, image: str, namespace: str) -> bool:
    """Whether a registry half gives its pull secret to a workload: it covers the image and its scope lists the
    workload's namespace (or lists none: every namespace)."""
    return half is not None and covers(half, image) and in_scope(half.namespaces, namespace)


def deployment_image(deployment: Mapping[str, Any]) -> str | None:
    """The image the renderer's app container runs (the rendered image)."""
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    return next((str(c.get("image")) for c in containers if c.get("name") == APP_CONTAINER and c.get("image")), None)


def users(argo_applications: Iterable[Mapping[str, Any]], deployments: Iterable[Mapping[str, Any]]) -> list[User]:
    """What a credential's coverage serves, for the gate (the operator's and `repo creds remove`'s prediction): the
    repositories Argo CD's Applications sync and the images our Deployments run, named by their Application."""
    images = []
    for deployment in deployments:
        meta = deployment["metadata"]
        image = deployment_image(deployment)
        if image:
            app = (meta.get("labels") or {}).get(NAME_LABEL) or meta["name"]
            images.append((f"Application {meta['namespace']}/{app}", image, str(meta["namespace"])))
    return [*repository_users(argo_applications), *image_users(images)]


def pull_secrets_for(image: str | None, namespace: str, credentials: Iterable[Credential]) -> list[str]:
    """The pull secrets a Deployment's pods in `namespace` reference: every credential whose registry half covers
    the image and serves the namespace."""
    if image is None:
        return []
    return sorted(pull_secret_name(c.name) for c in credentials if serves(c.registry, image, namespace))


def covered_deployments(credential: Credential, deployments: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Deployments (ours) whose rendered image the credential's registry half covers, in namespaces it serves:
    where its pull secret goes."""
    return [d for d in deployments if (image := deployment_image(d))
            and serves(credential.registry, image, str(d["metadata"]["namespace"]))]


def attachment(deployment: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """What the credential controller applies to a Deployment under its own field manager: only the pod template's
    imagePullSecrets (a list keyed by name, so the Application controller's fields are untouched). A change rolls
    the pods, so a pod that failed to pull for want of the secret is replaced; a rotation keeps the name and rolls
    nothing."""
    meta = deployment["metadata"]
    body: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment",
                            "metadata": {"name": meta["name"], "namespace": meta["namespace"]}}
    if names:
        body["spec"] = {"template": {"spec": {"imagePullSecrets": [{"name": n} for n in names]}}}
    return body


def half_conditions(found: Material | Unreadable | str | None, checked: Checked | None = None) -> list[Condition]:
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
    if credential.registry is not None:
        fields["registry"] = {"hosts": sorted(pull_key(h) for h in credential.registry.covers)}
        if credential.registry.namespaces is not None:
            fields["registry"]["namespaces"] = sorted(credential.registry.namespaces)
    return fields


def status(credential: Credential, found: Mapping[str, Material | Unreadable | str | None], previous: Mapping[str, Any],
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
