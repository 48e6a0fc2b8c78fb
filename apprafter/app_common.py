"""What the `apprafter app` commands share: the Argo CD Applications `app add` made (found by their labels), the
--argocd-namespace option, reading a kind the cluster may not serve or show, and the error naming one object."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from renderer.argocd_app import APP_LABEL, ARGOCD_API
from renderer.names import ENVIRONMENT_LABEL
from toolchain.errors import Problem, UserError

if TYPE_CHECKING:
    from controller_runtime.client import Kube
    from controller_runtime.kinds import GroupVersionKind

__all__ = ["argocd_namespace_option", "failure", "kind", "listed", "one_environment", "registered",
           "registered_or_fail"]


def kind(api_version: str, name: str) -> GroupVersionKind:
    from controller_runtime.kinds import GroupVersionKind

    return GroupVersionKind(api_version, name)


def failure(where: str, message: str) -> UserError:
    return UserError([Problem(where, 0, 0, "", message)])


def argocd_namespace_option(func: Any) -> Any:
    return click.option("--argocd-namespace", default="argocd", show_default=True, metavar="NS",
                        help="Where Argo CD's Applications live.")(func)


async def listed(kube: Kube, what: Any, namespace: str, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The objects, [] when the cluster does not serve the kind or this user may not list them."""
    from controller_runtime.errors import KubeError

    try:
        found, _ = await kube.list(what, namespace, labels=labels)
    except KubeError as e:
        if e.code in (403, 404):
            return []
        raise
    return found


async def registered(kube: Kube, argocd_namespace: str, app: str | None = None,
                     environments: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The Argo CD Applications `app add` made (of `app`, of these environments), by name."""
    found, _ = await kube.list(kind(ARGOCD_API, "Application"), argocd_namespace,
                               labels={APP_LABEL: app} if app else None)
    found = [a for a in found if APP_LABEL in (a["metadata"].get("labels") or {})]
    if environments:
        found = [a for a in found if a["metadata"]["labels"].get(ENVIRONMENT_LABEL) in environments]
    return sorted(found, key=lambda a: a["metadata"]["name"])


async def registered_or_fail(kube: Kube, argocd_namespace: str, name: str,
                             environments: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """As registered, and an error naming the commands that help when there is none."""
    apps = await registered(kube, argocd_namespace, name, environments)
    if not apps:
        which = f"environment {', '.join(environments)} of " if environments else ""
        raise failure(f"app/{name}", f"no {which}{name} is registered in {argocd_namespace}: `apprafter app add` "
                      "registers it, `apprafter app list` shows what is")
    return apps


async def one_environment(kube: Kube, argocd_namespace: str, name: str,
                          environments: tuple[str, ...]) -> dict[str, Any]:
    """The one registered environment of `name` a command acts on (-e ENV, needed when it runs in several)."""
    apps = await registered_or_fail(kube, argocd_namespace, name, environments)
    if len(apps) > 1:
        envs = ", ".join(a["metadata"]["labels"].get(ENVIRONMENT_LABEL, "?") for a in apps)
        raise click.UsageError(f"{name} runs in several environments ({envs}): pass -e ENV")
    return apps[0]
