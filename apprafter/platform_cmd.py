"""`apprafter platform status | upgrade [--to] | channel NAME | freeze | unfreeze`: the cluster's PlatformStack."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import output_option
from platform_stack.resource import CHANNELS, NAME, NAMESPACE
from renderer.errors import Problem, ToolFailure, UserError

if TYPE_CHECKING:  # the cluster client is imported when a command runs: `--help` never pays for it
    from lightkube import Client

FIELD_MANAGER = "apprafter-cli"
WHERE = f"platformstack/{NAME}"
CONDITIONS = ("Ready", "SourceVerified", "UpgradeAvailable", "MigrationApproved")


def _fail(message: str) -> UserError:
    return UserError([Problem(WHERE, 0, 0, "", message)])


@functools.cache
def _stacks() -> Any:
    from reconciler.kube import PLATFORM_STACK_KIND, resource_class

    return resource_class(PLATFORM_STACK_KIND)


def _api_failure(e: Exception) -> ToolFailure:
    from lightkube import ApiError

    if isinstance(e, ApiError):
        return ToolFailure(f"the API server refused the request ({e.status.code} {e.status.reason}): "
                           f"{e.status.message}")
    return ToolFailure(f"cannot reach the API server: {e}")


def _get(client: Client) -> dict[str, Any]:
    import httpx
    from lightkube import ApiError

    try:
        return dict(client.get(_stacks(), NAME, namespace=NAMESPACE))
    except ApiError as e:
        if e.status.code == 404:
            raise _fail(f"no PlatformStack {NAME} in namespace {NAMESPACE} (`apprafter cluster-bootstrap` creates "
                        "it)") from None
        raise _api_failure(e) from None
    except httpx.HTTPError as e:
        raise _api_failure(e) from None


def _patch_spec(client: Client, obj: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch of spec (None removes a field), refused if the object changed since it was read."""
    import httpx
    from lightkube import ApiError
    from lightkube.types import PatchType

    body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": dict(spec)}
    try:
        return dict(client.patch(_stacks(), NAME, body, namespace=NAMESPACE, patch_type=PatchType.MERGE))
    except ApiError as e:
        if e.status.code == 409:
            raise _fail("the PlatformStack changed meanwhile: run the command again") from None
        if e.status.code in (400, 403, 422):
            raise _fail(f"refused by the cluster: {e.status.message}") from None
        raise _api_failure(e) from None
    except httpx.HTTPError as e:
        raise _api_failure(e) from None


def _one_stack(func: Callable[..., None]) -> Callable[..., None]:
    """A command on the PlatformStack: the client and the object, read once."""

    @kube_options
    @reported
    @functools.wraps(func)
    def command(kubeconfig: Path | None, kube_context: str | None, **kwargs: Any) -> None:
        from reconciler.kube import load_config, sync_client

        client = sync_client(load_config(kubeconfig, kube_context), FIELD_MANAGER)
        func(client, _get(client), **kwargs)

    return command


def _version(text: str, option: str) -> str:
    from compatibility.versions import InvalidVersion, stack_version

    try:
        stack_version(text)
    except InvalidVersion as e:
        raise _fail(f"{option}: {e}") from None
    return text


def _said(what: str) -> None:
    sys.stdout.write(f"{WHERE} {what} (namespace {NAMESPACE})\n")


@click.group()
def platform() -> None:
    """The platform stack the cluster runs: its PlatformStack (docs/platform-stack.md)."""


@platform.command()
@output_option("platform status", help="text: versions, conditions and history; json: the PlatformStack object.")
@_one_stack
def status(client: Client, obj: dict[str, Any], output: str) -> None:
    """Versions (current, target, available), channel, pin, verification, conditions and history."""
    if output == "json":
        shown = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
        return
    sys.stdout.write(render_status(obj))


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows)


