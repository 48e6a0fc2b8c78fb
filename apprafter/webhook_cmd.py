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
@click.option("--claim-status-user", "claim_status_users", multiple=True,
              help="A claim provider's username: who may write ResourceClaim status (repeat for several; none "
                   "given: the operator).")
@click.option("--provider-writer", "provider_writers", multiple=True, metavar="USER|group:GROUP",
              help="Who may write ServiceProviders: a username, or group:NAME (repeat for several; none given: "
                   "whoever RBAC lets). The chart names the cluster's administrators and Argo CD's controller.")
@click.option("--kubeconfig", type=_FILE, help="Read HostnamePolicies and ServiceProviders from this cluster (in a "
              "pod: its own account; neither: only the apps' default hostnames are allowed, and no need's ceiling is "
              "checked).")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Also serve /metrics over plain HTTP here.")
@click.option("--platform", "platform_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Platform settings file (domain, tier, ...), as `apprafter render` and the operator read it.")
@click.option("--domain", help="Platform domain: the platform's own names and the apps' default hostnames "
              "{app}.{env}.{domain} (give the operator's; overrides the platform file).")
@click.option("--tier", type=click.Choice(TIERS), help="Platform tier (overrides the platform file).")
@click.option("--cert-poll-seconds", default=2.0, show_default=True, type=click.FloatRange(0.1, 300),
              help="How often the certificate files are checked for a rotation.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Review worker processes (reviews run there, off the event loop).")
@click.option("--review-cpu-seconds", default=2.0, show_default=True, type=click.FloatRange(0.05, 60),
              help="CPU time one review may take in its worker; past it the write is refused.")
@click.option("--review-memory-mb", default=96, show_default=True, type=click.IntRange(4, 4096),
              help="How far a worker's memory may grow for one review; past it the write is refused.")
@click.option("--review-deadline-seconds", default=4.0, show_default=True, type=click.FloatRange(0.1, 29),
              help="Body read to answer, waiting for a worker included; keep it below the webhook configuration's "
                   "timeoutSeconds, so the API server gets this webhook's refusal instead of a timeout.")
@click.option("--read-timeout", default=10.0, show_default=True, type=click.FloatRange(0.1, 300),
              help="Seconds a request body may take to arrive once its head has.")
@click.option("--head-timeout", default=10.0, show_default=True, type=click.FloatRange(0.1, 300),
              help="Seconds a connection may take to send a request head (after opening, or after an answer).")
@click.option("--review-queue", default=32, show_default=True, type=click.IntRange(1, 10000),
              help="Reviews that may wait for a worker; when full, the writer with the most waiting gives way.")
@click.option("--max-connections", default=128, show_default=True, type=click.IntRange(1, 100000),
              help="Connections at once; past it, the client holding the most gives up an idle one, or the new one "
                   "is closed.")
@click.option("--client-fresh-connections", default=64, show_default=True, type=click.IntRange(1, 100000),
              help="Connections one client address may hold that have sent no request yet (TLS handshakes "
                   "included); past it, its new ones are closed at once.")
@click.option("--handshake-timeout", default=5.0, show_default=True, type=click.FloatRange(0.1, 60),
              help="Seconds a TLS handshake may take.")
@click.option("--max-buffered-mb", default=48, show_default=True, type=click.IntRange(4, 4096),
              help="Request bodies held in memory at once, all connections together (one writer: a quarter of "
                   "it); past it a write gets 429.")
@reported
def webhook(cert_file: Path, key_file: Path, host: str, port: int, operator_user: str,
            claim_status_users: tuple[str, ...], provider_writers: tuple[str, ...], kubeconfig: Path | None,
            metrics_port: int | None,
            platform_file: Path | None, domain: str | None,
            tier: str | None, cert_poll_seconds: float,
            workers: int, review_cpu_seconds: float, review_memory_mb: int, review_deadline_seconds: float,
            read_timeout: float, head_timeout: float, review_queue: int, max_connections: int,
            client_fresh_connections: int, handshake_timeout: float, max_buffered_mb: int) -> None:
    """Serve the admission webhook over HTTPS: POST /validate, POST /mutate, /healthz, /readyz, /metrics."""
    from admission.app import Bounds
    from admission.connections import Limits as ConnectionLimits
    from admission.pool import Limits
    from admission.review import MAX_BODY_BYTES, Settings
    from admission.server import Options, serve

    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    context = settings.flags_context(platform_file, domain=domain, tier=tier)
    rules = Settings(operator_user, context, claim_status_users, provider_writers)
    limits = Limits(workers, review_cpu_seconds, review_memory_mb, review_deadline_seconds, queue=review_queue)
    bounds = Bounds(MAX_BODY_BYTES, read_timeout, max_buffered_mb << 20)
    connections = ConnectionLimits(max_connections, client_fresh_connections, handshake_timeout)
    serve(Options(cert_file, key_file, host, port, metrics_port, cert_poll_seconds, limits, bounds, connections,
                  kubeconfig=kubeconfig, head_seconds=head_timeout), rules)
