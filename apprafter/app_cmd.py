"""`apprafter app add | list | remove` (and the group's other commands): an app repository connected to the
cluster as one Argo CD Application per environment through our plugin, found again by its labels; no hand-written
Argo CD YAML. What each Application is: renderer.argocd_app; where the repository is: apprafter.app_source."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.app_common import argocd_namespace_option, failure, kind, listed, registered
from apprafter.app_local import rollback, scaffold
from apprafter.app_open import open_app
from apprafter.app_status import logs, status
from apprafter.cluster import print_objects, refused, with_cluster
from apprafter.errors import reported
from apprafter.extras import require
from apprafter.kube_options import kube_options
from apprafter.options import output_option
from renderer.argocd_app import (
    APP_LABEL,
    ARGOCD_API,
    CASCADE_FINALIZER,
    DEFAULT_PROJECT,
    argocd_application,
    instance_name,
)
from renderer.names import ENVIRONMENT_LABEL
from toolchain.errors import Problem, UserError

if TYPE_CHECKING:
    from controller_runtime.client import Kube

__all__ = ["app"]

ARGOCD_APP = ("argoproj.io/v1alpha1", "Application")
WAIT_SECONDS = 300.0


@click.group()
def app() -> None:
    """Your app in the cluster: add it to Argo CD, see it, read its logs, roll it back, remove it."""


@app.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@click.option("-e", "--env", "environments", multiple=True, metavar="ENV",
              help="An environment to deploy (repeatable; default: every environment the app declares).")
@click.option("--repo", metavar="URL", help="The repository Argo CD reads (default: this checkout's origin).")
@click.option("--revision", metavar="REV", help="The branch, tag or commit to follow (default: origin's default "
                                                "branch).")
@click.option("-n", "--namespace", metavar="NS", help="The namespace to deploy into (one environment only; "
                                                      "default: <app>-<env>).")
@click.option("--project", default=DEFAULT_PROJECT, show_default=True, metavar="NAME",
              help="The Argo CD AppProject (your team's, or the platform's tenant project).")
@argocd_namespace_option
@click.option("--create-namespace", is_flag=True,
              help="Let Argo CD create the namespace (only where the AppProject permits it).")
@click.option("--dry-run", is_flag=True, help="Print the Argo CD Applications as YAML instead of creating them "
                                              "(to commit them to an app-of-apps repository).")
@kube_options
@reported
def add(path: Path, environments: tuple[str, ...], repo: str | None, revision: str | None, namespace: str | None,
        project: str, argocd_namespace: str, create_namespace: bool, dry_run: bool, kubeconfig: Path | None,
        kube_context: str | None) -> None:
    """Deploy the app at PATH with Argo CD: one Argo CD Application `<app>-<env>` per environment, rendered by the
    AppRafter plugin from the repository, synced on every push."""
    from apprafter.app_source import source_of
    from renderer.load import load
    from renderer.locate import locate
    from renderer.render import render_loaded

    loaded = load(path)
    file, _ = locate(path)
    document = loaded.document
    name = str(document["metadata"]["name"])
    declared = sorted((document.get("spec") or {}).get("environments") or {})
    unknown = [e for e in environments if e not in declared]
    if unknown:
        raise failure(loaded.source.display, f"environment {', '.join(unknown)} is not declared; declared: "
                      f"{', '.join(declared)}")
    chosen = sorted(set(environments)) or declared
    if namespace and len(chosen) != 1:
        raise click.UsageError("--namespace takes one environment: pass -e ENV")
    for environment in chosen:  # a deployment the cluster would refuse is not registered
        render_loaded(loaded, environment, namespace=namespace or instance_name(name, environment))
    source, notes = source_of(file.parent.parent, repo, revision)
    for note in notes:
        click.echo(f"note: {note}", err=True)
    wanted = [argocd_application(name, e, source, namespace=namespace or instance_name(name, e), project=project,
                                 argocd_namespace=argocd_namespace, create_namespace=create_namespace)
              for e in chosen]
    if dry_run:
        from renderer.emit import dump_stream

        sys.stdout.write(dump_stream(wanted))
        return
    require("app add")
    for line in with_cluster(kubeconfig, kube_context, lambda kube, _: _register(kube, wanted, create_namespace)):
        sys.stdout.write(line + "\n")
    click.echo(f"Argo CD syncs it from {source.repo_url} ({source.revision}); watch it: apprafter app status {name}",
               err=True)


async def _exists(kube: Kube, what: Any, name: str, namespace: str | None = None) -> bool | None:
    """Whether the object exists; None when this user may not read it (then Argo CD says what is wrong)."""
    from controller_runtime.errors import KubeError

    try:
        return await kube.get(what, name, namespace) is not None
    except KubeError as e:
        if e.code != 403:
            raise
        return None


async def _register(kube: Kube, wanted: list[dict[str, Any]], create_namespace: bool) -> list[str]:
    """Each Argo CD Application written unless it already is so; refused when its name is another app's or another
    repository's, or its project or namespace is missing (nothing is written then)."""
    from controller_runtime.errors import KubeError
    from controller_runtime.writes import ensure

    problems: list[Problem] = []
    live: list[dict[str, Any] | None] = []
    first = wanted[0]["metadata"]["namespace"]
    project = wanted[0]["spec"]["project"]
    if await _exists(kube, kind(ARGOCD_API, "AppProject"), project, first) is False:
        problems.append(Problem(f"appproject/{project}", 0, 0, "", f"no AppProject {project} in namespace {first}: "
                                "`apprafter cluster-bootstrap` makes apprafter-tenants; your platform team names "
                                "yours (--project)"))
    for obj in wanted:
        meta, spec = obj["metadata"], obj["spec"]
        current = await kube.get(kind(*ARGOCD_APP), meta["name"], meta["namespace"])
        live.append(current)
        where = f"application.argoproj.io/{meta['name']}"
        if current is not None:
            theirs = (current["metadata"].get("labels") or {}).get(APP_LABEL)
            their_repo = ((current.get("spec") or {}).get("source") or {}).get("repoURL")
            if theirs != meta["labels"][APP_LABEL] or their_repo != spec["source"]["repoURL"]:
                problems.append(Problem(where, 0, 0, "", f"exists and deploys {their_repo or 'something else'}"
                                        f"{'' if theirs else ' (not made by apprafter app add)'}: an app name is one "
                                        "app in a cluster; rename yours or remove that one"))
        destination = spec["destination"]["namespace"]
        if not create_namespace and await _exists(kube, kind("v1", "Namespace"), destination) is False:
                problems.append(Problem(f"namespace/{destination}", 0, 0, "", "does not exist: a platform "
                                        "administrator creates tenant namespaces (or --create-namespace where your "
                                        "AppProject permits it)"))
    if problems:
        raise UserError(problems)
    lines = []
    for obj, current in zip(wanted, live, strict=True):
        try:
            done = await ensure(kube, None, obj, live=current)
        except KubeError as e:
            raise refused(e, f"application.argoproj.io/{obj['metadata']['name']}", "changed while adding it: run "
                          "again") from None
        lines.append(f"application.argoproj.io/{obj['metadata']['name']} {done.result}")
    return lines


