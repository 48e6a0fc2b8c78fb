"""`apprafter cmp generate | parameters | discover`: the commands plugin.yaml runs inside the Argo CD sidecar."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from renderer.errors import ToolFailure, UserError

MAX_ERROR_LINES = 20  # Argo CD shows stderr in the UI: keep it short


@click.group()
def cmp() -> None:
    """Argo CD Config Management Plugin entry points (input only from Argo CD's env and working dir)."""


def _fail(e: UserError | ToolFailure) -> None:
    lines = [str(p) for p in e.problems] if isinstance(e, UserError) else [f"apprafter: {e}"]
    for line in lines[:MAX_ERROR_LINES]:
        click.echo(line, err=True)
    if len(lines) > MAX_ERROR_LINES:
        click.echo(f"... and {len(lines) - MAX_ERROR_LINES} more problems (run `apprafter validate`)", err=True)
    sys.exit(1 if isinstance(e, UserError) else 2)


@cmp.command()
def generate() -> None:
    """Print the app's objects for the chosen environment; exit non-zero with nothing on stdout on any error."""
    from cmp.commands import generate_stream

    try:
        stream, warnings = generate_stream(os.environ, Path.cwd())
    except (UserError, ToolFailure) as e:
        _fail(e)
        return
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    sys.stdout.write(stream)
    sys.stdout.flush()


@cmp.command()
def parameters() -> None:
    """Print the dynamic parameter announcement (a JSON array, as Argo CD requires)."""
    from cmp.commands import parameters_json

    try:
        text = parameters_json(os.environ, Path.cwd())
    except (UserError, ToolFailure) as e:
        _fail(e)
        return
    sys.stdout.write(text)


@cmp.command()
def discover() -> None:
    """Print the app file and exit 0 when this directory holds an AppRafter app; else exit 1 silently."""
    from cmp.commands import discover as find

    found = find(Path.cwd())
    if not found:
        sys.exit(1)
    click.echo(found)
