"""`apprafter app status | logs`: one app's environments as the cluster holds them (what lifecycle.app_report says
of each), and its pods' logs (as `kubectl logs -l`, each line after its pod and container)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.app_common import (
    argocd_namespace_option,
    failure,
    kind,
    listed,
    one_environment,
    registered_or_fail,
)
from apprafter.cluster import with_cluster
from apprafter.errors import reported
from apprafter.extras import require
from apprafter.kube_options import kube_options
from apprafter.options import output_option

if TYPE_CHECKING:
    from controller_runtime.client import Kube
    from lifecycle.app_report import EnvReport

__all__ = ["logs", "status"]

MAX_STREAMS = 10  # logs -f: at most this many containers followed at once (kubectl's --max-log-requests is 5)
_SINCE = re.compile(r"^(\d+)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


async def _report(kube: Kube, argocd: dict[str, Any]) -> EnvReport:
    """What `status` says of the environment Argo CD Application `argocd` deploys."""
    from compatibility.crd import MIGRATION_PLAN
    from controller_runtime.errors import KubeError
    from lifecycle.app_report import report
    from renderer.argocd_app import APP_LABEL
    from renderer.crds import APPLICATION, RESOURCE_CLAIM
    from renderer.names import ENVIRONMENT_LABEL, INSTANCE_LABEL

    labels = argocd["metadata"]["labels"]
    name, environment = labels[APP_LABEL], labels.get(ENVIRONMENT_LABEL, "")
    namespace = ((argocd.get("spec") or {}).get("destination") or {}).get("namespace", "")
    mine = {INSTANCE_LABEL: argocd["metadata"]["name"]}
    try:
        missing = await kube.get(kind("v1", "Namespace"), namespace) is None
    except KubeError as e:
        if e.code != 403:
            raise
        missing = False
    application = None
    if not missing:
        try:
            application = await kube.get(APPLICATION, name, namespace)
        except KubeError as e:
            if e.code not in (403, 404):
                raise
    return report(name, environment, namespace, argocd, application,
                  await listed(kube, RESOURCE_CLAIM, namespace, mine) if not missing else [],
                  await listed(kube, kind("gateway.networking.k8s.io/v1", "HTTPRoute"), namespace, mine)
                  if not missing else [],
                  await listed(kube, kind("cert-manager.io/v1", "Certificate"), namespace, mine)
                  if not missing else [],
                  await listed(kube, MIGRATION_PLAN, namespace) if not missing else [],
                  namespace_missing=missing)


def _text(r: EnvReport) -> str:
    lines = [f"{r.argocd_app} (namespace {r.namespace})",
             f"  argo cd:   {r.sync}, {r.health}" + (f" at {r.revision}" if r.revision else ""),
             f"  phase:     {r.phase}, replicas {r.replicas}" + (f", {r.url}" if r.url else "")]
    for c in r.claims:
        lines.append(f"  claim:     {c.name} ({c.type}) " + ("ready" if c.ready else f"waiting: {c.why}")
                     + (f"; rotating: {c.rotation}" if c.rotation else ""))
    for h in r.hostnames:
        lines.append(f"  hostname:  {h.hostname}" + (f" certificate {h.certificate}" if h.certificate else ""))
    for p in r.plans:
        lines.append(f"  waiting:   MigrationPlan {p.name} ({p.classification}): {p.approve}")
    if r.problem:
        lines.append(f"  problem:   {r.problem}")
    return "\n".join(lines) + "\n"


def _app_options(func: Any) -> Any:
    func = argocd_namespace_option(func)
    return click.option("-e", "--env", "environments", multiple=True, metavar="ENV",
                        help="This environment only (repeatable; default: every one registered).")(func)


@click.command()
@click.argument("name")
@_app_options
@output_option("app status", help="text: each environment in a few lines; json: the same as a list; yaml: the same.")
@kube_options
@reported
def status(name: str, environments: tuple[str, ...], argocd_namespace: str, output: str, kubeconfig: Path | None,
           kube_context: str | None) -> None:
    """Where app NAME stands in each environment: Argo CD's sync and health, phase and replicas, claims, hostnames
    and their certificates, the MigrationPlans waiting (with the command that approves each), what is wrong."""
    require("app status")

    async def read(kube: Kube, _: str) -> list[EnvReport]:
        return [await _report(kube, a) for a in await registered_or_fail(kube, argocd_namespace, name,
                                                                         environments)]

    reports = with_cluster(kubeconfig, kube_context, read)
    if output == "json":
        sys.stdout.write(json.dumps([r.as_json() for r in reports], indent=2) + "\n")
        return
    sys.stdout.write("".join(_text(r) for r in reports))


def _seconds(since: str | None) -> int | None:
    if since is None:
        return None
    match = _SINCE.match(since.strip())
    if not match or int(match.group(1)) == 0:
        raise click.BadParameter(f"{since!r}: a duration such as 30s, 5m, 2h or 1d", param_hint="--since")
    return int(match.group(1)) * _UNIT[match.group(2)]


@click.command()
@click.argument("name")
@_app_options
@click.option("-f", "--follow", is_flag=True, help="Keep printing as the pods log (until interrupted).")
@click.option("--since", metavar="DURATION", help="Only lines newer than this (30s, 5m, 2h, 1d).")
@click.option("--tail", type=click.IntRange(min=0), metavar="N", help="Only the last N lines of each container.")
@click.option("-c", "--container", metavar="NAME", help="This container only (default: every container).")
@kube_options
@reported
def logs(name: str, environments: tuple[str, ...], argocd_namespace: str, follow: bool, since: str | None,
         tail: int | None, container: str | None, kubeconfig: Path | None, kube_context: str | None) -> None:
    """The logs of app NAME's pods in one environment, each line after `[pod/container]` (as `kubectl logs -l`)."""
    since_seconds = _seconds(since)
    require("app logs")

    async def run(kube: Kube, _: str) -> int:
        argocd = await one_environment(kube, argocd_namespace, name, environments)
        return await _print_logs(kube, argocd, follow, since_seconds, tail, container)

    if with_cluster(kubeconfig, kube_context, run) == 0:
        click.echo(f"no pods of {name} are running (`apprafter app status {name}` says why)", err=True)


