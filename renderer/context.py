"""Platform context: what the cluster around an app provides (domain, gateway, tier, ...), with documented defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from renderer.errors import Problem, UserError

__all__ = [
    "CLUSTER_ISSUER", "GATEWAYS", "GATEWAY_NAMESPACE", "HTTPS_LISTENER", "HTTP_LISTENER", "TIERS",
    "PlatformContext", "make_context"
]

TIERS = ("dev", "solo", "team", "production", "regulated")

# The platform's shared Gateways, one per network, and what they are called: the one source for the
# renderer's HTTPRoutes and for the platform stack's gateway component (platform_stack/source.py hands
# these to its CUE as tags), so the routes attach to the Gateways the stack deploys.
GATEWAY_NAMESPACE = "apprafter-gateway"
GATEWAYS = {"public": "public", "internal": "internal", "vpn": "vpn"}  # network -> Gateway name
HTTPS_LISTENER, HTTP_LISTENER = "https", "http"
# The ClusterIssuer the platform's cert-manager provides for public hostnames (the stack creates it).
CLUSTER_ISSUER = "apprafter-public"
# What each tier can provide; an app asking for more gets a warning, never a silent drop.
TIER_FEATURES: dict[str, frozenset[str]] = {
    "dev": frozenset(),
    "solo": frozenset(),
    "team": frozenset({"static-egress-ip"}),
    "production": frozenset({"static-egress-ip", "confidential"}),
    "regulated": frozenset({"static-egress-ip", "confidential"}),
}


class PlatformContext(NamedTuple):  # NamedTuple, not a dataclass: `dataclasses` costs the plugin ~6 ms of imports
    """Cluster facts the renderer needs; every field has a default a solo cluster satisfies."""

    domain: str = "apps.example.com"
    gateway_name: str = GATEWAYS["public"]
    gateway_namespace: str = GATEWAY_NAMESPACE
    gateway_listener: str = HTTPS_LISTENER
    tier: str = "solo"
    # The cluster's IP families; None lets the API server choose (PreferDualStack without ipFamilies).
    ip_families: tuple[str, ...] | None = None
    cluster_issuer: str = CLUSTER_ISSUER
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


_FIELDS = set(PlatformContext._fields)
DEFAULTS = PlatformContext()
_YAML_KEYS = {
    "domain": "domain", "tier": "tier", "ipFamilies": "ip_families", "clusterIssuer": "cluster_issuer",
    "confidentialRuntimeClass": "confidential_runtime_class",
}


def from_yaml(path: Path) -> dict[str, Any]:
    """Read a platform file (documented in docs/application.md) into PlatformContext keyword arguments."""
    import yaml  # only a platform file needs it: the plugin path stays free of PyYAML's import

    display = str(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise UserError([Problem(display, 1, 1, "", f"cannot read platform file: {e}")]) from None
    if not isinstance(data, dict):
        raise UserError([Problem(display, 1, 1, "", "platform file must be a mapping")])
    out: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, value in data.items():
        if key in _YAML_KEYS:
            out[_YAML_KEYS[key]] = tuple(value) if isinstance(value, list) else value
        elif key == "gateway" and isinstance(value, dict):
            for sub, attr in (("name", "gateway_name"), ("namespace", "gateway_namespace"),
                              ("listener", "gateway_listener")):
                if sub in value:
                    out[attr] = str(value[sub])
        elif key == "providerNamespaces" and isinstance(value, dict):
            merged = dict(DEFAULTS.provider_namespaces)
            merged.update({str(k): str(v) for k, v in value.items()})
            out["provider_namespaces"] = tuple(sorted(merged.items()))
        else:
            problems.append(Problem(display, 1, 1, key, "unknown platform setting"))
    if problems:
        raise UserError(problems)
    return out


def make_context(platform_file: Path | None = None, **overrides: Any) -> PlatformContext:
    """Defaults, then the platform file, then explicit overrides (flags); None values are ignored."""
    kwargs: dict[str, Any] = from_yaml(platform_file) if platform_file else {}
    kwargs.update({k: v for k, v in overrides.items() if v is not None and k in _FIELDS})
    tier = kwargs.get("tier", DEFAULTS.tier)
    if tier not in TIERS:
        raise UserError([Problem(str(platform_file or "--tier"), 1, 1, "tier",
                                 f"unknown tier {tier!r}: want one of {', '.join(TIERS)}")])
    return PlatformContext(**kwargs)