@app.command("list")
@argocd_namespace_option
@output_option("app list", help="text: a table; json: a v1 List of the Argo CD Applications; yaml: the same List.")
@kube_options
@reported
def list_apps(argocd_namespace: str, output: str, kubeconfig: Path | None, kube_context: str | None) -> None:
    """Every app `apprafter app add` registered: each environment, where it deploys, Argo CD's sync and health."""
    require("app list")
    apps = with_cluster(kubeconfig, kube_context, lambda kube, _: registered(kube, argocd_namespace))
    print_objects(apps, output, ["APP", "ENVIRONMENT", "NAMESPACE", "SYNC", "HEALTH", "REVISION", "REPOSITORY"],
                  _row, f"No apps in {argocd_namespace}: `apprafter app add` registers one.")


def _row(a: Mapping[str, Any]) -> list[str]:
    labels, spec, st = a["metadata"]["labels"], a.get("spec") or {}, a.get("status") or {}
    source, sync = spec.get("source") or {}, st.get("sync") or {}
    return [labels[APP_LABEL], labels.get(ENVIRONMENT_LABEL, "?"), (spec.get("destination") or {}).get("namespace", ""),
            sync.get("status", "-"), (st.get("health") or {}).get("status", "-"),
            str(sync.get("revision", ""))[:12] or source.get("targetRevision", ""),
            f"{source.get('repoURL', '')} {source.get('path', '.')}"]


@app.command()
@click.argument("name")
@click.option("-e", "--env", "environments", multiple=True, metavar="ENV",
              help="Remove this environment only (repeatable; default: every environment of the app).")
@click.option("--yes", is_flag=True, help="Remove without asking (required when not at a terminal).")
@click.option("--wait", is_flag=True, help="Return once Argo CD has removed what it deployed.")
@click.option("--timeout", type=click.FloatRange(min=1), default=WAIT_SECONDS, show_default=True, metavar="SECONDS",
              help="With --wait: give up after this long, saying what Argo CD still waits for (exit 1).")
