"""`apprafter db backups`: what of an app's pg database can be restored in one environment: from its Cluster's first
recoverable point to its latest (lifecycle.backends.pg_backup.recoverable), read from the Cluster its claim is on;
and its generations: the one the app uses, the ones its restores kept (lifecycle.generation_drop.kept_generations)."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.app_common import argocd_namespace_option, failure, one_environment
from apprafter.cluster import with_cluster
from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import output_option

if TYPE_CHECKING:
    from controller_runtime.client import Kube

__all__ = ["backups"]


async def _backups(kube: Kube, argocd: dict[str, Any], name: str) -> dict[str, Any]:
    """The report of the app's pg claim in the environment `argocd` deploys (a UserError when it has none)."""
    from lifecycle.backends.pg_backup import recoverable
    from lifecycle.backends.pg_cluster import CLUSTER, cluster_at, generation_of, tenant_of
    from lifecycle.generation_drop import kept_generations
    from renderer.crds import RESOURCE_CLAIM
    from renderer.names import ENVIRONMENT_LABEL

    namespace = argocd["spec"]["destination"]["namespace"]
    environment = argocd["metadata"]["labels"].get(ENVIRONMENT_LABEL, "")
    claim_name = f"{name}-pg"
    claim = await kube.get(RESOURCE_CLAIM, claim_name, namespace)
    if claim is None:
        raise failure(f"app/{name}", f"no pg need in environment {environment} (no ResourceClaim "
                      f"{namespace}/{claim_name})")
    status = claim.get("status") or {}
    where = cluster_at(str((status.get("connection") or {}).get("host") or ""))
    if where is None:
        raise failure(f"app/{name}", f"its pg claim {namespace}/{claim_name} is not provisioned on a CloudNativePG "
                      "Cluster yet (`apprafter app status` says why)")
    cluster = await kube.get(CLUSTER, where[0], where[1])
    if cluster is None:
        raise failure(f"app/{name}", f"the Cluster {where[1]}/{where[0]} its pg claim is on is gone")
    found = recoverable(cluster, datetime.datetime.now(datetime.UTC))
    return {"app": name, "environment": environment, "namespace": namespace, "provider": status.get("provider"),
            "cluster": {"name": where[0], "namespace": where[1]}, "earliest": found.first, "latest": found.latest,
            "lastBackup": found.last_backup, "archiving": found.archiving, "problem": found.problem,
            "generation": {"number": generation_of(claim), "database": tenant_of(claim).name},
            "kept": [{"number": n, "database": tenant_of(claim, n).name} for n in kept_generations(claim)]}


def _text(r: dict[str, Any]) -> str:
    lines = [f"{r['app']} ({r['environment']}, namespace {r['namespace']}): pg on Cluster "
             f"{r['cluster']['namespace']}/{r['cluster']['name']} (ServiceProvider {r['provider']})",
             f"  earliest:     {r['earliest'] or '—'}",
             f"  latest:       {r['latest'] or '—'}" + (" (now: WAL is archived continuously, at most 5 minutes "
                                                       "behind)" if r["archiving"] else ""),
             f"  last backup:  {r['lastBackup'] or '—'}"]
    if r["problem"]:
        lines.append(f"  problem:      {r['problem']}")
    lines.append(f"  generation:   {r['generation']['number']} (database {r['generation']['database']}, the app's)")
    lines.extend(f"  kept:         {k['number']} (database {k['database']}; `apprafter db drop-generation "
                 f"{r['app']} -e {r['environment']} --generation {k['number']}` drops it)" for k in r["kept"])
    return "\n".join(lines) + "\n"


@click.command()
@click.argument("name")
@argocd_namespace_option
@click.option("-e", "--env", "environments", multiple=True, metavar="ENV",
              help="The environment (needed when the app runs in several).")
@output_option("db backups", help="text: a few lines; json: the same as an object; yaml: the same.")
@kube_options
@reported
def backups(name: str, environments: tuple[str, ...], argocd_namespace: str, output: str, kubeconfig: Path | None,
            kube_context: str | None) -> None:
    """What app NAME's pg database can be restored to in one environment: the earliest and the latest point, from
    the backups of the CloudNativePG Cluster it is on; the generation the app uses and those its restores kept.
    Exits 1 when nothing can be restored yet."""
    async def read(kube: Kube, _: str) -> dict[str, Any]:
        return await _backups(kube, await one_environment(kube, argocd_namespace, name, environments), name)

    report = with_cluster(kubeconfig, kube_context, read)
    if output == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(_text(report))
    if report["earliest"] is None:
        raise failure(f"app/{name}", f"nothing can be restored yet: {report['problem']}")