def render_status(obj: Mapping[str, Any]) -> str:
    """The text `apprafter platform status` prints."""
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    conditions = {c.get("type"): c for c in st.get("conditions") or []}
    verified = conditions.get("SourceVerified") or {}
    applied = st.get("lastApplied") or {}
    source = spec.get("source") or {}
    lines = [
        ["Current", st.get("currentVersion") or "-", applied.get("digest") or ""],
        ["Target", st.get("targetVersion") or "-", ""],
        ["Available", st.get("availableVersion") or "-", ""],
        ["Channel", spec.get("channel") or "stable", ""],
        ["Pin", spec.get("pin") or "-", ""],
        ["Auto-upgrade", "true" if spec.get("autoUpgrade") else "false", ""],
        ["Source", source.get("repoURL") or source.get("upstream") or "(default)", ""],
        ["Verified", verified.get("status") or "Unknown", verified.get("reason") or ""],
        ["Last check", st.get("lastUpstreamCheck") or "-", ""],
    ]
    if st.get("migrationPlan"):
        lines.append(["Waiting for", st["migrationPlan"], "apprafter migration approve|reject"])
    out = f"PlatformStack {NAMESPACE}/{NAME}\n" + "".join(
        f"  {k + ':':<14}{v}{'  ' + extra if extra else ''}\n" for k, v, extra in lines)
    rows = [["TYPE", "STATUS", "REASON", "MESSAGE"]]
    for name in [*CONDITIONS, *sorted(k for k in conditions if k not in CONDITIONS)]:
        if name in conditions:
            c = conditions[name]
            rows.append([str(name), str(c.get("status")), str(c.get("reason")), str(c.get("message"))])
    out += "\nCONDITIONS\n" + (_table(rows) if len(rows) > 1 else "(none yet)\n")
    unverified = [[str(u.get("version")), str(u.get("digest") or "-"), str(u.get("reason"))]
                  for u in st.get("unverifiedVersions") or []]
    if unverified:
        out += "\nNOT OFFERED (the signature does not verify)\n"
        out += _table([["VERSION", "DIGEST", "REASON"], *unverified])
    history = [["VERSION", "DIGEST", "APPLIED", "PLAN"]]
    history += [[str(h.get("version")), str(h.get("digest")), str(h.get("appliedAt")), str(h.get("plan") or "-")]
                for h in st.get("versionHistory") or []]
    out += "\nHISTORY\n" + (_table(history) if len(history) > 1 else "(nothing applied yet)\n")
    return out


@platform.command()
@click.option("--to", "to", metavar="VERSION", help="The version to pin (default: the available version).")
@_one_stack
def upgrade(client: Client, obj: dict[str, Any], to: str | None) -> None:
    """Pin VERSION (default: status.availableVersion); a gated change waits for its MigrationPlan."""
    if to is None:
        to = (obj.get("status") or {}).get("availableVersion")
        if not to:
            raise _fail("no available version known yet (status.availableVersion): pass --to VERSION")
    version = _version(to, "--to")
    before = (obj.get("spec") or {}).get("pin")
    _patch_spec(client, obj, {"pin": version})
    _said(f"pinned to {version}" + (f" (was {before})" if before and before != version else ""))


@platform.command()
@click.argument("name", type=click.Choice(CHANNELS))
@_one_stack
def channel(client: Client, obj: dict[str, Any], name: str) -> None:
    """Follow channel NAME (stable, beta, edge): what is offered as available (a pin still wins)."""
    _patch_spec(client, obj, {"channel": name})
    _said(f"follows channel {name}")


@platform.command()
@_one_stack
def freeze(client: Client, obj: dict[str, Any]) -> None:
    """Pin the version that runs now (status.currentVersion)."""
    current = (obj.get("status") or {}).get("currentVersion")
    if not current:
        raise _fail("nothing is applied yet (status.currentVersion is empty): nothing to freeze")
    _patch_spec(client, obj, {"pin": current})
    _said(f"frozen at {current}")


@platform.command()
@_one_stack
def unfreeze(client: Client, obj: dict[str, Any]) -> None:
    """Remove the pin: the channel (and autoUpgrade) decide again."""
    if (obj.get("spec") or {}).get("pin") is None:
        sys.stdout.write(f"{WHERE} has no pin (namespace {NAMESPACE})\n")
        return
    _patch_spec(client, obj, {"pin": None})
    _said("unpinned")
