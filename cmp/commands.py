"""What `apprafter cmp generate | parameters | discover` do: Argo CD's env in, renderer call, stream out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from cmp import argo_env
from renderer import settings
from renderer.context import PlatformContext
from renderer.emit import dump_json_stream
from renderer.errors import Problem, ToolFailure, UserError
from renderer.load import APP_DIR, APP_FILE, LoadedApp, load
from renderer.names import as_mode
from renderer.render import Rendered, render_loaded
from renderer.validate import environments
from toolchain.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

__all__ = ["discover", "generate", "generate_stream", "parameters", "parameters_json"]


def _context(env: Mapping[str, str]) -> PlatformContext:
    """The platform context from the sidecar's own platform file (APPRAFTER_PLATFORM_FILE), never the Application's."""
    platform_file = env.get("APPRAFTER_PLATFORM_FILE")
    return settings.platform_context(Path(platform_file) if platform_file else None)


def _load(env: Mapping[str, str], cwd: Path) -> LoadedApp:
    """The app of the source path, read against the repository root Argo CD unpacked."""
    root = argo_env.repo_root(cwd, env)
    return load(argo_env.app_directory(root, env), root)


def generate(env: Mapping[str, str], cwd: Path) -> Rendered:
    """Render the app in cwd for the environment Argo CD's contract selects. Never returns zero objects."""
    argo_env.settings(env)  # a plugin env of the platform's is refused before anything is read
    mode = settings.mode(env)
    context = _context(env)
    namespace = settings.namespace(settings.Given(env.get("ARGOCD_APP_NAMESPACE"),
                                                  settings.Origin("ARGOCD_APP_NAMESPACE")))
    app = _load(env, cwd)
    declared = environments(app)
    choice = argo_env.choose_environment(env, declared)
    if choice is None:
        raise UserError([Problem(app.source.display, 1, 1, "", "no environment chosen: set the plugin parameter "
                                 "'environment' (or plugin env APPRAFTER_ENVIRONMENT, or name the Application "
                                 f"<app>-<env>); declared: {', '.join(declared) or 'none'}")])
    rendered = render_loaded(app, choice.name, as_mode(mode), namespace, context, chosen_by=choice.source)
    if not rendered.objects:
        raise ToolFailure("the renderer produced no objects; refusing to report an empty success")
    return rendered


def generate_stream(env: Mapping[str, str], cwd: Path) -> tuple[str, list[str]]:
    rendered = generate(env, cwd)
    return dump_json_stream(rendered.objects), rendered.warnings


def parameters(env: Mapping[str, str], cwd: Path) -> list[dict[str, Any]]:
    """Dynamic parameter announcement: the declared environments.

    Argo CD lists dynamic announcements before the static `environment` one and the static one wins by
    name, so the environment the app name implies goes into the tooltip rather than a second `environment`.
    """
    declared = environments(_load(env, cwd))
    implied = argo_env.choose_environment({k: v for k, v in env.items() if k == "ARGOCD_APP_NAME"}, declared)
    tooltip = "The environments apprafter/Application.cue declares; set `environment` to one of them"
    if implied:
        tooltip += f" (without it, this Application's name selects {implied.name!r})"
    return [{"name": "environments", "title": "Declared environments", "tooltip": tooltip,
             "collectionType": "array", "itemType": "string", "array": declared}]


def parameters_json(env: Mapping[str, str], cwd: Path) -> str:
    return json.dumps(parameters(env, cwd), sort_keys=True) + "\n"


def discover(cwd: Path) -> str | None:
    """The app file when cwd holds an AppRafter app (the discovery variant matches on non-empty output)."""
    candidate = cwd / APP_DIR / APP_FILE
    return f"{APP_DIR}/{APP_FILE}" if candidate.is_file() else None
