"""`apprafter render | validate | envs | crds`: argv onto the renderer, YAML on stdout, problems on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from apprafter.budget import limit_own_memory
from apprafter.errors import reported
from apprafter.render_run import RENDER_OPTIONS
from apprafter.render_run import render as run_render
from renderer import validate as checks
from renderer.emit import dump_stream
from renderer.errors import UserError
from renderer.load import load


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _render_options(func: Callable[..., None]) -> Callable[..., None]:
    """The click options of `render`, from the one table the click-free parser reads too."""
    for option in reversed(RENDER_OPTIONS):
        kind: Any = click.Choice(option.choices) if option.choices else None
        if option.is_path:
            kind = click.Path(path_type=Path, dir_okay=option.dest != "platform_file",
                              file_okay=option.dest != "all_dir")
        func = click.option(option.flag, option.dest, type=kind, default=option.default,
                            show_default=option.default is not None, help=option.help)(func)
    return func


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@_render_options
@reported
def render(path: Path, environment: str | None, mode: str, namespace: str | None, domain: str | None,
           tier: str | None, platform_file: Path | None, all_dir: Path | None) -> None:
    """Render PATH (repo root, apprafter/ dir or the .cue file) for one environment as a YAML stream."""
    run_render(path, environment, mode, namespace, domain, tier, platform_file, all_dir)


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@reported
def validate(path: Path) -> None:
    """Check PATH in every environment; exit 0 with a one-line confirmation on stderr when valid."""
    limit_own_memory()
    app = load(path)
    problems = checks.check(app)
    if problems:
        raise UserError(problems)
    click.echo(f"{app.source.display}: valid ({', '.join(checks.environments(app))})", err=True)


@click.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@click.option("--json", "as_json", is_flag=True, help="A JSON array (the form Argo CD's UI reads).")
@reported
def envs(path: Path, as_json: bool) -> None:
    """Print the environment names PATH declares."""
    limit_own_memory()
    names = checks.environments(load(path))
    _write(json.dumps(names) + "\n" if as_json else "".join(f"{n}\n" for n in names))


@click.command()
@reported
def crds() -> None:
    """Print the CRDs (Application, ApplicationBaseline, MigrationPlan, PlatformStack, PublicHostname, ResourceClaim)
    generated from their CUE schemas."""
    from lifecycle.crd import OPERATOR_CRDS
    from platform_stack.resource import PLATFORM_STACK
    from renderer.crds import crd_documents

    _write(dump_stream(crd_documents((*OPERATOR_CRDS, PLATFORM_STACK))))
