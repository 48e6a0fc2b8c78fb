"""`apprafter render` without click: its options (one table, which the click command is built from too), a
parser for well-formed command lines, and the command itself.

`render` runs before every push and in CI loops, so its start-up counts like the plugin's: a well-formed
command line is parsed here and never imports click; anything else (`--help`, an unknown option, a bad
choice) goes to the click command, which builds its options from RENDER_OPTIONS and says what is wrong.
"""

from __future__ import annotations

import sys
from pathlib import Path

from apprafter.convention import ENVIRONMENT, NAMESPACE, NO_COLOR, OUTPUT, OUTPUTS
from renderer.context import TIERS
from renderer.render import MODES
from toolchain.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any

__all__ = ["RENDER_OPTIONS", "Option", "parse", "render"]


class Option(Record):
    """One option of `render`: its flag, the argument it fills, and what click says about it."""

    flag: str
    dest: str
    help: str
    choices: tuple[str, ...] | None = None
    default: str | None = None
    is_path: bool = False
    short: str | None = None
    is_flag: bool = False


RENDER_OPTIONS = (
    Option(ENVIRONMENT.long, "environment", "Environment to render (one of the declared ones).",
           short=ENVIRONMENT.short),
    Option("--mode", "mode", "cr: the Application CR for the reconciler; manifests: the objects it applies.",
           MODES, "cr"),
    Option(NAMESPACE.long, "namespace", "Namespace stamped on the output (default: metadata.namespace, else none).",
           short=NAMESPACE.short),
    Option("--domain", "domain", "Platform domain for default hostnames {app}.{env}.{domain}."),
    Option("--tier", "tier", "Platform tier (what the cluster can provide).", TIERS),
    Option("--platform", "platform_file", "YAML file with platform settings (domain, gateway, tier, ...).",
           is_path=True),
    Option("--all", "all_dir", "Render every app under this directory, each environment, in one cue process.",
           is_path=True),
    Option("--all-envs", "all_envs", "Render every environment PATH declares (each after a `# app/env` line).",
           is_flag=True),
    Option(OUTPUT.long, "output", "yaml: the Kubernetes YAML stream; json: one JSON List of the same objects; "
           "name: one kind[.group]/name per object, as kubectl prints.", OUTPUTS["render"], OUTPUTS["render"][0],
           short=OUTPUT.short),
    Option(NO_COLOR.long, "no_color", NO_COLOR.help, is_flag=True),
)


def parse(argv: list[str]) -> dict[str, object] | None:
    """The arguments of a well-formed `render` command line, or None for click to handle (help, mistakes)."""
    by_flag = {o.flag: o for o in RENDER_OPTIONS} | {o.short: o for o in RENDER_OPTIONS if o.short}
    values: dict[str, object] = {o.dest: False if o.is_flag else o.default for o in RENDER_OPTIONS}
    path: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-"):
            flag, eq, value = arg.partition("=")
            option = by_flag.get(flag)
            if option is None or (option.is_flag and eq):
                return None
            if option.is_flag:
                values[option.dest] = True
                i += 1
                continue
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i += 1
                value = argv[i]
            if option.choices is not None and value not in option.choices:
                return None
            values[option.dest] = Path(value) if option.is_path else value
        elif path is None:
            path = arg
        else:
            return None
        i += 1
    values["path"] = Path(path if path is not None else ".")
    return values


def render(path: Path, environment: str | None, mode: str, namespace: str | None, domain: str | None,
           tier: str | None, platform_file: Path | None, all_dir: Path | None, output: str = "yaml",
           all_envs: bool = False, no_color: bool = False) -> None:
    """Render PATH (repo root, apprafter/ dir or the .cue file) for one environment as a YAML stream."""
    from apprafter.budget import limit_own_memory
    from apprafter.entry import imports_done
    from renderer import settings
    from renderer.errors import Problem, UserError
    from renderer.load import load
    from renderer.names import as_mode
    from renderer.render import Rendered, render_all, render_loaded
    from renderer.validate import environments, interpolation_warnings

    imports_done()

    def flag(value: str | None, name: str) -> settings.Given | None:
        return None if value is None else settings.Given(value, settings.Origin(name))

    limit_own_memory()
    context = settings.flags_context(platform_file, domain=domain, tier=tier)
    namespace = settings.namespace(flag(namespace, "--namespace"))
    if all_dir is not None:
        if all_envs or environment:
            raise UserError([Problem("--all", 0, 0, "", "renders every environment of every app: not with "
                                     "--all-envs or --env")])
        rendered, problems = render_all(all_dir, as_mode(mode), context)
        if problems:
            raise UserError(problems)
        _write_many(rendered, output)
        return
    app = load(path)
    declared = environments(app)
    if all_envs:
        if environment:
            raise UserError([Problem("--all-envs", 0, 0, "", "renders every environment: not with --env")])
        many: list[Rendered] = []
        problems = []
        for env in declared:
            try:
                many.append(render_loaded(app, env, as_mode(mode), namespace, context))
            except UserError as e:
                problems += e.problems
        if problems:
            raise UserError(problems)
        for warning in map(str, interpolation_warnings(app)):
            print(f"warning: {warning}", file=sys.stderr)
        _write_many(many, output)
        return
    if not environment:
        raise UserError([Problem(app.source.display, 1, 1, "", f"--env is required (or --all-envs); declared "
                                 f"environments: {', '.join(declared)}")])
    result = render_loaded(app, environment, as_mode(mode), namespace, context)
    for warning in [*map(str, interpolation_warnings(app)), *result.warnings]:
        print(f"warning: {warning}", file=sys.stderr)
    _write(_formatted(result.objects, output))


def _write_many(rendered: list[Any], output: str) -> None:
    """Several apps or environments: the warnings, then one stream (each part after a `# app/env` line), one
    JSON List, or the names."""
    from renderer.emit import dump_stream

    for r in rendered:
        for warning in r.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    if output == "yaml":
        _write("".join(f"# {r.app}/{r.environment}\n" + dump_stream(r.objects) for r in rendered))
    else:
        _write(_formatted([o for r in rendered for o in r.objects], output))


def _formatted(objects: list[dict[str, Any]], output: str) -> str:
    from renderer.emit import dump_names, dump_stream

    if output == "json":
        return _json_list(objects)
    return dump_names(objects) if output == "name" else dump_stream(objects)


def _json_list(objects: list[dict[str, Any]]) -> str:
    """The objects as one `v1` List, the JSON form kubectl prints for several objects."""
    import json

    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2, ensure_ascii=False) + "\n"


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
