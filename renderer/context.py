"""Platform context: what the cluster around an app provides (domain, gateway, tier, ...), with documented defaults.

Built only through renderer.settings.platform_context, which checks every value.
"""

from __future__ import annotations

import dataclasses

TIERS = ("dev", "solo", "team", "production", "regulated")
# What each tier can provide; an app asking for more gets a warning, never a silent drop.
TIER_FEATURES: dict[str, frozenset[str]] = {
    "dev": frozenset(),
    "solo": frozenset(),
    "team": frozenset({"static-egress-ip"}),
    "production": frozenset({"static-egress-ip", "confidential"}),
    "regulated": frozenset({"static-egress-ip", "confidential"}),
}


@dataclasses.dataclass(frozen=True)
class PlatformContext:
    """Cluster facts the renderer needs; every field has a default a solo cluster satisfies."""

    domain: str = "apps.example.com"
    gateway_name: str = "platform"
    gateway_namespace: str = "apprafter-system"
    gateway_listener: str = "https"
    tier: str = "solo"
    # The cluster's IP families; None lets the API server choose (PreferDualStack without ipFamilies).
    ip_families: tuple[str, ...] | None = None
    cluster_issuer: str = "apprafter-default"
    confidential_runtime_class: str = "kata-cc"
    dns_namespace: str = "kube-system"
    dns_selector: tuple[tuple[str, str], ...] = (("k8s-app", "kube-dns"),)
    provider_namespaces: tuple[tuple[str, str], ...] = (
        ("pg", "apprafter-pg"), ("redis", "apprafter-redis"), ("jetstream", "apprafter-nats"),
        ("clickhouse", "apprafter-clickhouse"), ("s3", "apprafter-s3"),
    )

    def provider_namespace(self, need: str) -> str | None:
        return dict(self.provider_namespaces).get(need)

    def provides(self, feature: str) -> bool:
        return feature in TIER_FEATURES.get(self.tier, frozenset())
