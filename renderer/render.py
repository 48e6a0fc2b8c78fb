"""The renderer's API: one Application and environment in, ordered Kubernetes objects and warnings out."""

from __future__ import annotations

import os
from pathlib import Path

from renderer import sealed, userfile, validate
from renderer.context import PlatformContext
from renderer.effective import copied, effective_spec
from renderer.errors import Problem, UserError
from renderer.load import APP_DIR, APP_FILE, LoadedApp, Source, evaluate_many, load, locate, read_source
from renderer.names import ENVIRONMENT_LABEL, MANAGED_BY, MANAGED_BY_LABEL, MODES, Mode
from toolchain.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any

__all__ = ["MODES", "Mode", "Rendered", "application_cr", "discover", "load_all", "load_many", "manifests", "render",
           "render_all", "render_loaded"]



class Rendered(Record):
    """Objects for one app and environment, in output order, and the warnings to show on stderr."""

    app: str
    environment: str
    objects: list[dict[str, Any]]
    warnings: list[str]


def application_cr(app: LoadedApp, environment: str, namespace: str | None) -> dict[str, Any]:
    """The Application CR the plugin emits: the user's document with spec.environment stamped."""
    doc = copied(app.document)
    meta = doc["metadata"]
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(sorted({**meta.get("labels", {}), ENVIRONMENT_LABEL: environment,
                                  MANAGED_BY_LABEL: MANAGED_BY}.items()))
    ordered_meta = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
    spec = doc["spec"]
    spec["environment"] = environment
    ordered_spec = {k: spec[k] for k in ("environment", "base", "environments", "budget", "sealedSecrets")
                    if k in spec}
    return {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "metadata": ordered_meta, "spec": ordered_spec}


def manifests(app: LoadedApp, environment: str, namespace: str | None,
              context: PlatformContext) -> tuple[list[dict[str, Any]], list[str]]:
    from renderer.manifests import network, platform, workload  # cr mode (the plugin's default) needs none of it
    from renderer.manifests.meta import Target

    eff = effective_spec(app.document["spec"], environment)
    target = Target(app.name, environment, namespace, context)
    warnings: list[str] = []
    objects = [workload.service_account(target), *platform.resource_claims(target, eff),
               workload.deployment(target, eff, warnings)]
    expose = eff.get("expose")
    if expose:
        objects.append(network.service(target, eff))
        if expose.get("network") == "public":
            if expose.get("tls", True):
                objects.append(network.redirect_route(target, eff))
            objects.append(network.http_route(target, eff))
            if expose.get("tls", True):
                objects += [network.certificate(target, eff), network.reference_grant(target)]
    objects += [network.network_policy(target, eff), network.egress_policy(target, eff)]
    if expose and expose.get("network") == "public":
        objects.append(network.ingress_policy(target, eff))
    if eff.get("autoscale"):
        objects.append(platform.scaled_object(target, eff))
    objects += [platform.sealed_secret(target, name, data)
                for name, data in sorted((app.document["spec"].get("sealedSecrets") or {}).items())]
    return objects, warnings


def render_loaded(app: LoadedApp, environment: str, mode: Mode = "cr", namespace: str | None = None,
                  context: PlatformContext | None = None, chosen_by: str = "") -> Rendered:
    """Validate (renderer.validate.check_deployment: the one answer) then render one environment of an Application."""
    problems = validate.check_deployment(app, environment, chosen_by)
    if problems:
        raise UserError(problems)
    namespace = namespace or app.document["metadata"].get("namespace")
    app = sealed.stamped(app, environment, namespace)
    if mode == "cr":
        return Rendered(app.name, environment, [application_cr(app, environment, namespace)], [])
    objects, warnings = manifests(app, environment, namespace, context or PlatformContext())
    return Rendered(app.name, environment, objects, [f"{app.source.display}: {environment}: {w}" for w in warnings])


def render(path: Path, environment: str, mode: Mode = "cr", namespace: str | None = None,
           context: PlatformContext | None = None, root: Path | None = None) -> Rendered:
    """Load, validate and render the Application at `path` for one environment."""
    return render_loaded(load(path, root), environment, mode, namespace, context)


MAX_DEPTH = 32  # directory levels below the --all directory
MAX_ENTRIES = 200_000  # directory entries looked at


def discover(directory: Path) -> list[Path]:
    """Every apprafter/Application.cue below directory, sorted, never following symlinked directories.

    Walks without recursion; a tree deeper than MAX_DEPTH or larger than MAX_ENTRIES is refused (UserError),
    never half-searched.
    """
    found: list[Path] = []
    pending, seen = [(Path(directory), 0)], 0
    while pending:
        current, depth = pending.pop()
        try:
            with os.scandir(current) as entries:
                subdirs = []
                for entry in entries:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        raise UserError([Problem(userfile.shown(directory), 0, 0, "", f"more than {MAX_ENTRIES} "
                                                 "entries below this directory: point --all at the apps' directory")])
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry)
        except OSError as e:
            raise UserError([Problem(userfile.shown(current), 0, 0, "", f"cannot list: {e.strerror}")]) from None
        for entry in subdirs:
            if depth + 1 > MAX_DEPTH:
                raise UserError([Problem(userfile.shown(current), 0, 0, "", f"more than {MAX_DEPTH} directory levels "
                                         "below the --all directory: refused (point --all at the apps' directory)")])
            if entry.name == APP_DIR and os.path.lexists(os.path.join(entry.path, APP_FILE)):
                found.append(Path(entry.path) / APP_FILE)
            pending.append((Path(entry.path), depth + 1))
    return sorted(found)


def load_many(files: list[Path], root: Path | None = None) -> tuple[list[LoadedApp], list[Problem]]:
    """Read and evaluate many Application files in one cue process (each inside `root`, else the root its own
    path suggests): what loaded, and every problem (a broken app does not stop the others)."""
    sources: list[Source] = []
    problems: list[Problem] = []
    for file in files:
        try:
            sources.append(read_source(*locate(file, root)))
        except UserError as e:
            problems += e.problems
    apps: list[LoadedApp] = []
    for result in evaluate_many(sources):
        if isinstance(result, UserError):
            problems += result.problems
        else:
            apps.append(result)
    return apps, problems


def load_all(directory: Path) -> tuple[list[LoadedApp], list[Problem]]:
    """Every app under directory, evaluated in one cue process (UserError when there is none)."""
    root = Path(directory)
    files = discover(root)
    if not files:
        raise UserError([Problem(userfile.shown(root), 0, 0, "", f"no {APP_DIR}/{APP_FILE} below this directory: "
                                 "nothing to render")])
    return load_many(files, root)


def render_all(directory: Path, mode: Mode = "cr", context: PlatformContext | None = None,
               ) -> tuple[list[Rendered], list[Problem]]:
    """Every app under directory, every environment, evaluated in one cue process.

    Returns what rendered and every problem; a broken app does not stop the others.
    """
    apps, problems = load_all(directory)
    rendered: list[Rendered] = []
    for app in apps:
        for env in validate.environments(app):
            try:
                rendered.append(render_loaded(app, env, mode, None, context))
            except UserError as e:
                problems += e.problems
    return rendered, sorted(set(problems))
