"""Platform context: what the cluster around an app provides (domain, gateway, tier, ...), with documented defaults.

Values a user gives (platform file, flags, plugin env) reach it only through renderer.settings, which checks
every one.
"""

from __future__ import annotations

from toolchain.record import Record

__all__ = [
    "CLUSTER_ISSUER",
    "DEFAULTS",
    "GATEWAYS",
    "GATEWAY_NAMESPACE",
    "HTTPS_LISTENER",
    "HTTP_LISTENER",
    "LISTENERS_FIELD_MANAGER",
    "PLATFORM_HOSTS",
    "TIERS",
    "PlatformContext"
]

TIERS = ("dev", "solo", "team", "production", "regulated")

# The platform's shared Gateways, one per network, and what they are called: the one source for the
# renderer's HTTPRoutes and for the platform stack's gateway component (platform_stack/source.py hands
# these to its CUE as tags), so the routes attach to the Gateways the stack deploys.
GATEWAY_NAMESPACE = "apprafter-gateway"
GATEWAYS = {"public": "public", "internal": "internal", "vpn": "vpn"}  # network -> Gateway name
HTTPS_LISTENER, HTTP_LISTENER = "https", "http"
# The operator's field manager of the public Gateway's per-hostname listeners (lifecycle.listeners): the stack's
# gateway component tells Argo CD to leave the fields it owns alone.
LISTENERS_FIELD_MANAGER = "apprafter-operator-listeners"
# The names under the platform's domain that its own components route (Argo CD's and Grafana's UIs, ...): no
# Application may route them or any name under them (lifecycle.hostname_policy). The one list: a stack component
# that routes a name under the domain takes its label from here.
PLATFORM_HOSTS = ("argocd", "grafana", "prometheus", "alertmanager", "hubble", "backstage", "openbao", "registry")
# The ClusterIssuer of public hostnames' certificates (the stack's gateway component makes it).
CLUSTER_ISSUER = "apprafter-public"
# What each tier can provide; an app asking for more gets a warning, never a silent drop.
TIER_FEATURES: dict[str, frozenset[str]] = {
    "dev": frozenset(),
    "solo": frozenset(),
    "team": frozenset({"static-egress-ip"}),
    "production": frozenset({"static-egress-ip", "confidential"}),
    "regulated": frozenset({"static-egress-ip", "confidential"}),
}


class PlatformContext(Record):  # a Record, not a dataclass or typing.NamedTuple: start-up (toolchain.record)
    """Cluster facts the renderer needs; every field has a default a solo cluster satisfies."""

    domain: str = "apps.example.com"
    gateway_name: str = GATEWAYS["public"]
    gateway_namespace: str = GATEWAY_NAMESPACE
    # Seconds from a pod's removal from the EndpointSlices until the Gateway's data plane stops sending to it: an
    # exposed app's pods pause that long before SIGTERM (renderer.health.drain). 5 = Traefik's
    # providersThrottleDuration (2 s by default) + the EndpointSlice watch's latency, with margin; Cilium's Envoy
    # learns faster, so 5 covers it too.
    gateway_drain_seconds: int = 5
    tier: str = "solo"
    # The cluster's IP families; None lets the API server choose (PreferDualStack without ipFamilies).
    ip_families: tuple[str, ...] | None = None
    cluster_issuer: str = CLUSTER_ISSUER
    confidential_runtime_class: str = "kata-cc"
    dns_namespace: str = "kube-system"
    dns_selector: tuple[tuple[str, str], ...] = (("k8s-app", "kube-dns"),)
    platform_hosts: tuple[str, ...] = PLATFORM_HOSTS
    provider_namespaces: tuple[tuple[str, str], ...] = (
        ("pg", "apprafter-pg"), ("redis", "apprafter-redis"), ("jetstream", "apprafter-nats"),
        ("clickhouse", "apprafter-clickhouse"), ("s3", "apprafter-s3"),
    )

    def provider_namespace(self, need: str) -> str | None:
        return dict(self.provider_namespaces).get(need)

    def provides(self, feature: str) -> bool:
        return feature in TIER_FEATURES.get(self.tier, frozenset())


DEFAULTS = PlatformContext()
