"""Which public hostnames an Application may ask for: the one rule the admission webhook and the operator apply
(HostnameNotAllowed otherwise; who holds an allowed one is lifecycle.hostnames').

- The platform's own names are nobody's: the domain itself and `<label>.<domain>` for each label the platform's
  components route (renderer.context.PLATFORM_HOSTS, the one list), and every name under those.
- `{app}.{env}.{domain}` is an app's default name. An Application may use its own unless a HostnamePolicy gives its
  app name to other namespaces (`spec.apps`): then only those namespaces may. A name of that shape for another app or
  environment is kept for whoever owns that app name: allowed only to a namespace that owns it, or by an exact grant.
- Any other name (outside the domain, or of another shape under it) needs a HostnamePolicy for the namespace that
  allows it (`spec.allowedHostnames`: exact names, or a regular expression matching the whole name).

A HostnamePolicy is cluster-scoped: only a cluster administrator writes it (a namespace annotation would be written by
whoever may edit the namespace, the tenant included in many clusters)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from renderer import patterns
from renderer.context import PlatformContext
from renderer.crds import AGE, Column, CrdSource, cel
from renderer.manifests.network import default_hostname

__all__ = ["HOSTNAME_POLICY", "NOT_ALLOWED", "Grant", "Policy", "check", "read", "read_all", "refusal"]

NOT_ALLOWED = "HostnameNotAllowed"  # the reason, in the operator's condition and the webhook's message alike

SCOPE_MESSAGE = "name the namespaces (spec.namespaces) or set spec.allNamespaces: true, one of the two"
HOSTNAME_POLICY = CrdSource(
    "HostnamePolicy", "lifecycle", "hostnamepolicy.cue", "HostnamePolicySpec", "hostnamepolicies", ("hpol",),
    cluster_scoped=True,
    patches=(cel(("spec",), "(has(self.namespaces) && size(self.namespaces) > 0) != "
                 "(has(self.allNamespaces) && self.allNamespaces)", SCOPE_MESSAGE),),
    columns=(Column("Namespaces", ".spec.namespaces"), Column("All", ".spec.allNamespaces", "boolean"),
             Column("Hostnames", ".spec.allowedHostnames.allowed", priority=1),
             Column("Apps", ".spec.apps.allowed", priority=1), AGE),
)


class Grant(NamedTuple):
    """Names given by exact spelling or by a regular expression over the whole name."""

    exact: frozenset[str] = frozenset()
    pattern: re.Pattern[str] | None = None

    def allows(self, name: str) -> bool:
        return name in self.exact or (self.pattern is not None and self.pattern.fullmatch(name) is not None)


class Policy(NamedTuple):
    """One HostnamePolicy as the rule reads it (namespaces None: every namespace)."""

    name: str
    namespaces: frozenset[str] | None
    hostnames: Grant
    apps: Grant

    def covers(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces


@functools.lru_cache(maxsize=256)
def _compile(expression: str) -> re.Pattern[str]:
    return re.compile(expression)


def _grant(value: Any) -> Grant:
    value = value if isinstance(value, Mapping) else {}
    expression = value.get("allowedRegex")
    return Grant(frozenset(str(n).lower() for n in value.get("allowed") or []),
                 _compile(expression) if isinstance(expression, str) and expression else None)


def check(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) of a HostnamePolicy the CRD's schema lets through: the webhook's twin of its CEL rule, and
    what only Python can check (the regular expressions compile, the names are DNS names, the namespaces labels)."""
    spec = obj.get("spec") or {}
    problems: list[tuple[str, str]] = []
    if bool(spec.get("namespaces")) == bool(spec.get("allNamespaces")):
        problems.append(("spec", SCOPE_MESSAGE))
    for i, namespace in enumerate(spec.get("namespaces") or []):
        if not patterns.dns_label(str(namespace)):
            problems.append((f"spec.namespaces[{i}]", "is not a namespace name (a DNS-1123 label)"))
    for field in ("allowedHostnames", "apps"):
        grant = spec.get(field) or {}
        for i, name in enumerate(grant.get("allowed") or []):
            good = patterns.dns_name(str(name)) if field == "allowedHostnames" else patterns.app_name(str(name))
            if not good:
                what = "a DNS name" if field == "allowedHostnames" else "an app name (a DNS-1035 label)"
                problems.append((f"spec.{field}.allowed[{i}]", f"{name!r} is not {what}"))
        expression = grant.get("allowedRegex")
        if isinstance(expression, str):
            try:
                _compile(expression)
            except re.error as e:
                problems.append((f"spec.{field}.allowedRegex", f"is not a regular expression: {e}"))
    return problems


def read(obj: Mapping[str, Any]) -> Policy | None:
    """The policy, or None when it does not read (the webhook refuses such a write; one made before is skipped)."""
    if check(obj):
        return None
    spec = obj.get("spec") or {}
    namespaces = None if spec.get("allNamespaces") else frozenset(str(n) for n in spec.get("namespaces") or [])
    return Policy(str((obj.get("metadata") or {}).get("name", "")), namespaces, _grant(spec.get("allowedHostnames")),
                  _grant(spec.get("apps")))


def read_all(objects: Iterable[Mapping[str, Any]]) -> tuple[Policy, ...]:
    return tuple(p for p in (read(o) for o in objects) if p is not None)


def _platform_name(host: str, context: PlatformContext) -> str | None:
    """The platform name `host` is or lies under, if any."""
    domain = context.domain
    if host == domain:
        return domain
    for label in context.platform_hosts:
        name = f"{label}.{domain}"
        if host == name or host.endswith("." + name):
            return name
    return None


def _default_shape(host: str, domain: str) -> tuple[str, str] | None:
    """(app, environment) when `host` reads as some app's default name `{app}.{env}.{domain}`."""
    if not host.endswith("." + domain):
        return None
    labels = host[: -len(domain) - 1].split(".")
    if len(labels) == 2 and patterns.app_name(labels[0]) and patterns.dns_label(labels[1]):
        return labels[0], labels[1]
    return None


def _names(policies: Sequence[Policy]) -> str:
    return ", ".join(sorted(p.name for p in policies))


def refusal(host: str, app: str, environment: str, namespace: str, context: PlatformContext,
            policies: Sequence[Policy]) -> str | None:
    """Why the Application `app` (environment, namespace) may not route `host`, or None when it may."""
    host = host.lower()
    own = default_hostname(app, environment, context.domain)
    platform = _platform_name(host, context)
    if platform is not None:
        return f"{host} is the platform's own ({platform}): no Application may route it"
    mine = [p for p in policies if p.covers(namespace)]
    shape = _default_shape(host, context.domain)
    if shape is not None:
        owner_app, owner_env = shape
        owners = [p for p in policies if p.apps.allows(owner_app)]
        owned_here = any(p.covers(namespace) for p in owners)
        if host == own:
            if owners and not owned_here:
                return (f"{host} is the default name of app {app}, and HostnamePolicy {_names(owners)} gives the app "
                        f"name {app} to other namespaces: rename the Application, or ask a cluster administrator")
            return None
        if owned_here or any(host in p.hostnames.exact for p in mine):
            return None
        return (f"{host} is the default name of app {owner_app} in environment {owner_env}, kept for the namespace "
                f"that owns that app name; this Application's own is {own}")
    if any(p.hostnames.allows(host) for p in mine):
        return None
    return (f"no HostnamePolicy lets namespace {namespace} use {host}: a cluster administrator grants it "
            f"(spec.allowedHostnames), or use the default name {own}")
