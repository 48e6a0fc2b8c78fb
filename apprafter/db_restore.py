"""`apprafter db restore APP -e ENV --to TIME`: a point-in-time restore of one environment's pg database, into a new
database of the same provider (never in place).

The request is a new value of the need's ResourceClaim's `apprafter.io/restore` annotation, `<request>@<time>` (who
may write it and what it may say: compatibility.authority.restore_writer), once TIME is checked against what the
claim's Cluster can restore (lifecycle.restore.outside, what `apprafter db backups` prints). The operator opens a
data-migration MigrationPlan for it, which the command prints; nothing happens before a person approves it
(lifecycle.restore: what happens then). `--wait` waits for the restore itself too."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.cluster import refused, with_cluster
from apprafter.db_request import Followed, follow
from apprafter.db_rotate import need_claim, request_id
from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import env_option, namespace_option
from apprafter.repo_login import fail
from compatibility.authority import RESTORE_ANNOTATION, RESTORED_TYPES

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube

__all__ = ["restore"]

WAIT_SECONDS = 60.0
# the phases that say the operator has answered the request
OPENED = ("AwaitingApproval", "Queued", "Restoring", "Copying", "Restored", "Failed")
ENDED = ("Restored", "Failed")


def _restore(claim: dict[str, Any] | None) -> dict[str, Any]:
    found = ((claim or {}).get("status") or {}).get("restore")
    return found if isinstance(found, dict) else {}


def _asked(claim: dict[str, Any] | None) -> str | None:
    return (((claim or {}).get("metadata") or {}).get("annotations") or {}).get(RESTORE_ANNOTATION)



RESTORE = Followed("restore", _restore, _asked, OPENED, ENDED, "nothing happens before it", taken_over_ok=True)

@click.command("restore")
@kube_options
@click.argument("app")
@env_option("The environment whose database to restore.", required=True)
@click.option("--need", default="pg", show_default=True, metavar="NEED",
              help=f"The need whose data to restore ({', '.join(RESTORED_TYPES)}).")
@click.option("--to", "to", required=True, metavar="TIME",
              help="The time to restore to: RFC 3339 (2026-05-09T07:30:00Z, an offset, a fraction of a second) or "
                   "now less a duration (now-90m, now-1h30m, now-2d); within what `apprafter db backups` prints.")
@namespace_option("The app's namespace (found from its Application when one namespace runs APP as ENV).",
                  metavar="NS")
@click.option("--wait", "wait", is_flag=True,
              help="Also wait for the restore itself (once a person approved its plan) and print how it ended.")
@click.option("--timeout", type=click.FloatRange(min=0), default=WAIT_SECONDS, show_default=True, metavar="SECONDS",
              help="How long to wait for the plan (and with --wait for the restore; 0: request it and return).")
@reported
def restore(kubeconfig: Path | None, kube_context: str | None, app: str, environment: str, need: str, to: str,
            namespace: str | None, wait: bool, timeout: float) -> None:
    """Restore APP's database in environment ENV as it was at TIME, into a NEW database of the same provider: the
    operator opens a data-migration MigrationPlan (printed, with the command that approves it); once a person
    approves it, the database is recovered from the provider's backups, copied into a new generation of the app's
    database, the app's connection Secret (same name) switched to it and its pods rolled. The database before the
    restore is kept (dropped with the claim's data). Writes made after TIME are not in the restored database."""
    from lifecycle.restore import target_of

    if need not in RESTORED_TYPES:
        raise fail(f"app/{app}", f"--need {need}: no point-in-time restore for it (restored: "
                   f"{', '.join(RESTORED_TYPES)})")
    now = datetime.datetime.now(datetime.UTC)
    target = target_of(to, now)
    if target is None:
        raise fail(f"app/{app}", f"--to {to[:60]!r}: not a time: RFC 3339 (2026-05-09T07:30:00Z) or now less a "
                   "duration (now-90m)")
    request = request_id()

    async def run(kube: Kube, _: str) -> None:
        from controller_runtime.errors import KubeError
        from lifecycle.backends.pg_cluster import CLUSTER, cluster_at
        from lifecycle.restore import outside, stamp
        from renderer.crds import RESOURCE_CLAIM

        claim, where_ns, name = await need_claim(kube, app, environment, namespace, need)
        where = f"resourceclaim/{name}"
        host = cluster_at(str(((claim.get("status") or {}).get("connection") or {}).get("host") or ""))
        if host is None:
            raise fail(where, "not provisioned on a CloudNativePG Cluster yet (`apprafter app status` says why)")
        try:
            cluster = await kube.get(CLUSTER, host[0], host[1])
        except KubeError as e:
            raise refused(e, where, "retry") from None
        why = outside(target, cluster, datetime.datetime.now(datetime.UTC))
        if why is not None:
            raise fail(where, f"cannot restore Cluster {host[1]}/{host[0]} to {stamp(target)}: {why}")
        value = f"{request}@{stamp(target)}"
        try:
            await kube.merge(RESOURCE_CLAIM, name, where_ns, {"metadata": {"annotations": {RESTORE_ANNOTATION: value}}})
        except KubeError as e:
            raise refused(e, where, "the claim changed while requesting the restore: retry") from None
        sys.stdout.write(f"{where}: restore {request} to {stamp(target)} requested (namespace {where_ns})\n")
        sys.stdout.flush()
        if timeout == 0:
            return
        await follow(kube, RESTORE, where, name, where_ns, request, wait, timeout)

    with_cluster(kubeconfig, kube_context, run)
