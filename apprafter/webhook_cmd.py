"""`apprafter webhook`: the admission webhook server (admission/), flags onto admission.server.serve."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from apprafter.errors import reported
from renderer import settings
from renderer.context import TIERS

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command()
@click.option("--cert-file", required=True, type=_FILE, help="PEM serving certificate (reloaded when it changes).")
@click.option("--key-file", required=True, type=_FILE, help="PEM private key of the certificate.")
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option("--port", default=9443, show_default=True, type=click.IntRange(1, 65535), help="HTTPS port.")
@click.option("--operator-user", default="system:serviceaccount:apprafter-system:apprafter-operator",
              show_default=True, help="The operator's username: the only writer of status, never an approver.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Also serve /metrics over plain HTTP here.")
@click.option("--platform", "platform_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Platform settings file (tier, ...) for the renderer's warnings, as `apprafter render`.")
@click.option("--tier", type=click.Choice(TIERS), help="Platform tier (overrides the platform file).")
@click.option("--cert-poll-seconds", default=2.0, show_default=True, type=click.FloatRange(0.1, 300),
              help="How often the certificate files are checked for a rotation.")
@reported
def webhook(cert_file: Path, key_file: Path, host: str, port: int, operator_user: str, metrics_port: int | None,
            platform_file: Path | None, tier: str | None, cert_poll_seconds: float) -> None:
    """Serve the admission webhook over HTTPS: POST /validate, POST /mutate, /healthz, /readyz, /metrics."""
    from admission.review import Settings
    from admission.server import Options, serve

    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    given = {"tier": settings.Given(tier, settings.Origin("--tier")) if tier else None}
    rules = Settings(operator_user, settings.platform_context(platform_file, given))
    serve(Options(cert_file, key_file, host, port, metrics_port, cert_poll_seconds), rules)
