"""What a SourceCredential derives (spec §3.12), decided without a cluster: the Argo CD repo-creds Secrets (one per
repository prefix) or, for a git half scoped to Argo CD projects, a project-scoped repository Secret per repository an
Application of a listed project syncs; the dockerconfigjson pull secret of each workload namespace in the registry
half's scope whose rendered image it covers, and which pull secrets a Deployment's pods reference. Only these objects
carry the material."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lifecycle.credentials.coverage import (
    application_image,
    covers_image,
    covers_repository,
    deployment_image,
    repository_users,
    serving,
)
from lifecycle.credentials.git_urls import normalize_git_url
from lifecycle.credentials.material import Material
from lifecycle.credentials.spec import Credential, Half, argocd_url, in_scope, pull_key
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL

__all__ = [
    "CREDENTIAL_LABEL",
    "CREDENTIAL_NAMESPACE_LABEL",
    "FINALIZER",
    "attached",
    "attachment",
    "attachments",
    "covered_deployments",
    "covers",
    "derived_by",
    "derived_from",
    "half_of",
    "pull_secret",
    "pull_secret_name",
    "pull_secrets_for",
    "repo_creds",
    "repository_secrets",
    "served_namespaces",
    "serves",
]

CREDENTIAL_LABEL = "apprafter.io/source-credential"  # on every derived Secret: which credential it came from
# ... and that credential's namespace: an operator touches only what its own records namespace's credentials derived
CREDENTIAL_NAMESPACE_LABEL = "apprafter.io/source-credential-namespace"
FINALIZER = "apprafter.io/derived-secrets"  # the derived Secrets are removed before the credential goes
ARGOCD_SECRET_TYPE = "argocd.argoproj.io/secret-type"  # Argo CD lists credential templates by this label
PULL_SECRET_TYPE = "kubernetes.io/dockerconfigjson"


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


def derived_by(secrets: Iterable[Mapping[str, Any]], namespace: str, credential: str) -> list[Mapping[str, Any]]:
    """The Secrets derived from the credential `namespace/credential`."""
    return [s for s in secrets if derived_from(s) == (namespace, credential)]


def half_of(secret: Mapping[str, Any]) -> str:
    """Which half a derived Secret comes from: a repo-creds template is git's, a pull secret the registry's."""
    return "registry" if secret.get("type") == PULL_SECRET_TYPE else "git"


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


def repository_secrets(credential: Credential, login: Material, namespace: str,
                       argo_applications: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A git half scoped to Argo CD projects: one project-scoped repository Secret (label secret-type repository;
    `type`, `url`, `project`, `username`, `password`) per repository URL an Application of a listed project syncs
    under the prefixes, and no template. Argo CD gives a repository Secret with a `project` only to that project's
    Applications (getRepositorySecret: same URL, same project); a repo-creds template has no project in Argo CD
    (v3.1 and v3.6 match templates by URL alone), so a template would serve every project."""
    assert credential.git is not None and credential.git.projects is not None
    prefixes = [argocd_url(p) for p in credential.git.covers]
    wanted = {(user.project, normalize_git_url(user.target)): user.target
              for user in sorted(repository_users(argo_applications), key=lambda u: (u.project, u.target))
              if user.project in credential.git.projects and covers_repository(prefixes, user.target)}
    out = []
    for (project, normal), url in sorted(wanted.items()):
        name = f"apprafter-{credential.name}-repo-{_short(f'{project} {normal}')}"[:253]
        out.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": name, "namespace": namespace,
                                 "labels": {**_labels(credential), ARGOCD_SECRET_TYPE: "repository"}},
                    "data": {"type": _b64("git"), "url": _b64(url), "project": _b64(project),
                             "username": _b64(login.username), "password": _b64(login.password)}})
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
    return {"apiVersion": "v1", "kind": "Secret", "type": PULL_SECRET_TYPE,
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


def served_namespaces(credential: Credential, deployments: Iterable[Mapping[str, Any]],
                      applications: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """The namespaces the credential's pull secret goes to: those of the Deployments it covers, and those of our
    Applications whose image it serves before their first Deployment exists (their first pod pulls with it, and a
    followed tag's first look at the registry logs in with it)."""
    namespaces = {str(d["metadata"]["namespace"]) for d in covered_deployments(credential, deployments)}
    for app in applications:
        image, namespace = application_image(app), str(app["metadata"].get("namespace") or "")
        if image is not None and serves(credential.registry, image, namespace):
            namespaces.add(namespace)
    return sorted(namespaces)


def attached(deployment: Mapping[str, Any]) -> list[str]:
    """The pull secrets a Deployment's pod template references, sorted."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return sorted(str(s["name"]) for s in spec.get("imagePullSecrets") or [] if s.get("name"))


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


def attachments(credential: str, carried: Credential | None, credentials: Iterable[Mapping[str, Any]],
                deployments: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The attachment of each Deployment `credential` covers, or once covered: the pull secrets every credential
    serving now gives its image (one field manager holds the whole list, so it is computed from all of them, this
    one as the pass carries it out: `carried`, None when it is being deleted)."""
    serving_now = serving(credentials, (credential, carried))
    mine = pull_secret_name(credential)
    out = []
    for deployment in deployments:
        wanted = pull_secrets_for(deployment_image(deployment), str(deployment["metadata"]["namespace"]), serving_now)
        if mine in wanted or mine in attached(deployment):
            out.append(attachment(deployment, wanted))
    return out