async def _print_logs(kube: Kube, argocd: dict[str, Any], follow: bool, since_seconds: int | None,
                      tail: int | None, only: str | None) -> int:
    """Every container's lines (followed together, each line as it comes); the number of containers read."""
    import asyncio

    from controller_runtime.pod_logs import pod_log
    from renderer.names import INSTANCE_LABEL

    namespace = argocd["spec"]["destination"]["namespace"]
    pods = await listed(kube, kind("v1", "Pod"), namespace, {INSTANCE_LABEL: argocd["metadata"]["name"]})
    streams = [(p["metadata"]["name"], c["name"]) for p in sorted(pods, key=lambda p: p["metadata"]["name"])
               for c in (p.get("spec") or {}).get("containers") or () if only in (None, c["name"])]
    if only is not None and pods and not streams:
        raise failure(f"container/{only}", "no such container in the app's pods")
    if follow and len(streams) > MAX_STREAMS:
        raise failure(f"app/{argocd['metadata']['name']}", f"{len(streams)} containers to follow, at most "
                    f"{MAX_STREAMS} at once: pass -c NAME")

    async def one(pod: str, container: str) -> None:
        async for line in pod_log(kube, namespace, pod, container, follow=follow, since_seconds=since_seconds,
                                  tail_lines=tail):
            sys.stdout.write(f"[{pod}/{container}] {line}\n")
            sys.stdout.flush()

    if follow:
        await asyncio.gather(*(one(p, c) for p, c in streams))
    else:
        for p, c in streams:
            await one(p, c)
    return len(streams)
