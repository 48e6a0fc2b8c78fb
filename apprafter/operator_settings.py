"""The flags of `apprafter operator` grouped by what they configure, checked together (lease timings, OpenBao), and
the names its runtime reports under. Imports nothing of the runtime: `--help` never pays for it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click

if TYPE_CHECKING:
    from reconciler.openbao import OpenBaoSettings

__all__ = ["LEASE_NAME", "LOGGER_ROOT", "METRIC_PREFIX", "ClusterFlags", "LeaseFlags", "LoopFlags", "OperatorSettings",
           "PlatformFlags", "ServingFlags", "SourceCredentialSettings"]

# What the operator's runtime reports under (controller_runtime.telemetry): the metrics and loggers docs/operator.md
# names (apprafter_reconcile_total, apprafter.informer, ...), and the Lease the chart's replicas share.
METRIC_PREFIX = "apprafter"
LOGGER_ROOT = "apprafter"
LEASE_NAME = "apprafter-operator"


class ClusterFlags(NamedTuple):
    """Which cluster, and as whom: the kubeconfig, the field manager, how long a watch stays open."""

    kubeconfig: Path | None
    context: str | None
    field_manager: str
    watch_timeout: int


class LoopFlags(NamedTuple):
    """The manager's loop (controller_runtime.manager.Settings): namespaces, resync, workers, backoff cap."""

    namespaces: tuple[str, ...]
    resync: float
    workers: int
    max_backoff: float


class LeaseFlags(NamedTuple):
    """Leader election: on or off, its Lease and timings, this replica's name."""

    elect: bool
    duration: float
    renew_deadline: float
    retry_period: float
    namespace: str | None
    name: str
    identity: str | None


class ServingFlags(NamedTuple):
    """The probe and metrics ports."""

    bind_address: str
    health_port: int
    metrics_port: int


class PlatformFlags(NamedTuple):
    """What an Application renders against, and whether the PlatformStack controller and the claim binder run."""

    render_timeout: float | None
    platform_file: Path | None
    domain: str | None
    tier: str | None
    platform_stack: bool
    claim_binder: bool = True
    # (backend, image) of --backend-image; a backend not named: the release's (reconciler.backends.registry)
    backend_images: tuple[tuple[str, str], ...] = ()
    gateway_listeners: bool = True  # add each TLS-routed public hostname's listener to the public Gateway
    listener_share: int = 16  # --listeners-per-namespace: the most of them one namespace holds
    public_gateways: int = 16  # --public-gateways: how many Gateways the hostnames are placed on
    image_registries: tuple[str, ...] = ()  # --image-registries: where image updates may ask (none: anywhere)
    insecure_registries: tuple[str, ...] = ()  # --insecure-registries: those asked over plain HTTP


class SourceCredentialSettings(NamedTuple):
    """The SourceCredential controller's flags: Argo CD's namespace, the coverage gate, the check interval, and
    OpenBao (None: not configured)."""

    argocd_namespace: str
    gate: str
    check_interval: float
    openbao: OpenBaoSettings | None = None


@dataclasses.dataclass(frozen=True)
class OperatorSettings:
    """Every flag of `apprafter operator`, by group."""

    cluster: ClusterFlags
    loop: LoopFlags
    lease: LeaseFlags
    serving: ServingFlags
    platform: PlatformFlags
    credentials: SourceCredentialSettings
    records_namespace: str | None
    log_level: str
    log_format: str

    @classmethod
    def of(cls, flags: Mapping[str, Any]) -> OperatorSettings:
        """From click's keyword arguments (one per flag); UsageError or BadParameter for flags that do not go
        together."""
        lease = LeaseFlags(flags["leader_elect"], flags["leader_elect_lease_duration"],
                           flags["leader_elect_renew_deadline"], flags["leader_elect_retry_period"],
                           flags["leader_elect_resource_namespace"], flags["leader_elect_resource_name"],
                           flags["identity"])
        openbao = _openbao(flags["openbao_address"], flags["openbao_auth_role"], flags["openbao_auth_mount"],
                           flags["openbao_jwt_file"], flags["openbao_token_file"], flags["openbao_ca_file"])
        if lease.renew_deadline >= lease.duration or lease.retry_period >= lease.renew_deadline:
            raise click.UsageError("want --leader-elect-retry-period < --leader-elect-renew-deadline < "
                                   "--leader-elect-lease-duration")
        return cls(
            cluster=ClusterFlags(flags["kubeconfig"], flags["kube_context"], flags["field_manager"],
                                 flags["watch_timeout"]),
            loop=LoopFlags(flags["namespaces"], flags["resync"], flags["workers"], flags["max_backoff"]),
            lease=lease,
            serving=ServingFlags(flags["bind_address"], flags["health_port"], flags["metrics_port"]),
            platform=PlatformFlags(flags["render_timeout"], flags["platform_file"], flags["domain"], flags["tier"],
                                   flags["platform_stack"], flags["claim_binder"],
                                   _images(flags.get("backend_images") or ()), flags["gateway_listeners"],
                                   flags.get("listeners_per_namespace") or 16, flags.get("public_gateways") or 16,
                                   tuple(flags.get("image_registries") or ()),
                                   tuple(flags.get("insecure_registries") or ())),
            credentials=SourceCredentialSettings(flags["argocd_namespace"], flags["credential_gate"],
                                                 flags["credential_check_interval"], openbao),
            records_namespace=flags["records_namespace"], log_level=flags["log_level"],
            log_format=flags["log_format"])


def _images(given: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """--backend-image BACKEND=REF, each backend once, each one the operator runs servers for."""
    from reconciler.backends.registry import IMAGES

    images: dict[str, str] = {}
    for item in given:
        backend, _, ref = item.partition("=")
        if not ref or backend not in IMAGES:
            raise click.BadParameter(f"{item!r}: want BACKEND=REF, BACKEND one of {', '.join(sorted(IMAGES))}",
                                     param_hint="--backend-image")
        if backend in images:
            raise click.BadParameter(f"{backend} is named twice", param_hint="--backend-image")
        images[backend] = ref
    return tuple(sorted(images.items()))


def _openbao(address: str | None, role: str | None, mount: str, jwt_file: Path, token_file: Path | None,
             ca_file: Path | None) -> OpenBaoSettings | None:
    """The OpenBao flags checked together: an address wants exactly one way to log in, a login wants an address."""
    from lifecycle.credentials.openbao import address_problem
    from reconciler.openbao import OpenBaoSettings

    if address is None:
        if role or token_file or ca_file:
            raise click.UsageError("--openbao-auth-role, --openbao-token-file and --openbao-ca-file need "
                                   "--openbao-address")
        return None
    problem = address_problem(address)
    if problem:
        raise click.BadParameter(problem, param_hint="--openbao-address")
    if (role is None) == (token_file is None):
        raise click.UsageError("--openbao-address wants exactly one of --openbao-auth-role (the Kubernetes auth "
                               "method) and --openbao-token-file")
    return OpenBaoSettings(address, role, mount, jwt_file, token_file, ca_file)
