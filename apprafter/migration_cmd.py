"""`apprafter migration list | approve | reject`: MigrationPlans in the cluster; approval via the status subresource."""

from __future__ import annotations

import datetime
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import all_namespaces_option, namespace_option, output_option
from renderer.errors import Problem, ToolFailure, UserError

if TYPE_CHECKING:  # the cluster client is imported when a command runs: `--help` never pays for it
    from lightkube import Client

FIELD_MANAGER = "apprafter-cli"


@functools.cache
def _plans() -> Any:
    from reconciler.kube import MIGRATION_PLAN_KIND, resource_class

    return resource_class(MIGRATION_PLAN_KIND)


def _client(kubeconfig: Path | None, context: str | None) -> tuple[Client, str]:
    from reconciler.kube import default_namespace, load_config, sync_client

    config = load_config(kubeconfig, context)
    return sync_client(config, FIELD_MANAGER), default_namespace(config)


def _fail(name: str, message: str) -> UserError:
    return UserError([Problem(f"migrationplan/{name}", 0, 0, "", message)])


def _unreachable(e: Exception) -> ToolFailure:
    from lightkube import ApiError

    if isinstance(e, ApiError):
        return ToolFailure(f"the API server refused the request ({e.status.code} {e.status.reason}): "
                           f"{e.status.message}")
    return ToolFailure(f"cannot reach the API server: {e}")


def _list(client: Client, namespace: str, name: str | None = None) -> list[dict[str, Any]]:
    import httpx
    from lightkube import ApiError

    try:
        return [dict(p) for p in client.list(_plans(), namespace=namespace,
                                             fields={"metadata.name": name} if name else None)]
    except (ApiError, httpx.HTTPError) as e:
        raise _unreachable(e) from None


def _age(created: str | None) -> str:
    if not created:
        return "<unknown>"
    then = datetime.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    seconds = int((datetime.datetime.now(datetime.UTC) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _row(plan: dict[str, Any]) -> list[str]:
    meta, spec, status = plan["metadata"], plan.get("spec") or {}, plan.get("status") or {}
    scope = spec.get("scope") or {}
    if scope.get("type") == "application":
        target, env = (scope.get("application") or {}).get("ref", {}).get("name", ""), \
            (scope.get("application") or {}).get("environment", "")
    else:
        target, env = (scope.get("platform") or {}).get("ref", {}).get("name", ""), ""
    return [meta.get("namespace", ""), meta["name"], scope.get("type", ""), target, env or "-",
            (spec.get("risks") or {}).get("classification", ""), status.get("phase") or "<none>",
            _age(meta.get("creationTimestamp"))]


def _find(client: Client, name: str, namespace: str | None) -> dict[str, Any]:
    """The plan NAME in NAMESPACE, or in whichever namespace holds the only plan of that name."""
    from reconciler.kube import ALL_NAMESPACES

    found = _list(client, namespace or ALL_NAMESPACES, name)
    if not found:
        where = f"namespace {namespace}" if namespace else "any namespace"
        raise _fail(name, f"no MigrationPlan {name} in {where} (`apprafter migration list` shows them)")
    if len(found) > 1:
        spaces = ", ".join(sorted(p["metadata"]["namespace"] for p in found))
        raise _fail(name, f"MigrationPlans named {name} exist in several namespaces ({spaces}): pass -n NAMESPACE")
    return found[0]


def _set_phase(client: Client, plan: dict[str, Any], phase: str) -> dict[str, Any]:
    import httpx
    from lightkube import ApiError
    from lightkube.types import PatchType

    meta = plan["metadata"]
    body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": {"phase": phase}}
    try:
        return dict(client.patch(_plans().Status, meta["name"], body, namespace=meta["namespace"],
                                 patch_type=PatchType.MERGE))
    except ApiError as e:
        if e.status.code == 409:
            raise _fail(meta["name"], "the plan changed while approving it: look at it again "
                        "(`apprafter migration list`) and retry") from None
        if e.status.code in (400, 403, 422):
            raise _fail(meta["name"], f"refused by the cluster: {e.status.message}") from None
        raise _unreachable(e) from None
    except httpx.HTTPError as e:
        raise _unreachable(e) from None


@click.group()
def migration() -> None:
    """MigrationPlans: the changes waiting for approval (docs/operator.md)."""


@migration.command("list")
@kube_options
@namespace_option("Only this namespace.")
@all_namespaces_option("Every namespace (the default without -n).")
@output_option("migration list", help="text: a table; json: a v1 List of the MigrationPlans; yaml: the same List.")
@reported
def list_plans(kubeconfig: Path | None, kube_context: str | None, namespace: str | None, all_namespaces: bool,
               output: str) -> None:
    """MigrationPlans of every scope, pending ones first, across all namespaces unless -n is given."""
    from compatibility.gate import APPROVED, PENDING
    from reconciler.kube import ALL_NAMESPACES

    if namespace and all_namespaces:
        raise click.UsageError("-n and -A exclude each other")
    client, _ = _client(kubeconfig, kube_context)
    plans = _list(client, namespace or ALL_NAMESPACES)
    order = {PENDING: 0, APPROVED: 1}
    plans.sort(key=lambda p: (order.get((p.get("status") or {}).get("phase", ""), 2), p["metadata"]["namespace"],
                              p["metadata"]["name"]))
    if output == "json":
        items = [{**p, "metadata": {k: v for k, v in p["metadata"].items() if k != "managedFields"}} for p in plans]
        sys.stdout.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2) + "\n")
        return
    if not plans:
        click.echo("No MigrationPlans found.", err=True)
        return
    rows = [["NAMESPACE", "NAME", "SCOPE", "TARGET", "ENVIRONMENT", "CLASS", "PHASE", "AGE"], *map(_row, plans)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    sys.stdout.write("".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n"
                             for r in rows))


