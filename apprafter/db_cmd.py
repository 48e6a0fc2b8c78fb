"""`apprafter db`: an app's data services in the cluster (its needs' claims): `rotate` (apprafter/db_rotate.py),
`backups` (apprafter/db_backups.py), `restore` (apprafter/db_restore.py), `drop-generation`
(apprafter/db_drop_generation.py)."""

from __future__ import annotations

import click

from apprafter.db_backups import backups
from apprafter.db_drop_generation import drop_generation
from apprafter.db_restore import restore
from apprafter.db_rotate import rotate

__all__ = ["db"]


@click.group()
def db() -> None:
    """Your app's data services (its needs): rotate their credentials, see what can be restored and restore it, drop
    a generation a restore kept (docs/platform-services.md)."""


db.add_command(rotate)
db.add_command(backups)
db.add_command(restore)
db.add_command(drop_generation)
