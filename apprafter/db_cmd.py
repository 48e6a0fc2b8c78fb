"""`apprafter db`: an app's data services in the cluster (its needs' claims): `rotate` (apprafter/db_rotate.py)."""

from __future__ import annotations

import click

from apprafter.db_rotate import rotate

__all__ = ["db"]


@click.group()
def db() -> None:
    """Your app's data services (its needs): rotate their credentials (docs/platform-services.md)."""


db.add_command(rotate)
