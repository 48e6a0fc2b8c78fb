"""Which provider labels a need's selector (and the ResourceClaim made from it) may name: the one rule `render`, the
plugin, the operator and the webhook's ResourceClaim check apply.

A selector picks a ServiceProvider by the labels its administrator gave it (`tier: managed-aws`); the data behind a
claim is always the claim's own (its namespace and name). Label keys in the platform's and Kubernetes' own domains
(`apprafter.io/...`, `kubernetes.io/metadata.name`, ...) and a bare `namespace` name identities, not providers: a
selector naming them could point a binder at another namespace's data, so they are refused."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["RESERVED_DOMAINS", "selector_problems"]

RESERVED_DOMAINS = ("apprafter.io", "kubernetes.io", "k8s.io")
RESERVED_NAMES = frozenset({"namespace"})


def _reserved(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if not prefix:
        return name in RESERVED_NAMES
    return any(prefix == domain or prefix.endswith("." + domain) for domain in RESERVED_DOMAINS)


def selector_problems(selector: Mapping[str, object]) -> list[tuple[str, str]]:
    """(key, why) for each key of `selector` a claim may not select by."""
    return [(key, f"selector key {key!r} is not a provider's label: keys in {', '.join(RESERVED_DOMAINS)} (and "
             "their subdomains) and 'namespace' name the platform's identities; a claim's data is always its own "
             "namespace's") for key in sorted(selector) if _reserved(str(key))]
