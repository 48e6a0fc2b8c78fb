"""`apprafter render` without click: its options (one table, which the click command is built from too), a
parser for well-formed command lines, and the command itself.

`render` runs before every push and in CI loops, so its start-up counts like the plugin's: a well-formed
command line is parsed here and never imports click; anything else (`--help`, an unknown option, a bad
choice) goes to the click command, which builds its options from RENDER_OPTIONS and says what is wrong.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple, cast

from apprafter.convention import ENVIRONMENT, NAMESPACE, OUTPUT, OUTPUTS
from renderer.context import TIERS
from renderer.render import MODES

__all__ = ["RENDER_OPTIONS", "Option", "parse", "render"]


class Option(NamedTuple):
    """One option of `render`: its flag, the argument it fills, and what click says about it."""

    flag: str
    dest: str
    help: str
    choices: tuple[str, ...] | None = None
    default: str | None = None
    is_path: bool = False
    short: str | None = None


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
    Option(OUTPUT.long, "output", "yaml: the Kubernetes YAML stream; json: one JSON List of the same objects.",
           OUTPUTS["render"], OUTPUTS["render"][0], short=OUTPUT.short),
)


def parse(argv: list[str]) -> dict[str, object] | None:
    """The arguments of a well-formed `render` command line, or None for click to handle (help, mistakes)."""
    by_flag = {o.flag: o for o in RENDER_OPTIONS} | {o.short: o for o in RENDER_OPTIONS if o.short}
    values: dict[str, object] = {o.dest: o.default for o in RENDER_OPTIONS}
    path: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-"):
            flag, eq, value = arg.partition("=")
            option = by_flag.get(flag)
            if option is None:
                return None
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
           tier: str | None, platform_file: Path | None, all_dir: Path | None, output: str = "yaml") -> None:
    """Render PATH (repo root, apprafter/ dir or the .cue file) for one environment as a YAML stream."""
    from apprafter.budget import limit_own_memory
    from renderer import settings
    from renderer.emit import dump_stream
    from renderer.errors import Problem, UserError
    from renderer.load import load
    from renderer.render import Mode, render_all, render_loaded
    from renderer.validate import environments, interpolation_warnings

    def flag(value: str | None, name: str) -> settings.Given | None:
        return None if value is None else settings.Given(value, settings.Origin(name))

    limit_own_memory()
    context = settings.platform_context(platform_file, {"domain": flag(domain, "--domain"),
                                                        "tier": flag(tier, "--tier")})
    namespace = settings.namespace(flag(namespace, "--namespace"))
    if all_dir is not None:
        rendered, problems = render_all(all_dir, cast(Mode, mode), context)
        if problems:
            raise UserError(problems)
        chunks = []
        for r in rendered:
            chunks.append(f"# {r.app}/{r.environment}\n" + dump_stream(r.objects))
            for warning in r.warnings:
                print(f"warning: {warning}", file=sys.stderr)
        _write(_json_list([o for r in rendered for o in r.objects]) if output == "json" else "".join(chunks))
        return
    if not environment:
        app = load(path)
        declared = environments(app)
        raise UserError([Problem(app.source.display, 1, 1, "", f"--env is required; declared environments: "
                                 f"{', '.join(declared)}")])
    app = load(path)
    result = render_loaded(app, environment, cast(Mode, mode), namespace, context)
    for warning in [*map(str, interpolation_warnings(app)), *result.warnings]:
        print(f"warning: {warning}", file=sys.stderr)
    _write(_json_list(result.objects) if output == "json" else dump_stream(result.objects))


def _json_list(objects: list[dict[str, Any]]) -> str:
    """The objects as one `v1` List, the JSON form kubectl prints for several objects."""
    import json

    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2, ensure_ascii=False) + "\n"


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
