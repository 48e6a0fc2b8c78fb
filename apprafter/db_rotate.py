"""`apprafter db rotate APP -e ENV --need pg|redis`: new credentials for one need of one environment of an app.

The request is a new value of the need's ResourceClaim's `apprafter.io/rotate` annotation (who may write it and
what it may say: compatibility.authority.rotate_writer); the operator does the rest (lifecycle.rotation) and says
where it stands in the claim's status.rotation, which the command waits for. No password is ever read or printed."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.cluster import refused, wait_for, with_cluster
from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import env_option, namespace_option
from apprafter.repo_login import environment as environment_failure
from apprafter.repo_login import fail
from compatibility.authority import ROTATE_ANNOTATION, ROTATED_TYPES

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube

__all__ = ["app_namespace", "need_claim", "request_id", "rotate"]

WAIT_SECONDS = 300.0


def request_id() -> str:
    """A new request: the time (UTC, to the second) and 8 random hex digits, of the form the webhook takes."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"


async def app_namespace(kube: Kube, app: str, env: str, namespace: str | None) -> str:
    """The namespace of the Application APP deployed as environment ENV (in NAMESPACE when given)."""
    from controller_runtime.client import ALL_NAMESPACES
    from controller_runtime.errors import KubeError
    from renderer.crds import APPLICATION

    try:
        found, _ = await kube.list(APPLICATION, namespace or ALL_NAMESPACES, fields={"metadata.name": app})
    except KubeError as e:
        raise refused(e, f"app/{app}", "retry") from None
    found = [a for a in found if (a.get("spec") or {}).get("environment") == env]
    if not found:
        where = f"namespace {namespace}" if namespace else "any namespace"
        raise fail(f"app/{app}", f"no Application {app} of environment {env} in {where} (`apprafter app status "
                   f"{app}` shows where it runs)")
    if len(found) > 1:
        spaces = ", ".join(sorted(a["metadata"]["namespace"] for a in found))
        raise fail(f"app/{app}", f"Applications {app} of environment {env} run in several namespaces ({spaces}): "
                   "pass -n NAMESPACE")
    return str(found[0]["metadata"]["namespace"])


async def need_claim(kube: Kube, app: str, environment: str, namespace: str | None,
                     need: str) -> tuple[dict[str, Any], str, str]:
    """The ResourceClaim of APP's NEED in environment ENVIRONMENT, its namespace and its name (a one-line error when
    the app runs nowhere as that environment or has no such need)."""
    from controller_runtime.errors import KubeError
    from renderer.crds import RESOURCE_CLAIM
    from renderer.manifests.meta import claim_name

    where_ns = await app_namespace(kube, app, environment, namespace)
    name = claim_name(app, need)
    try:
        claim = await kube.get(RESOURCE_CLAIM, name, where_ns)
    except KubeError as e:
        raise refused(e, f"resourceclaim/{name}", "retry") from None
    if claim is None or (claim.get("spec") or {}).get("type") != need:
        raise fail(f"app/{app}", f"{app} has no need {need} in environment {environment} (no ResourceClaim "
                   f"{where_ns}/{name})")
    return claim, where_ns, name


def _rotation(claim: dict[str, Any] | None) -> dict[str, Any]:
    found = ((claim or {}).get("status") or {}).get("rotation")
    return found if isinstance(found, dict) else {}


def _asked(claim: dict[str, Any] | None) -> str | None:
    return (((claim or {}).get("metadata") or {}).get("annotations") or {}).get(ROTATE_ANNOTATION)


@click.command("rotate")
@kube_options
@click.argument("app")
@env_option("The environment whose credentials to rotate.", required=True)
@click.option("--need", type=click.Choice(ROTATED_TYPES), required=True,
              help="The need whose password to rotate.")
@namespace_option("The app's namespace (found from its Application when one namespace runs APP as ENV).",
                  metavar="NS")
@click.option("--timeout", type=click.FloatRange(min=0), default=WAIT_SECONDS, show_default=True, metavar="SECONDS",
              help="How long to wait for the rotation to complete (0: request it and return).")
@reported
def rotate(kubeconfig: Path | None, kube_context: str | None, app: str, environment: str, need: str,
           namespace: str | None, timeout: float) -> None:
    """Rotate the password of APP's NEED in environment ENV: the operator makes a new one, puts it in the need's
    connection Secret, rolls the app's pods onto it and then refuses the old one (pg: PostgreSQL holds one password
    per role, so the old one is refused as soon as CloudNativePG applies the new one; connections already open stay
    open; redis: the old one stays valid until the pods have rolled). Waits until that is done, then prints it; the
    same request twice rotates once. No password is ever printed."""
    request = request_id()

    async def run(kube: Kube, _: str) -> None:
        from controller_runtime.errors import KubeError
        from renderer.crds import RESOURCE_CLAIM

        _claim, where_ns, name = await need_claim(kube, app, environment, namespace, need)
        where = f"resourceclaim/{name}"
        try:
            await kube.merge(RESOURCE_CLAIM, name, where_ns, {"metadata": {"annotations": {
                ROTATE_ANNOTATION: request}}})
        except KubeError as e:
            raise refused(e, where, "the claim changed while requesting the rotation: retry") from None
        sys.stdout.write(f"{where}: rotation {request} requested (namespace {where_ns})\n")
        sys.stdout.flush()
        if timeout == 0:
            return
        done = await wait_for(kube, RESOURCE_CLAIM, name, where_ns, lambda obj: obj is None or _asked(obj) != request
                              or _rotation(obj).get("completed") == request, timeout)
        if done is None:
            now = await kube.get(RESOURCE_CLAIM, name, where_ns)
            said = _rotation(now).get("message") if _rotation(now).get("requested") == request else None
            raise environment_failure(f"{where}: rotation {request} not completed within {timeout:g}s"
                                      + (f" ({said})" if said else ""),
                                      "is the operator running? (`kubectl -n apprafter-system get pods`); the "
                                      "rotation goes on without this command")
        if not done:
            raise fail(where, "deleted while its credentials were being rotated")
        if _asked(done) != request:
            sys.stdout.write(f"{where}: a later request ({_asked(done) or 'none'}) took over; the operator rotates "
                             "for that one\n")
            return
        sys.stdout.write(f"{where}: {_rotation(done).get('message')}\n")

    with_cluster(kubeconfig, kube_context, run)
