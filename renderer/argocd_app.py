"""The Argo CD Application that deploys one environment of an app through our plugin: what `apprafter app add`
writes, named `<app>-<env>`, labelled so `app list | status | remove` find it again."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from renderer.names import ENVIRONMENT_LABEL, GROUP

__all__ = ["APP_LABEL", "ARGOCD_API", "CASCADE_FINALIZER", "DEFAULT_PROJECT", "IN_CLUSTER", "PLUGIN", "Source",
           "argocd_application", "instance_name", "plain_repo_url"]

ARGOCD_API = "argoproj.io/v1alpha1"
APP_LABEL = f"{GROUP}/app"
PLUGIN = "apprafter-cue-v1"  # plugin.yaml: name apprafter-cue, version v1
DEFAULT_PROJECT = "apprafter-tenants"  # deploy/argocd/tenant-project.yaml, made by cluster-bootstrap
IN_CLUSTER = "https://kubernetes.default.svc"
# Deleting the Argo CD Application deletes what it deployed (the apprafter.io Application; Kubernetes' garbage
# collector then removes the children it owns, and the claims' data stays by retention), as `argocd app delete
# --cascade` does; in the background: the Argo CD Application is gone once the apprafter.io Application is, without
# waiting for every pod to stop.
CASCADE_FINALIZER = "resources-finalizer.argocd.argoproj.io/background"
_LOGIN = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", re.IGNORECASE)


class Source(NamedTuple):
    """Where Argo CD reads the app: the repository, the app's directory in it (`.` at the root) and the revision."""

    repo_url: str
    path: str
    revision: str


def plain_repo_url(url: str) -> str:
    """The repository URL without a login written into it (`https://user:token@host/...`): Argo CD takes the
    credentials from a repository Secret (`apprafter repo creds add`), never from the URL it shows everyone."""
    return _LOGIN.sub(r"\1", url.strip())


def instance_name(app: str, environment: str) -> str:
    """`<app>-<env>`: the Argo CD Application's name, also the default namespace (docs/argocd.md)."""
    return f"{app}-{environment}"


def argocd_application(app: str, environment: str, source: Source, *, namespace: str, project: str,
                       argocd_namespace: str, create_namespace: bool = False) -> dict[str, Any]:
    """The Argo CD Application for `environment` of `app`: our plugin by name with the environment as its parameter,
    auto-synced with prune and self-heal (a push deploys), deleting what it deployed when it is deleted."""
    sync: dict[str, Any] = {"automated": {"prune": True, "selfHeal": True}}
    if create_namespace:
        sync["syncOptions"] = ["CreateNamespace=true"]
    return {
        "apiVersion": ARGOCD_API, "kind": "Application",
        "metadata": {"name": instance_name(app, environment), "namespace": argocd_namespace,
                     "labels": {APP_LABEL: app, ENVIRONMENT_LABEL: environment},
                     "finalizers": [CASCADE_FINALIZER]},
        "spec": {
            "project": project,
            "source": {"repoURL": source.repo_url, "path": source.path, "targetRevision": source.revision,
                       "plugin": {"name": PLUGIN, "parameters": [{"name": "environment", "string": environment}]}},
            "destination": {"server": IN_CLUSTER, "namespace": namespace},
            "syncPolicy": sync,
        },
    }
