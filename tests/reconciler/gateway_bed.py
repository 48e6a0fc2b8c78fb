"""The public Gateway as the stack's gateway chart makes it, and what cert-manager does once it issued a Certificate,
for the operator's listener tests on the API server (which runs neither a Gateway implementation nor cert-manager)."""

from __future__ import annotations

import json
from typing import Any

from tests.testbed.kube import KubeTestBed

GATEWAY_API = "gateway.networking.k8s.io/v1"
GATEWAY_NAMESPACE = "apprafter-gateway"


def chart_gateway(bed: KubeTestBed, others: int = 0) -> dict[str, Any]:
    """The public Gateway as the stack's gateway chart makes it (its wildcard `https` and its `http` listener, and
    `others` more of the administrator's), server-side applied as Argo CD applies it."""
    bed.ensure_namespace(GATEWAY_NAMESPACE)
    every = {"namespaces": {"from": "All"}}
    https = {"name": "https", "protocol": "HTTPS", "port": 443, "allowedRoutes": every,
             "tls": {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": "public-tls"}]}}
    http = {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": every}
    more = [{"name": f"other-{i}", "protocol": "HTTP", "port": 80, "hostname": f"other-{i}.example.net",
             "allowedRoutes": every} for i in range(others)]
    gateway = {"apiVersion": GATEWAY_API, "kind": "Gateway",
               "metadata": {"name": "public", "namespace": GATEWAY_NAMESPACE,
                            "labels": {"apprafter.io/network": "public", "app.kubernetes.io/instance": "gateway"}},
               "spec": {"gatewayClassName": "cilium", "listeners": [https, http, *more]}}
    bed.apply(gateway, GATEWAY_NAMESPACE, field_manager="argocd-controller")
    return gateway


def certificate_issued(bed: KubeTestBed, name: str, namespace: str) -> None:
    """What cert-manager does once it issued a Certificate (the test bed runs none): Ready, with an expiry."""
    info = bed.resource_for("cert-manager.io/v1", "Certificate")
    status = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "issued",
                              "lastTransitionTime": "2026-12-05T00:00:00Z"}], "notAfter": "2027-03-05T00:00:00Z"}
    resp = bed.http.patch(info.path(name, namespace) + "/status", params={"fieldManager": "cert-manager"},
                          content=json.dumps({"status": status}).encode(),
                          headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code < 300, resp.text


def listeners_of(bed: KubeTestBed, name: str = "public") -> dict[str, dict[str, Any]]:
    """The listeners of the live Gateway `name` by name (none: it does not exist)."""
    live = bed.get(GATEWAY_API, "Gateway", name, GATEWAY_NAMESPACE) or {}
    return {item["name"]: item for item in (live.get("spec") or {}).get("listeners") or []}


def listed(bed: KubeTestBed, api_version: str, kind: str, namespace: str | None) -> list[dict[str, Any]]:
    """Every object of a kind in a namespace, as the API server lists it."""
    resp = bed.http.get(bed.resource_for(api_version, kind).path(None, namespace))
    resp.raise_for_status()
    return list(resp.json()["items"])
