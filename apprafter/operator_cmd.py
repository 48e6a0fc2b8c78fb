"""`apprafter operator`: run the Application reconciler, the claim binder and the PlatformStack controller
(leader-elected, with probes and metrics) until SIGTERM. Its flags are grouped by apprafter.operator_settings."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from apprafter.errors import reported
from apprafter.kube_options import kube_options
from apprafter.operator_settings import LEASE_NAME, LOGGER_ROOT, METRIC_PREFIX, OperatorSettings
from apprafter.options import namespace_option
from renderer import settings as settings_
from renderer.context import TIERS
from renderer.names import OPERATOR_FIELD_MANAGER

if TYPE_CHECKING:  # the controllers and the cluster client are imported when the operator starts, not for --help
    from lightkube import KubeConfig

    from lifecycle.backends.contract import Site
    from renderer.context import PlatformContext

REPORTING_CONTROLLER = "apprafter.io/operator"  # Events' reportingController
RENDER_TIMEOUT = 10.0  # seconds of cue per Application and reconcile, unless the flag or the environment says


# the pod's projected ServiceAccount token (reconciler.openbao.JWT_FILE: not imported for --help)
JWT_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"


@click.command()
@kube_options
@namespace_option("Reconcile Applications in this namespace only (repeatable; default: every namespace).",
                  dest="namespaces", multiple=True, metavar="NS")
@click.option("--resync", type=click.FloatRange(min=1), default=300.0, show_default=True, metavar="SECONDS",
              help="Look at every Application again this often (drift is repaired; nothing is written when "
                   "nothing changed).")
@click.option("--workers", type=click.IntRange(min=1), default=8, show_default=True,
              help="Applications reconciled at the same time.")
@click.option("--max-backoff", type=click.FloatRange(min=0.5), default=300.0, show_default=True, metavar="SECONDS",
              help="Cap of the exponential backoff after a failed reconcile.")
@click.option("--render-timeout", type=click.FloatRange(min=0.1, max=settings_.MAX_TIMEOUT_S), metavar="SECONDS",
              help="Each Application's render budget (cue's time budget for one reconcile): one over it is retried "
                   "with backoff and holds one worker at most this long. Default: APPRAFTER_CUE_TIMEOUT, else 10.")
@click.option("--watch-timeout", type=click.IntRange(min=1), default=120, show_default=True, metavar="SECONDS",
              help="The API server ends each watch after this long (it is then resumed); one still open past it "
                   "with nothing received has stalled and is re-listed.")
@click.option("--health-port", type=click.IntRange(min=0, max=65535), default=8081, show_default=True,
              help="/healthz and /readyz (0: off).")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=8080, show_default=True,
              help="Prometheus /metrics (0: off).")
@click.option("--bind-address", default="0.0.0.0", show_default=True, help="Address of the probe and metrics ports.")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Run as one of several replicas: only the holder of the Lease reconciles.")
@click.option("--leader-elect-lease-duration", type=click.FloatRange(min=1), default=30.0, show_default=True,
              metavar="SECONDS", help="A standby takes over after the leader has not renewed for this long.")
@click.option("--leader-elect-renew-deadline", type=click.FloatRange(min=0.5), default=20.0, show_default=True,
              metavar="SECONDS", help="The leader steps down (and exits) when it could not renew for this long.")
@click.option("--leader-elect-retry-period", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              metavar="SECONDS", help="How often the leader renews and a standby tries.")
@click.option("--leader-elect-resource-namespace", metavar="NS",
              help="Namespace of the Lease (default: the pod's namespace, else the kubeconfig context's).")
@click.option("--leader-elect-resource-name", default=LEASE_NAME, show_default=True, metavar="NAME")
@click.option("--records-namespace", metavar="NS",
              help="Where the operator keeps its ApplicationBaselines and PublicHostnames (default: the pod's "
                   "namespace, else the kubeconfig context's); only the operator may write there.")
@click.option("--argocd-namespace", default="argocd", show_default=True, metavar="NS",
              help="Argo CD's namespace: where the repo-creds Secrets derived from SourceCredentials are written.")
@click.option("--credential-gate", type=click.Choice(["present", "confirmed"]), default="present",
              show_default=True, help="When a SourceCredential half derives its Secrets: once its material is "
                                      "present, or once it was also checked Valid (until then what it derived stays).")
@click.option("--credential-check-interval", type=click.FloatRange(min=1), default=600.0, show_default=True,
              metavar="SECONDS", help="Seconds between two checks of a SourceCredential half that gave a verdict "
                                      "(one that could not tell is checked again with backoff up to --max-backoff).")
@click.option("--openbao-address", metavar="URL",
              help="OpenBao's address (http(s)://host:port) for SourceCredentials whose backend is openBaoPath "
                   "(KV v2, re-read every --credential-check-interval). Default: none (such a half is Present "
                   "Unknown).")
@click.option("--openbao-auth-role", metavar="ROLE",
              help="Log in to OpenBao with the Kubernetes auth method as this role (with --openbao-jwt-file).")
@click.option("--openbao-auth-mount", default="kubernetes", show_default=True, metavar="PATH",
              help="Where OpenBao's Kubernetes auth method is mounted (auth/<this>/login).")
@click.option("--openbao-jwt-file", type=click.Path(path_type=Path, dir_okay=False), default=JWT_FILE,
              show_default=True, help="The ServiceAccount token the Kubernetes login presents (re-read at each login).")
@click.option("--openbao-token-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Instead of a login: a file holding an OpenBao client token (re-read for every request).")
@click.option("--openbao-ca-file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="PEM CA bundle that signed OpenBao's certificate (default: the system's).")
@click.option("--identity", help="This replica's name in the Lease (default: POD_NAME, else hostname_pid).")
@click.option("--field-manager", default=OPERATOR_FIELD_MANAGER, show_default=True,
              help="Server-side apply field manager of the children (status: <this>-status).")
@click.option("--platform-stack/--no-platform-stack", default=True, show_default=True,
              help="Run the PlatformStack controller (apprafter-system/default -> the umbrella Argo CD Application); "
                   "it needs cosign.")
@click.option("--claim-binder/--no-claim-binder", default=True, show_default=True,
              help="Bind each ResourceClaim to its ServiceProvider (status.provider, the Bound condition). Off when "
                   "the webhook names other claim providers (--claim-status-user without the operator's account): "
                   "they alone may write claim status, so they bind (docs/platform-services.md).")
@click.option("--gateway-listeners/--no-gateway-listeners", default=True, show_default=True,
              help="Add to the platform's public Gateways one HTTPS listener per public hostname an Application "
                   "holds with TLS, serving that app's certificate (needs get, list, watch, create, patch and delete "
                   "on Gateways in the gateway namespace).")
@click.option("--listeners-per-namespace", type=click.IntRange(1, 4096), default=16, show_default=True,
              help="The most per-hostname listeners one namespace's apps hold on the public Gateways, the oldest "
                   "first: one tenant cannot take every other's (the rest say ListenerUnavailable).")
@click.option("--public-gateways", type=click.IntRange(1, 64), default=16, show_default=True,
              help="How many public Gateways hostnames are placed on: the chart's, then <name>-2 ... <name>-N, made "
                   "as the hostnames need them (a Gateway holds 64 listeners: the chart's own and ours).")
@click.option("--image-registries", "image_registries", multiple=True, metavar="PATTERN",
              help="A registry host (`ghcr.io`, `registry.internal:5000`, `*.example.com`) image updates may ask "
                   "about tags (imagePolicy.resolve: digest; repeatable). None given: every registry an image "
                   "names; an app's image elsewhere runs as rendered and says so.")
@click.option("--insecure-registries", "insecure_registries", multiple=True, metavar="PATTERN",
              help="A registry host (same patterns) image updates and SourceCredential checks ask over plain "
                   "HTTP, never HTTPS: one served without TLS inside the platform's own network (an air-gapped or "
                   "dev cluster; repeatable). Its "
                   "pull secret's login then travels in clear: name only registries on a network you trust. "
                   "Loopback registries are asked over plain HTTP anyway. --image-registries still decides whether "
                   "a host is asked at all.")
@click.option("--backend-image", "backend_images", multiple=True, metavar="BACKEND=REF",
              help="The image of the shared servers the operator runs for a ServiceProvider backend (repeatable): "
                   "redis-server (Debian's redis-server), cloudnative-pg (PostgreSQL; CloudNativePG reads the major "
                   "version from its tag, which must start with it), cloudnative-pg.pgbouncer (the Cluster's "
                   "Pooler: Debian's PgBouncer). Default: the release's, ghcr.io/apprafter/redis:<this version>, "
                   "ghcr.io/apprafter/postgresql:<its PostgreSQL major>, ghcr.io/apprafter/pgbouncer:<this version>.")
@click.option("--platform", "platform_file", type=click.Path(path_type=Path, dir_okay=False),
              help="YAML file with platform settings (domain, gateway, tier, ...), as for `apprafter render`.")
@click.option("--domain", help="Platform domain for default hostnames {app}.{env}.{domain}.")
@click.option("--tier", type=click.Choice(TIERS), help="Platform tier (what the cluster can provide).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@click.option("--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True)
@reported
def operator(**flags: Any) -> None:
    """Reconcile Applications into their children and gate destructive changes; bind ResourceClaims to
    ServiceProviders; keep the platform stack at the verified version its PlatformStack asks for (docs/operator.md,
    docs/platform-services.md, docs/platform-stack.md)."""
    sys.exit(_run(OperatorSettings.of(flags)))


def sites(context: PlatformContext, images: Mapping[str, str]) -> dict[str, Site]:
    """By backend: where its shared servers run (the platform's namespace for its need type) and from which image
    (the flag's, else the release's)."""
    from lifecycle.backends.contract import Site
    from lifecycle.backends.registry import REGISTERED
    from reconciler.backends.registry import IMAGES, default_image

    def parts(backend: str) -> tuple[tuple[str, str], ...]:
        named = (key for key in sorted(IMAGES) if key.startswith(f"{backend}."))
        return tuple((key.partition(".")[2], images.get(key) or default_image(key) or "") for key in named)

    return {r.core.backend: Site(context.provider_namespace(r.core.type) or "",
                                 images.get(r.core.backend) or default_image(r.core.backend), parts(r.core.backend))
            for r in REGISTERED}


def _run(settings: OperatorSettings) -> int:
    """Check what the operator needs (cue, cosign, a cluster), then run it; the exit code."""
    import asyncio

    from compatibility.inputs import document_schema
    from controller_runtime import logs
    from controller_runtime.kubeconfig import default_namespace, load_config
    from toolchain.tools import resolve

    logs.setup(settings.log_level, settings.log_format)
    platform = settings.platform
    # the renderer reads its budget from the environment when it runs cue (renderer.settings.limits)
    if platform.render_timeout is not None or not os.environ.get(settings_.TIMEOUT_ENV):
        os.environ[settings_.TIMEOUT_ENV] = repr(platform.render_timeout or RENDER_TIMEOUT)
    context = settings_.flags_context(platform.platform_file, domain=platform.domain or None,
                                      tier=platform.tier or None)
    config = load_config(settings.cluster.kubeconfig, settings.cluster.context)
    document_schema()  # runs cue once, now: a missing cue is a start-up failure (exit 2), not a failed reconcile
    if platform.platform_stack:
        resolve("cosign")  # the same for cosign, which verifies every platform-stack version before it is applied
    here = default_namespace(config)  # the pod's (in-cluster), else the kubeconfig context's
    return asyncio.run(_serve(settings, config, context, records_namespace=settings.records_namespace or here,
                              lease_namespace=settings.lease.namespace or here))


async def _serve(settings: OperatorSettings, config: KubeConfig, context: PlatformContext, *,
                 records_namespace: str, lease_namespace: str) -> int:
    """Run the manager until SIGTERM/SIGINT; the exit code."""
    import asyncio
    import signal

    from controller_runtime.client import Kube
    from controller_runtime.events import Recorder
    from controller_runtime.lease import LeaderElector, LeaseSettings, default_identity
    from controller_runtime.manager import Controller, Manager, Runtime, Settings
    from controller_runtime.probes import Health, Servers
    from controller_runtime.telemetry import Telemetry
    from reconciler.application import ApplicationController
    from reconciler.claims import ClaimController
    from reconciler.gateway_listeners import GatewayListenerController
    from reconciler.openbao import OpenBao
    from reconciler.platformstack import PlatformStackController
    from reconciler.sourcecredential import SourceCredentialController

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    field_manager, flags = settings.cluster.field_manager, settings.lease
    telemetry = Telemetry(METRIC_PREFIX, LOGGER_ROOT)
    kube = Kube(config, field_manager, watch_timeout=settings.cluster.watch_timeout, telemetry=telemetry)
    # The Lease on a connection of its own: renewals never queue behind the workers' requests, and a request
    # cancelled at shutdown cannot take the connection that releases the Lease down with it.
    lease_kube = Kube(config, field_manager, http2=False, telemetry=telemetry)
    lease = LeaseSettings(namespace=lease_namespace, name=flags.name, identity=flags.identity or default_identity(),
                          lease_duration=flags.duration, renew_deadline=flags.renew_deadline,
                          retry_period=flags.retry_period) if flags.elect else None
    health = Health()
    serving = settings.serving
    servers = Servers(health, serving.bind_address, serving.health_port, serving.metrics_port)
    identity = lease.identity if lease is not None else field_manager
    credentials = settings.credentials
    openbao = OpenBao(credentials.openbao) if credentials.openbao is not None else None
    loop_flags = settings.loop
    manager_settings = Settings(namespaces=loop_flags.namespaces, resync=loop_flags.resync,
                                workers=loop_flags.workers, max_backoff=loop_flags.max_backoff)
    try:
        runtime = Runtime(kube, manager_settings, Recorder(kube, REPORTING_CONTROLLER, identity))
        elector = LeaderElector(lease_kube, lease) if lease is not None else None
        controllers: list[Controller] = [ApplicationController(context, records_namespace,
                                                               settings.platform.image_registries,
                                                               settings.platform.insecure_registries),
                                         SourceCredentialController(
                                             records_namespace, credentials.argocd_namespace,
                                             f"{field_manager}-credentials", credentials.gate,
                                             credentials.check_interval, manager_settings.max_backoff, openbao,
                                             settings.platform.insecure_registries)]
        if settings.platform.platform_stack:
            controllers.append(PlatformStackController())
        if settings.platform.gateway_listeners:
            controllers.append(GatewayListenerController(context.gateway_name, context.gateway_namespace,
                                                         records_namespace, settings.platform.listener_share,
                                                         settings.platform.public_gateways))
        if settings.platform.claim_binder:
            controllers.append(ClaimController(sites(context, dict(settings.platform.backend_images))))
        return await Manager(runtime, controllers, health, elector).run(stop)
    finally:
        servers.close()
        await kube.close()
        await lease_kube.close()
        if openbao is not None:
            openbao.close()
