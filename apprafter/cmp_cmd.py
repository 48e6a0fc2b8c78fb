"""`apprafter cmp ...` under click (help text); the plugin itself enters through apprafter.entry without click."""

from __future__ import annotations

import sys

import click

from apprafter.cmp_entry import run


@click.group()
def cmp() -> None:
    """Argo CD Config Management Plugin entry points (input only from Argo CD's env and working dir)."""


@cmp.command()
def generate() -> None:
    """Print the app's objects for the chosen environment; exit non-zero with nothing on stdout on any error."""
    sys.exit(run("generate"))


@cmp.command()
def parameters() -> None:
    """Print the dynamic parameter announcement (a JSON array, as Argo CD requires)."""
    sys.exit(run("parameters"))


@cmp.command()
def discover() -> None:
    """Print the app file and exit 0 when this directory holds an AppRafter app; else exit 1 silently."""
    sys.exit(run("discover"))