def _one_plan(func: Callable[[Client, str, dict[str, Any]], None]) -> Callable[..., None]:
    """A command on one plan NAME [-n NS] (the namespace found when the name is unique)."""

    @kube_options
    @click.argument("name")
    @namespace_option("The plan's namespace (found automatically when the name is unique).")
    @reported
    @functools.wraps(func)
    def command(kubeconfig: Path | None, kube_context: str | None, name: str, namespace: str | None) -> None:
        client, _ = _client(kubeconfig, kube_context)
        func(client, name, _find(client, name, namespace))

    return command


@migration.command()
@_one_plan
def approve(client: Client, name: str, plan: dict[str, Any]) -> None:
    """Approve the MigrationPlan NAME: its change is applied if the spec still matches its approvedSpecHash."""
    from compatibility.gate import APPROVED, PENDING

    phase = (plan.get("status") or {}).get("phase") or ""
    if phase == APPROVED:
        click.echo(f"migrationplan/{name} is already approved (namespace {plan['metadata']['namespace']})", err=True)
        return
    if phase != PENDING:
        raise _fail(name, f"cannot approve a plan in phase {phase or '<none>'}: only a pending-approval plan can be "
                    "approved")
    _set_phase(client, plan, APPROVED)
    sys.stdout.write(f"migrationplan/{name} approved (namespace {plan['metadata']['namespace']})\n")


@migration.command()
@_one_plan
def reject(client: Client, name: str, plan: dict[str, Any]) -> None:
    """Reject the platform-scope MigrationPlan NAME (an application's change is rejected by a git revert)."""
    from compatibility.gate import PENDING, REJECTED

    scope = ((plan.get("spec") or {}).get("scope") or {}).get("type")
    if scope != "platform":
        raise _fail(name, "an application-scope plan has no reject: revert the change in git; the operator then "
                    "supersedes the plan and the application is Ready again")
    phase = (plan.get("status") or {}).get("phase") or ""
    if phase not in (PENDING, REJECTED):
        raise _fail(name, f"cannot reject a plan in phase {phase or '<none>'}")
    if phase != REJECTED:
        _set_phase(client, plan, REJECTED)
    sys.stdout.write(f"migrationplan/{name} rejected (namespace {plan['metadata']['namespace']})\n")