@argocd_namespace_option
@kube_options
@reported
def remove(name: str, environments: tuple[str, ...], yes: bool, wait: bool, timeout: float, argocd_namespace: str,
           kubeconfig: Path | None, kube_context: str | None) -> None:
    """Stop deploying the app NAME: its Argo CD Applications go, and with them what they deployed; the data of its
    needs is kept (retention) and binds again when the app comes back to the same namespace."""
    require("app remove")

    async def plan(kube: Kube, _: str) -> tuple[list[dict[str, Any]], list[str]]:
        apps = await registered(kube, argocd_namespace, name, environments)
        lines = []
        for a in apps:
            ns = (a["spec"].get("destination") or {}).get("namespace", "")
            lines.append(f"- application.argoproj.io/{a['metadata']['name']}: the app {name} in namespace {ns} "
                         "and everything it runs (Deployment, Service, routes, policies)")
            for claim in await _claims(kube, ns, a["metadata"]["name"]):
                lines.append(f"  kept: resourceclaim/{claim['metadata']['name']} "
                             f"({(claim.get('spec') or {}).get('type', '?')}): its data stays (retention); adding "
                             f"the app to {ns} again binds it")
        return apps, lines

    apps, lines = with_cluster(kubeconfig, kube_context, plan)
    if not apps:
        which = f" environment {', '.join(environments)}" if environments else ""
        raise failure(f"app/{name}", f"no{which} of {name} is registered in {argocd_namespace} (`apprafter app list`)")
    sys.stdout.write(f"apprafter app remove {name} will remove:\n" + "".join(f"  {line}\n" for line in lines))
    if not yes:
        if not sys.stdin.isatty():
            raise failure(f"app/{name}", "nothing removed: pass --yes to remove (not at a terminal to ask)")
        if not click.confirm("Remove?", default=False, err=True):
            raise failure(f"app/{name}", "nothing removed")
    with_cluster(kubeconfig, kube_context, lambda kube, _: _delete(kube, apps, timeout if wait else None))
    click.echo(f"removed: {', '.join(a['metadata']['name'] for a in apps)}", err=True)


async def _claims(kube: Kube, namespace: str, instance: str) -> list[dict[str, Any]]:
    from renderer.crds import RESOURCE_CLAIM
    from renderer.names import INSTANCE_LABEL

    found = await listed(kube, RESOURCE_CLAIM, namespace, {INSTANCE_LABEL: instance})
    return sorted(found, key=lambda c: c["metadata"]["name"])


async def _delete(kube: Kube, apps: list[dict[str, Any]], wait: float | None) -> None:
    """Delete each Argo CD Application with Argo CD's cascade (its finalizer added where it lacks it), then, for
    `wait` seconds when it is not None, until Argo CD has finished (the Application gone)."""
    from apprafter.cluster import wait_for
    from controller_runtime.errors import KubeError

    for a in apps:
        meta = a["metadata"]
        if meta.get("deletionTimestamp"):  # removed already (no finalizer may be added now): waited for below
            continue
        try:
            if CASCADE_FINALIZER not in (meta.get("finalizers") or []):
                await kube.merge(kind(*ARGOCD_APP), meta["name"], meta["namespace"],
                                 {"metadata": {"finalizers": [*(meta.get("finalizers") or []), CASCADE_FINALIZER]}},
                                 resource_version=meta["resourceVersion"])
            await kube.delete(kind(*ARGOCD_APP), meta["name"], meta["namespace"])
        except KubeError as e:
            if e.code == 404:  # gone meanwhile: what was asked is done
                continue
            raise refused(e, f"application.argoproj.io/{meta['name']}", "changed while removing it: run again") \
                from None
    for a in apps if wait is not None else ():
        assert wait is not None
        meta = a["metadata"]
        if await wait_for(kube, kind(*ARGOCD_APP), meta["name"], meta["namespace"], lambda obj: obj is None,
                          wait) is None:
            left = await _left(kube, await kube.get(kind(*ARGOCD_APP), meta["name"], meta["namespace"]) or {})
            raise failure(f"application.argoproj.io/{meta['name']}", f"still there after {wait:.0f} s, "
                          f"waiting for {'; '.join(left) if left else 'nothing it names'}: "
                          f"`apprafter app status {meta['labels'][APP_LABEL]}` says more")


async def _left(kube: Kube, argocd: Mapping[str, Any]) -> list[str]:
    """Why a deleted Argo CD Application is still there: the finalizers it still carries (Argo CD's own until its
    cascade has deleted every resource), then each of its resources Argo CD has not deleted yet."""
    from controller_runtime.errors import KubeError

    left = [f"finalizer {f}" for f in (argocd.get("metadata") or {}).get("finalizers") or []]
    for r in (argocd.get("status") or {}).get("resources") or []:
        api = f"{r['group']}/{r['version']}" if r.get("group") else str(r.get("version", "v1"))
        try:
            obj = await kube.get(kind(api, r["kind"]), r["name"], r.get("namespace") or None)
        except KubeError:  # a kind the cluster no longer serves: nothing of it is left
            continue
        if obj is not None and not obj["metadata"].get("deletionTimestamp"):
            left.append(f"{r['kind'].lower()}/{r['name']} not deleted yet")
    return left


app.add_command(status)
app.add_command(logs)
app.add_command(rollback)
app.add_command(scaffold)
app.add_command(open_app)
