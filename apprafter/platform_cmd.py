"""`apprafter platform status | upgrade | channel | freeze [COMPONENT] | unfreeze [COMPONENT]`: the PlatformStack."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.cluster import refused, shown, table, with_cluster
from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.options import output_option
from compatibility.versions import InvalidVersion, stack_version
from platform_stack.resource import CHANNELS, NAME, NAMESPACE, PLATFORM_STACK
from toolchain.errors import Problem, UserError

if TYPE_CHECKING:  # the client is imported when a command runs: `--help` never pays for it
    from controller_runtime.client import Kube

__all__ = ["platform", "render_status"]

WHERE = f"platformstack/{NAME}"


def _fail(message: str) -> UserError:
    return UserError([Problem(WHERE, 0, 0, "", message)])


async def _get(kube: Kube) -> dict[str, Any]:
    obj = await kube.get(PLATFORM_STACK, NAME, NAMESPACE)
    if obj is None:
        raise _fail(f"no PlatformStack {NAME} in namespace {NAMESPACE} (`apprafter cluster-bootstrap` creates it)")
    return obj


CONFLICT_TRIES = 5  # a status the controller writes meanwhile is no reason to give up (its spec is the decision's)


async def _patch_spec(kube: Kube, obj: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    """A merge patch of spec (None removes a field) on the spec that was read: refused if the spec changed since
    (its generation), tried again on a fresh read when only the status did (the controller writes it often)."""
    from controller_runtime.errors import KubeError

    read = obj
    changed = "the PlatformStack's spec changed meanwhile: run the command again"
    for _ in range(CONFLICT_TRIES):
        try:
            await kube.merge(PLATFORM_STACK, NAME, NAMESPACE, {"spec": dict(spec)},
                             resource_version=read["metadata"]["resourceVersion"])
            return
        except KubeError as e:
            if e.code != 409:
                raise refused(e, WHERE, changed) from None
        read = await _get(kube)
        if read["metadata"].get("generation") != obj["metadata"].get("generation"):
            raise _fail(changed)
    raise _fail(f"the PlatformStack changed {CONFLICT_TRIES} times while it was written: run the command again")


def _one_stack(func: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """A command on the PlatformStack: the client and the object, read once."""

    @kube_options
    @reported
    @functools.wraps(func)
    def command(kubeconfig: Path | None, kube_context: str | None, **kwargs: Any) -> None:
        async def run(kube: Kube, _: str) -> None:
            await func(kube, await _get(kube), **kwargs)

        with_cluster(kubeconfig, kube_context, run)

    return command


def _version(text: str, option: str) -> str:
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
async def status(kube: Kube, obj: dict[str, Any], output: str) -> None:
    """Versions (current, target, available), channel, pin, verification, conditions and history."""
    if output == "json":
        sys.stdout.write(json.dumps(shown(obj), indent=2) + "\n")
        return
    sys.stdout.write(render_status(obj))


def render_status(obj: Mapping[str, Any]) -> str:
    """The text `apprafter platform status` prints."""
    from compatibility.text import MIGRATION_COMMAND
    from lifecycle.conditions import by_type
    from lifecycle.platformstack import CONDITIONS  # the order conditions are shown in (lazy: the check's modules)
    from platform_stack.freeze import frozen

    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    conditions = by_type(st.get("conditions"))
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
        *([["Upstream", st.get("upstreamVersion") or "-", (conditions.get("UpstreamAhead") or {}).get("message")
            or ""]] if "UpstreamAhead" in conditions else []),
        ["Verified", verified.get("status") or "Unknown", verified.get("reason") or ""],
        ["Last check", st.get("lastUpstreamCheck") or "-", ""],
    ]
    if st.get("migrationPlan"):
        lines.append(["Waiting for", st["migrationPlan"], f"{MIGRATION_COMMAND} approve|reject"])
    out = f"PlatformStack {NAMESPACE}/{NAME}\n" + "".join(
        f"  {k + ':':<14}{v}{'  ' + extra if extra else ''}\n" for k, v, extra in lines)
    rows = [["TYPE", "STATUS", "REASON", "MESSAGE"]]
    for name in [*CONDITIONS, *sorted(k for k in conditions if k not in CONDITIONS)]:
        if name in conditions:
            c = conditions[name]
            rows.append([str(name), str(c.get("status")), str(c.get("reason")), str(c.get("message"))])
    out += "\nCONDITIONS\n" + (table(rows) if len(rows) > 1 else "(none yet)\n")
    pins = frozen(obj)
    components = [["COMPONENT", "VERSION", "SYNC", "HEALTH", "FROZEN"]]
    for c in st.get("components") or []:
        name = str(c.get("name"))
        version = str(c.get("version") or "-") if c.get("enabled") else "(disabled)"
        components.append([name, version, str(c.get("sync") or "-"), str(c.get("health") or "-"),
                           f"at {pins[name]}" if name in pins else "-"])
    components += [[name, "-", "-", "-", f"at {pin}"] for name, pin in pins.items()
                   if name not in {c.get("name") for c in st.get("components") or []}]
    if len(components) > 1:
        out += "\nCOMPONENTS\n" + table(components)
    unverified = [[str(u.get("version")), str(u.get("digest") or "-"), str(u.get("reason"))]
                  for u in st.get("unverifiedVersions") or []]
    if unverified:
        out += "\nNOT OFFERED (the signature does not verify)\n"
        out += table([["VERSION", "DIGEST", "REASON"], *unverified])
    history = [["VERSION", "DIGEST", "APPLIED", "PLAN"]]
    history += [[str(h.get("version")), str(h.get("digest")), str(h.get("appliedAt")), str(h.get("plan") or "-")]
                for h in st.get("versionHistory") or []]
    out += "\nHISTORY\n" + (table(history) if len(history) > 1 else "(nothing applied yet)\n")
    return out


@platform.command()
@click.option("--to", "to", metavar="VERSION", help="The version to pin (default: the available version).")
@_one_stack
async def upgrade(kube: Kube, obj: dict[str, Any], to: str | None) -> None:
    """Pin VERSION (default: status.availableVersion); a gated change waits for its MigrationPlan."""
    if to is None:
        to = (obj.get("status") or {}).get("availableVersion")
        if not to:
            raise _fail("no available version known yet (status.availableVersion): pass --to VERSION")
    version = _version(to, "--to")
    before = (obj.get("spec") or {}).get("pin")
    await _patch_spec(kube, obj, {"pin": version})
    _said(f"pinned to {version}" + (f" (was {before})" if before and before != version else ""))


@platform.command()
@click.argument("name", type=click.Choice(CHANNELS))
@_one_stack
async def channel(kube: Kube, obj: dict[str, Any], name: str) -> None:
    """Follow channel NAME (stable, beta, edge): what is offered as available (a pin still wins)."""
    await _patch_spec(kube, obj, {"channel": name})
    _said(f"follows channel {name}")


@platform.command()
@click.argument("component", required=False)
@_one_stack
async def freeze(kube: Kube, obj: dict[str, Any], component: str | None) -> None:
    """Pin COMPONENT at the version it runs (spec.overrides.COMPONENT.pin): a stack upgrade moves the others, not
    it. Without COMPONENT: pin the whole stack at the version that runs now (spec.pin)."""
    if component is not None:
        from platform_stack.freeze import FreezeRefused, freeze_component

        try:
            patch, version = freeze_component(obj, component)
        except FreezeRefused as e:
            raise _fail(e.reason) from None
        if patch is not None:
            await _patch_spec(kube, obj, patch)
        _said(f"{'keeps' if patch is None else 'freezes'} {component} at {version}")
        return
    current = (obj.get("status") or {}).get("currentVersion")
    if not current:
        raise _fail("nothing is applied yet (status.currentVersion is empty): nothing to freeze")
    await _patch_spec(kube, obj, {"pin": current})
    _said(f"frozen at {current}")


@platform.command()
@click.argument("component", required=False)
@_one_stack
async def unfreeze(kube: Kube, obj: dict[str, Any], component: str | None) -> None:
    """Let COMPONENT move with the stack again (drop spec.overrides.COMPONENT.pin). Without COMPONENT: remove the
    stack's pin, so the channel (and autoUpgrade) decide again; component freezes stay."""
    if component is not None:
        from platform_stack.freeze import unfreeze_component

        patch = unfreeze_component(obj, component)
        if patch is None:
            sys.stdout.write(f"{WHERE} does not freeze {component} (namespace {NAMESPACE})\n")
            return
        await _patch_spec(kube, obj, patch)
        _said(f"lets {component} move with the stack")
        return
    if (obj.get("spec") or {}).get("pin") is None:
        sys.stdout.write(f"{WHERE} has no pin (namespace {NAMESPACE})\n")
        return
    await _patch_spec(kube, obj, {"pin": None})
    _said("unpinned")
