"""`apprafter render | validate | envs | crds`: argv onto the renderer, data on stdout, problems on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from apprafter.complete import environment_names
from apprafter.errors import reported
from apprafter.options import output_option
from apprafter.render_run import RENDER_OPTIONS
from apprafter.render_run import render as run_render


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _render_options(func: Callable[..., None]) -> Callable[..., None]:
    """The click options of `render`, from the one table the click-free parser reads too."""
    for option in reversed(RENDER_OPTIONS):
        flags = [option.short, option.flag] if option.short else [option.flag]
        if option.is_flag:
            func = click.option(*flags, option.dest, is_flag=True, help=option.help)(func)
            continue
        kind: Any = click.Choice(option.choices) if option.choices else None
        if option.is_path:
            kind = click.Path(path_type=Path, dir_okay=option.dest != "platform_file",
                              file_okay=option.dest != "all_dir")
        complete = environment_names if option.dest == "environment" else None
        func = click.option(*flags, option.dest, type=kind, default=option.default, shell_complete=complete,
                            show_default=option.default is not None, help=option.help)(func)
    return func


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@_render_options
@reported
def render(path: Path, environment: str | None, mode: str, namespace: str | None, domain: str | None,
           tier: str | None, platform_file: Path | None, all_dir: Path | None, all_envs: bool, output: str,
           no_color: bool) -> None:
    """Render PATH (repo root, apprafter/ dir or the .cue file) for one environment (or --all-envs) as a YAML
    stream."""
    run_render(path, environment, mode, namespace, domain, tier, platform_file, all_dir, output, all_envs, no_color)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--all", "all_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Validate every app under this directory, in one cue process.")
@output_option("validate", help="text: one confirmation line per app on stderr; json/yaml: the report on stdout, "
                                  "also when a file is invalid (then with its problems, exit 1).")
@reported
def validate(paths: tuple[Path, ...], all_dir: Path | None, output: str) -> None:
    """Check each PATH (default .; repo root, apprafter/ dir or .cue file) in every environment.

    Every problem of every app is reported at once (exit 1), with `apprafter lint`'s rules (a directory of apps is
    every app below it); when all are valid, its warnings and one line per app on stderr.
    """
    from apprafter.budget import limit_own_memory
    from apprafter.lint_cmd import collect, problem_json
    from renderer import lint
    from renderer import validate as checks
    from renderer.errors import UserError

    limit_own_memory()
    apps, problems = collect(paths, all_dir)
    errors = lint.lint(apps, problems).errors
    report: list[dict[str, Any]] = []
    for app in apps:
        failed = any(p.file == app.source.display for p in errors)
        warnings = [str(w) for w in lint.warnings(app)] if not failed else []
        report.append({"file": app.source.display, "app": app.name, "environments": checks.environments(app),
                       "valid": not failed, "warnings": warnings})
    if output == "json":  # the report whatever it says; the problems' lines go to stderr as always
        document = {"valid": not errors, "apps": report, "problems": [problem_json(p) for p in errors]}
        _write(json.dumps(document, indent=2) + "\n")
    if errors:
        raise UserError(errors)
    for entry in report:
        for warning in entry["warnings"]:
            click.echo(f"warning: {warning}", err=True)
    if output != "json":
        for entry in report:
            click.echo(f"{entry['file']}: valid ({', '.join(entry['environments'])})", err=True)


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@output_option("envs", help="text: one name per line; json: a JSON array (the form Argo CD's UI reads).")
@reported
def envs(path: Path, output: str) -> None:
    """Print the environment names PATH declares."""
    from apprafter.budget import limit_own_memory
    from renderer.load import load
    from renderer.validate import environments

    limit_own_memory()
    names = environments(load(path))
    _write(json.dumps(names) + "\n" if output == "json" else "".join(f"{n}\n" for n in names))


@click.command()
@output_option("crds", help="yaml: the YAML stream to apply; json: one JSON List of the CRDs; name: "
                            "kind.group/name of each.")
@reported
def crds(output: str) -> None:
    """Print the CRDs (Application, ApplicationBaseline, MigrationPlan, PlatformStack, PublicHostname, ResourceClaim)
    generated from their CUE schemas."""
    from lifecycle.crd import OPERATOR_CRDS
    from platform_stack.resource import PLATFORM_STACK
    from renderer.crds import crd_documents
    from renderer.emit import dump_stream

    documents = crd_documents((*OPERATOR_CRDS, PLATFORM_STACK))
    if output == "name":
        from renderer.emit import dump_names

        _write(dump_names(documents))
        return
    if output == "json":
        _write(json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}, indent=2) + "\n")
        return
    _write(dump_stream(documents))
