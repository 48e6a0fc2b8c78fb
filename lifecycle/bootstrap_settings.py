"""What `cluster-bootstrap`'s flags ask of the stack and what it prints: the umbrella's values, the issuer's and the
GatewayClass's overrides, an object as --dry-run shows it (no Secret's value), the summary, a manifest's size. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolchain.errors import Problem, UserError

if TYPE_CHECKING:
    from lifecycle.bootstrap import Plan

__all__ = ["ISSUERS", "issuer", "printed", "summary", "values", "with_gateway_class", "within"]


def _fail(where: str, message: str) -> UserError:
    return UserError([Problem(where, 0, 0, "", message)])


def printed(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object as --dry-run prints it: a Secret's values are never shown, but for the release's public key."""
    from lifecycle.bootstrap import KEYS_SECRET

    if obj.get("kind") != "Secret" or obj["metadata"].get("name") == KEYS_SECRET:
        return dict(obj)
    hidden = {field: {k: "(not shown)" for k in obj[field]} for field in ("data", "stringData")
              if isinstance(obj.get(field), dict)}
    return {**obj, **hidden}


def values(tier: str, domain: str | None, multitenancy: bool | None) -> dict[str, Any]:
    values: dict[str, Any] = {"tier": tier}
    if domain is not None:
        if not domain.strip() or len(domain) > 253 or any(c.isspace() for c in domain):
            raise _fail("--domain", f"{domain[:80]!r}: a DNS domain such as example.com")
        values["domain"] = domain
    if multitenancy is not None:
        values["multitenancy"] = multitenancy
    return values


ISSUERS = {"acme": "acme", "self-signed": "selfSigned", "own": "none"}  # --issuer -> the gateway chart's issuer.type
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")


def issuer(kind: str | None, email: str | None, server: str | None,
           dns01: Mapping[str, Any] | None) -> dict[str, Any]:
    """PlatformStack spec.overrides for the public issuer (the gateway component's `issuer` value): only what was
    asked; nothing asked, the tier's (ACME, a CA of the cluster's own on dev)."""
    acme: dict[str, Any] = {}
    if email is not None:
        if not _EMAIL.fullmatch(email) or len(email) > 254:
            raise _fail("--acme-email", "an email address such as ops@example.com (the ACME account's contact)")
        acme["email"] = email
    if server is not None:
        if not server.startswith("https://") or any(c.isspace() for c in server) or len(server) > 2048:
            raise _fail("--acme-server", "an https:// URL of an ACME directory")
        acme["server"] = server
    if dns01 is not None:
        acme["dns01"] = dict(dns01)
    chosen = ISSUERS[kind] if kind is not None else ("acme" if acme else None)
    if acme and chosen != "acme":
        raise _fail("--issuer", f"{kind}: --acme-email, --acme-server and --dns01-solver are for --issuer acme")
    if chosen is None:
        return {}
    return {"gateway": {"values": {"issuer": {"type": chosen, **({"acme": acme} if acme else {})}}}}


_CLASS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


# The components that render apps (the operator) and judge them (the webhook): told which Gateway serves them.
RENDERING_COMPONENTS = ("apprafter-operator", "apprafter-admission")


def with_gateway_class(overrides: dict[str, Any], name: str | None) -> dict[str, Any]:
    """`overrides` with the gateway component's `gatewayClassName` when one was asked (nothing asked: Cilium's), and,
    for a class named as an implementation the renderer knows (`traefik`, `cilium`), the operator's and the
    webhook's platform file saying so (`gateway.implementation`: what `websocket` and `sticky` become)."""
    from renderer.context import GATEWAY_IMPLEMENTATIONS

    if name is None:
        return overrides
    if not _CLASS_NAME.fullmatch(name):
        raise _fail("--gateway-class", f"{name!r}: a GatewayClass name such as traefik (lowercase letters, digits, "
                                       "'-' and '.')")
    gateway = overrides.get("gateway", {})
    out = {**overrides, "gateway": {**gateway, "values": {**gateway.get("values", {}), "gatewayClassName": name}}}
    if name in GATEWAY_IMPLEMENTATIONS:
        for component in RENDERING_COMPONENTS:
            given = out.get(component, {})
            values = given.get("values", {})
            platform = values.get("platform", {})
            settings = platform.get("settings", {})
            said = {**settings, "gateway": {**settings.get("gateway", {}), "implementation": name}}
            out[component] = {**given, "values": {**values, "platform": {**platform, "settings": said}}}
    return out


def summary(decided: Plan, dry: bool = False) -> list[str]:
    from lifecycle.bootstrap import key_of

    changed, same = len(decided.changes), len(decided.steps) - len(decided.changes)
    kept = [f"{key_of(s.obj)[1].lower()}/{key_of(s.obj)[3]}: {s.why}" for s in decided.steps if s.action == "kept"]
    if not changed:
        return [*kept, f"nothing to change: the cluster already is what cluster-bootstrap makes it ({same} objects)"]
    verb = "would apply" if dry else "applied"
    return [*kept, f"{verb} {changed} objects, {same} unchanged; from here Argo CD and the AppRafter operator "
                   "reconcile the stack (apprafter platform status)"]


def within(data: Any, limit: int) -> bool:
    """Whether `data` holds at most `limit` values, each alias counted where it is used (walked without recursion)."""
    stack, seen = [data], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > limit:
            return False
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return True
