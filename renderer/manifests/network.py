"""Service, HTTPRoute, the app's default-deny NetworkPolicy and its egress CiliumNetworkPolicy."""

from __future__ import annotations

from renderer.context import HTTP_LISTENER
from renderer.manifests.meta import Target
from renderer.validate import rewrite_prefixes
from toolchain.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

FAMILY = {"ipv6": "IPv6", "ipv4": "IPv4"}
# Ports the integrated providers listen on (egress is opened to the provider namespace on these).
NEED_PORTS: dict[str, tuple[int, ...]] = {
    "pg": (5432,), "redis": (6379,), "jetstream": (4222,), "clickhouse": (8123, 9000),
    "s3": (7070,),  # versitygw (lifecycle.backends.s3.PORT)
}


def service(target: Target, eff: dict[str, Any]) -> dict[str, Any]:
    expose = eff["expose"]
    wanted = expose.get("protocols", target.context.ip_families)
    families = [FAMILY[f] for f in wanted] if wanted else []
    sticky = expose.get("sticky", expose.get("websocket", False))
    port: dict[str, Any] = {"name": "http", "port": expose["port"], "protocol": "TCP", "targetPort": "http"}
    if expose.get("websocket"):
        port["appProtocol"] = "kubernetes.io/ws"
    spec: dict[str, Any] = {
        "type": "ClusterIP",
        "selector": target.selector(),
        "ports": [port],
        "ipFamilyPolicy": "SingleStack" if len(families) == 1 else "PreferDualStack",
        "sessionAffinity": "ClientIP" if sticky else "None",
    }
    if families:
        spec["ipFamilies"] = families
    return {"apiVersion": "v1", "kind": "Service", "metadata": target.metadata(target.app, "app"), "spec": spec}


def hostname(target: Target, expose: dict[str, Any]) -> str:
    """The public hostname: the one written, else the platform's default for the app and environment."""
    return str(expose.get("hostname") or default_hostname(target.app, target.environment, target.context.domain))


def default_hostname(app: str, environment: str, domain: str) -> str:
    """{app}.{env}.{platform domain}: the one rule the renderer and the plan's classifier both use."""
    return f"{app}.{environment}.{domain}"


def tls_secret(target: Target) -> str:
    """The Secret cert-manager writes the app's public certificate into (in the app's namespace)."""
    return tls_secret_name(target.app, target.environment)


def tls_secret_name(app: str, environment: str) -> str:
    """`{app}-{env}-tls`: the renderer's Certificate writes it, the operator's listener for the hostname serves it."""
    return f"{app}-{environment}-tls"


def tls_listener(host: str) -> str:
    """The public Gateway's listener that serves one app's own certificate: named by its hostname (a valid listener
    name), so the route names it and the operator adds it (lifecycle.listeners), each from the hostname alone."""
    return host


def certificate(target: Target, eff: dict[str, Any]) -> dict[str, Any]:
    """Public TLS via cert-manager + ClusterIssuer: a Certificate for the hostname, into tls_secret()."""
    return {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": target.metadata(target.app, "app"),
            "spec": {"secretName": tls_secret(target), "dnsNames": [hostname(target, eff["expose"])],
                     "issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer",
                                   "name": target.context.cluster_issuer}}}


def reference_grant(target: Target) -> dict[str, Any]:
    """Lets the platform's Gateway (another namespace) use the app's certificate Secret for its listener."""
    return {"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": target.metadata(f"{target.app}-gateway-tls", "app"),
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                               "namespace": target.context.gateway_namespace}],
                     "to": [{"group": "", "kind": "Secret", "name": tls_secret(target)}]}}


def http_route(target: Target, eff: dict[str, Any]) -> dict[str, Any]:
    """Only for network: public. Rewrites become their own rules with a ReplacePrefixMatch filter."""
    expose = eff["expose"]
    backend = [{"name": target.app, "port": expose["port"]}]
    timeouts = {"timeouts": {"request": "0s"}} if expose.get("websocket") else {}
    rules: list[dict[str, Any]] = []
    rewritten: set[str] = set()
    for rewrite in expose.get("rewrites", []):
        prefixes = rewrite_prefixes(rewrite)
        assert prefixes is not None  # validate.check_environment rejected the rest
        match, replacement = prefixes
        rewritten.add(match)
        rules.append({
            "matches": [{"path": {"type": "PathPrefix", "value": match}}],
            "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {
                "type": "ReplacePrefixMatch", "replacePrefixMatch": replacement}}}],
            "backendRefs": backend, **timeouts,
        })
    plain = [p for p in expose.get("paths", ["/"]) if p.rstrip("/") not in {m.rstrip("/") for m in rewritten}]
    if plain:
        rules.append({"matches": [{"path": {"type": "PathPrefix", "value": p}} for p in plain],
                      "backendRefs": backend, **timeouts})
    host = hostname(target, expose)
    # With TLS: the listener of the app's own hostname and certificate, which the operator adds to the shared
    # Gateway (a route cannot bring a certificate; docs/application.md "Public TLS"); without: the http listener.
    parent = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": target.context.gateway_name,
              "namespace": target.context.gateway_namespace,
              "sectionName": tls_listener(host) if expose.get("tls", True) else HTTP_LISTENER}
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": target.metadata(target.app, "app"),
            "spec": {"parentRefs": [parent], "hostnames": [host], "rules": rules}}


