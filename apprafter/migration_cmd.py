"""`apprafter migration list | approve | reject`: MigrationPlans in the cluster; approval via the status subresource.

Who may move a plan where is compatibility.authority's (the table the webhook and the CRD's CEL rules hold)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.cluster import print_objects, refused, with_cluster
from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import all_namespaces_option, namespace_option, output_option
from compatibility.authority import APPROVED, PENDING, REJECTED, person_may_set
from compatibility.crd import MIGRATION_PLAN
from toolchain.errors import Problem, UserError
from toolchain.timestamps import age

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube

__all__ = ["migration"]


def _fail(name: str, message: str) -> UserError:
    return UserError([Problem(f"migrationplan/{name}", 0, 0, "", message)])


def _row(plan: Mapping[str, Any]) -> list[str]:
    meta, spec, status = plan["metadata"], plan.get("spec") or {}, plan.get("status") or {}
    scope = spec.get("scope") or {}
    if scope.get("type") == "application":
        application = scope.get("application") or {}
        target, env = (application.get("ref") or {}).get("name", ""), application.get("environment", "")
    else:
        target, env = ((scope.get(scope.get("type") or "platform") or {}).get("ref") or {}).get("name", ""), ""
    return [meta.get("namespace", ""), meta["name"], scope.get("type", ""), target, env or "-",
            (spec.get("risks") or {}).get("classification", ""), status.get("phase") or "<none>",
            age(meta.get("creationTimestamp"))]


async def _find(kube: Kube, name: str, namespace: str | None) -> dict[str, Any]:
    """The plan NAME in NAMESPACE, or in whichever namespace holds the only plan of that name."""
    from controller_runtime.client import ALL_NAMESPACES

    found, _ = await kube.list(MIGRATION_PLAN, namespace or ALL_NAMESPACES, fields={"metadata.name": name})
    if not found:
        where = f"namespace {namespace}" if namespace else "any namespace"
        raise _fail(name, f"no MigrationPlan {name} in {where} (`apprafter migration list` shows them)")
    if len(found) > 1:
        spaces = ", ".join(sorted(p["metadata"]["namespace"] for p in found))
        raise _fail(name, f"MigrationPlans named {name} exist in several namespaces ({spaces}): pass -n NAMESPACE")
    return found[0]


async def _set_phase(kube: Kube, plan: dict[str, Any], phase: str) -> None:
    """Move the plan to `phase` unless the person may not (authority), only if it is unchanged since it was read."""
    from controller_runtime.errors import KubeError

    meta, status = plan["metadata"], plan.get("status") or {}
    scope = ((plan.get("spec") or {}).get("scope") or {}).get("type")
    why = person_may_set(status.get("phase") or None, phase, scope)
    if why:
        raise _fail(meta["name"], why)
    if status.get("phase") == phase:
        return
    try:
        await kube.merge(MIGRATION_PLAN, meta["name"], meta["namespace"], {"status": {"phase": phase}},
                         resource_version=meta["resourceVersion"], status=True)
    except KubeError as e:
        raise refused(e, f"migrationplan/{meta['name']}", "the plan changed while approving it: look at it again "
                      "(`apprafter migration list`) and retry") from None


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
    if namespace and all_namespaces:
        raise click.UsageError("-n and -A exclude each other")

    async def listed(kube: Kube, _: str) -> list[dict[str, Any]]:
        from controller_runtime.client import ALL_NAMESPACES

        items, _version = await kube.list(MIGRATION_PLAN, namespace or ALL_NAMESPACES)
        return items

    plans = with_cluster(kubeconfig, kube_context, listed)
    order = {PENDING: 0, APPROVED: 1}
    plans.sort(key=lambda p: (order.get((p.get("status") or {}).get("phase", ""), 2), p["metadata"]["namespace"],
                              p["metadata"]["name"]))
    print_objects(plans, output, ["NAMESPACE", "NAME", "SCOPE", "TARGET", "ENVIRONMENT", "CLASS", "PHASE", "AGE"],
                  _row, "No MigrationPlans found.")


def _one_plan(func: Callable[[Kube, str, dict[str, Any]], Awaitable[None]]) -> Callable[..., None]:
    """A command on one plan NAME [-n NS] (the namespace found when the name is unique)."""

    @kube_options
    @click.argument("name")
    @namespace_option("The plan's namespace (found automatically when the name is unique).")
    @reported
    @functools.wraps(func)
    def command(kubeconfig: Path | None, kube_context: str | None, name: str, namespace: str | None) -> None:
        async def run(kube: Kube, _: str) -> None:
            await func(kube, name, await _find(kube, name, namespace))

        with_cluster(kubeconfig, kube_context, run)

    return command


@migration.command()
@_one_plan
async def approve(kube: Kube, name: str, plan: dict[str, Any]) -> None:
    """Approve the MigrationPlan NAME: its change is applied if the spec still matches its approvedSpecHash."""
    where = plan["metadata"]["namespace"]
    if (plan.get("status") or {}).get("phase") == APPROVED:
        click.echo(f"migrationplan/{name} is already approved (namespace {where})", err=True)
        return
    await _set_phase(kube, plan, APPROVED)
    sys.stdout.write(f"migrationplan/{name} approved (namespace {where})\n")


@migration.command()
@_one_plan
async def reject(kube: Kube, name: str, plan: dict[str, Any]) -> None:
    """Reject the platform-scope MigrationPlan NAME (an application's change is rejected by a git revert)."""
    await _set_phase(kube, plan, REJECTED)
    sys.stdout.write(f"migrationplan/{name} rejected (namespace {plan['metadata']['namespace']})\n")
