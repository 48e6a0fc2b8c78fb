"""`apprafter db drop-generation APP -e ENV --generation N`: drop one generation of an environment's pg database that
a restore kept (never the one the app uses).

The request is a new value of the need's ResourceClaim's `apprafter.io/drop-generation` annotation, `<request>@<N>`
(who may write it: compatibility.authority.drop_generation_writer; which N: lifecycle.generation_drop.refusal, checked
here first and by the webhook). The operator opens a data-migration MigrationPlan for it, which the command prints;
nothing is dropped before a person approves it (lifecycle.generation_drop: what happens then). `--wait` waits for the
drop itself too."""

from __future__ import annotations

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
from compatibility.authority import DROP_GENERATION_ANNOTATION, RESTORED_TYPES

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube

__all__ = ["drop_generation"]

WAIT_SECONDS = 60.0
OPENED = ("AwaitingApproval", "Dropping", "Dropped", "Failed")  # the phases that answer the request
ENDED = ("Dropped", "Failed")


def _drop(claim: dict[str, Any] | None) -> dict[str, Any]:
    found = (((claim or {}).get("status") or {}).get("restore") or {}).get("drop")
    return found if isinstance(found, dict) else {}


def _asked(claim: dict[str, Any] | None) -> str | None:
    return (((claim or {}).get("metadata") or {}).get("annotations") or {}).get(DROP_GENERATION_ANNOTATION)



DROP = Followed("drop", _drop, _asked, OPENED, ENDED, "nothing is dropped before it", taken_over_ok=False)

@click.command("drop-generation")
@kube_options
@click.argument("app")
@env_option("The environment whose kept database generation to drop.", required=True)
@click.option("--generation", "generation", required=True, type=click.IntRange(min=1), metavar="N",
              help="The kept generation to drop (`apprafter db backups` lists them); never the one the app uses.")
@click.option("--need", default="pg", show_default=True, metavar="NEED",
              help=f"The need whose kept generation to drop ({', '.join(RESTORED_TYPES)}).")
@namespace_option("The app's namespace (found from its Application when one namespace runs APP as ENV).",
                  metavar="NS")
@click.option("--wait", "wait", is_flag=True,
              help="Also wait for the drop itself (once a person approved its plan) and print how it ended.")
@click.option("--timeout", type=click.FloatRange(min=0), default=WAIT_SECONDS, show_default=True, metavar="SECONDS",
              help="How long to wait for the plan (and with --wait for the drop; 0: request it and return).")
@reported
def drop_generation(kubeconfig: Path | None, kube_context: str | None, app: str, environment: str, generation: int,
                    need: str, namespace: str | None, wait: bool, timeout: float) -> None:
    """Drop generation N of APP's database in environment ENV, one a restore kept (the database the app used before
    it): the operator opens a data-migration MigrationPlan (printed, with the command that approves it); once a
    person approves it, that generation's database and role are dropped for good. The generation the app uses is
    never dropped this way."""
    if need not in RESTORED_TYPES:
        raise fail(f"app/{app}", f"--need {need}: it has no generations (restored: {', '.join(RESTORED_TYPES)})")
    request = request_id()

    async def run(kube: Kube, _: str) -> None:
        from controller_runtime.errors import KubeError
        from lifecycle.generation_drop import refusal
        from renderer.crds import RESOURCE_CLAIM

        claim, where_ns, name = await need_claim(kube, app, environment, namespace, need)
        where = f"resourceclaim/{name}"
        why = refusal(claim, generation)
        if why is not None:
            raise fail(where, f"--generation {generation}: {why}")
        value = f"{request}@{generation}"
        try:
            await kube.merge(RESOURCE_CLAIM, name, where_ns,
                             {"metadata": {"annotations": {DROP_GENERATION_ANNOTATION: value}}})
        except KubeError as e:
            raise refused(e, where, "the claim changed while requesting the drop: retry") from None
        sys.stdout.write(f"{where}: drop of generation {generation} ({request}) requested (namespace {where_ns})\n")
        sys.stdout.flush()
        if timeout == 0:
            return
        await follow(kube, DROP, where, name, where_ns, request, wait, timeout)

    with_cluster(kubeconfig, kube_context, run)