def redirect_route(target: Target, eff: dict[str, Any]) -> dict[str, Any]:
    """A public app with TLS: plain HTTP on its hostname answers 301 to the same URL over HTTPS (the Gateway's http
    listener; its own route, since a filter applies to every parent of the route that carries it)."""
    parent = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": target.context.gateway_name,
              "namespace": target.context.gateway_namespace, "sectionName": HTTP_LISTENER}
    redirect = {"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": target.metadata(f"{target.app}-redirect", "app"),
            "spec": {"parentRefs": [parent], "hostnames": [hostname(target, eff["expose"])],
                     "rules": [{"filters": [redirect]}]}}


def ingress_policy(target: Target, eff: dict[str, Any]) -> dict[str, Any]:
    """A public app under Cilium: its Gateway's Envoy reaches the pods as the reserved `ingress` identity, not as a
    pod of the Gateway's namespace, so the NetworkPolicy's rule does not admit it; this admits that identity on the
    exposed port, nothing else (Cilium adds it to the NetworkPolicy's allows)."""
    port = eff["expose"]["port"]
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
            "metadata": target.metadata(f"{target.app}-ingress", "app"),
            "spec": {"endpointSelector": {"matchLabels": target.selector()},
                     "ingress": [{"fromEntities": ["ingress"],
                                  "toPorts": [{"ports": [{"port": str(port), "protocol": "TCP"}]}]}]}}


def network_policy(target: Target, eff: dict[str, Any]) -> dict[str, Any]:
    """Default-deny ingress; same-namespace callers reach an exposed port, the Gateway too when public."""
    ingress: list[dict[str, Any]] = []
    expose = eff.get("expose")
    if expose:
        ports = [{"port": expose["port"], "protocol": "TCP"}]
        ingress.append({"from": [{"podSelector": {}}], "ports": ports})
        if expose.get("network") == "public":
            ingress.append({"from": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": target.context.gateway_namespace}}}], "ports": ports})
    spec: dict[str, Any] = {"podSelector": {"matchLabels": target.selector()}, "policyTypes": ["Ingress"]}
    if ingress:
        spec["ingress"] = ingress
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": target.metadata(target.app, "app"), "spec": spec}


def egress_policy(target: Target, eff: dict[str, Any]) -> dict[str, Any]:
    """Default-deny egress plus DNS, the same namespace, one rule per declared need, and the world.

    The world rule (any address outside the cluster) is the platform's default; an app that declares
    connects.egress.external narrows it to exactly those hosts and CIDRs (FQDN rules need the DNS rule).
    """
    ctx = target.context
    dns_labels = {"k8s:io.kubernetes.pod.namespace": ctx.dns_namespace, **{f"k8s:{k}": v for k, v in ctx.dns_selector}}
    egress: list[dict[str, Any]] = [
        {"toEndpoints": [{"matchLabels": dict(sorted(dns_labels.items()))}],
         "toPorts": [{"ports": [{"port": "53", "protocol": "ANY"}], "rules": {"dns": [{"matchPattern": "*"}]}}]},
        {"toEndpoints": [{}]},  # same namespace
    ]
    for need in sorted(eff.get("needs", {})):
        namespace = ctx.provider_namespace(need)
        if need in NEED_PORTS and namespace:
            egress.append({
                "toEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": namespace}}],
                "toPorts": [{"ports": [{"port": str(p), "protocol": "TCP"} for p in NEED_PORTS[need]]}],
            })
    external = eff.get("connects", {}).get("egress", {}).get("external", [])
    for rule in external:
        ports = [{"ports": [{"port": str(rule["port"]), "protocol": rule.get("protocol", "TCP")}]}]
        if "host" in rule:
            host = rule["host"]
            fqdn = {"matchPattern": host} if "*" in host else {"matchName": host}
            egress.append({"toFQDNs": [fqdn], "toPorts": ports})
        else:
            egress.append({"toCIDR": [rule["cidr"]], "toPorts": ports})
    if not external:
        egress.append({"toEntities": ["world"]})
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
            "metadata": target.metadata(f"{target.app}-egress", "app"),
            "spec": {"endpointSelector": {"matchLabels": target.selector()}, "egress": egress}}
