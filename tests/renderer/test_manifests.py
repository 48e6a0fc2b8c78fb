"""What `manifests` mode turns each field into, checked on small apps through the real cue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from renderer.load import load
from renderer.render import render_loaded
from renderer.settings import Given, Origin, platform_context
from tests.renderer.helpers import MINIMAL, run_cli, write_app


def objects(tmp_path: Path, base_extra: str, env: str = "dev", **context: Any) -> dict[str, dict[str, Any]]:
    text = MINIMAL.replace('expose: port: 8080', base_extra)
    write_app(tmp_path, text)
    given = {k: Given(v, Origin(k)) for k, v in context.items()}
    out = render_loaded(load(tmp_path), env, "manifests", "ns1", platform_context(None, given))
    return {o["kind"]: o for o in out.objects}


def test_public_route_defaults(tmp_path: Path) -> None:
    objs = objects(tmp_path, 'expose: {port: 8080, network: "public"}', domain="apps.acme.example")
    route = objs["HTTPRoute"]["spec"]
    assert route["hostnames"] == ["demo.dev.apps.acme.example"]
    assert route["rules"] == [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                               "backendRefs": [{"name": "demo", "port": 8080}]}]
    assert route["parentRefs"][0]["sectionName"] == "demo.dev.apps.acme.example"  # the hostname's own listener
    ingress = objs["NetworkPolicy"]["spec"]["ingress"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apprafter-gateway"}}} in [
        rule["from"][0] for rule in ingress]


def named(tmp_path: Path, base_extra: str, **context: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """The objects by (kind, name): an app may have two of a kind."""
    write_app(tmp_path, MINIMAL.replace('expose: port: 8080', base_extra))
    given = {k: Given(v, Origin(k)) for k, v in context.items()}
    out = render_loaded(load(tmp_path), "dev", "manifests", "ns1", platform_context(None, given))
    return {(o["kind"], o["metadata"]["name"]): o for o in out.objects}


def test_plain_http_on_a_public_tls_hostname_is_redirected_to_https(tmp_path: Path) -> None:
    objs = named(tmp_path, 'expose: {port: 8080, network: "public"}', domain="apps.acme.example")
    redirect = objs["HTTPRoute", "demo-redirect"]["spec"]
    assert redirect["hostnames"] == objs["HTTPRoute", "demo"]["spec"]["hostnames"] == ["demo.dev.apps.acme.example"]
    [parent] = redirect["parentRefs"]
    assert (parent["name"], parent["namespace"], parent["sectionName"]) == ("public", "apprafter-gateway", "http")
    # No backend: the Gateway answers 301 itself, keeping host, path and query.
    assert redirect["rules"] == [{"filters": [{"type": "RequestRedirect",
                                               "requestRedirect": {"scheme": "https", "statusCode": 301}}]}]
    plain = named(tmp_path, 'expose: {port: 8080, network: "public", tls: false}', domain="apps.acme.example")
    assert ("HTTPRoute", "demo-redirect") not in plain  # the app is served on http itself
    assert plain["HTTPRoute", "demo"]["spec"]["parentRefs"][0]["sectionName"] == "http"


def test_a_public_app_admits_ciliums_gateway_identity_on_its_port_only(tmp_path: Path) -> None:
    objs = named(tmp_path, 'expose: {port: 8080, network: "public"}')
    policy = objs["CiliumNetworkPolicy", "demo-ingress"]["spec"]
    assert policy["endpointSelector"] == objs["NetworkPolicy", "demo"]["spec"]["podSelector"]
    assert policy["ingress"] == [{"fromEntities": ["ingress"], "toPorts": [{"ports": [{"port": "8080",
                                                                                        "protocol": "TCP"}]}]}]
    assert "egress" not in policy  # the egress policy is its own object, unchanged
    assert objs["CiliumNetworkPolicy", "demo-egress"]["spec"]["egress"]
    internal = named(tmp_path, "expose: port: 8080")
    assert ("CiliumNetworkPolicy", "demo-ingress") not in internal


def test_internal_app_has_no_route_and_no_gateway_ingress(tmp_path: Path) -> None:
    objs = objects(tmp_path, "expose: port: 8080")
    assert "HTTPRoute" not in objs
    assert objs["NetworkPolicy"]["spec"]["ingress"] == [{"from": [{"podSelector": {}}],
                                                          "ports": [{"port": 8080, "protocol": "TCP"}]}]


def test_rewrites_tls_off_websocket_and_families(tmp_path: Path) -> None:
    objs = objects(tmp_path, 'expose: {port: 8080, network: "public", tls: false, websocket: true, '
                   'paths: ["/", "/api"], protocols: [ipv4], rewrites: [{from: "/api/(.*)", to: "/v2/$1"}]}')
    rules = objs["HTTPRoute"]["spec"]["rules"]
    assert rules[0]["filters"] == [{"type": "URLRewrite", "urlRewrite": {"path": {
        "type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}}]
    assert rules[0]["matches"] == [{"path": {"type": "PathPrefix", "value": "/api"}}]
    assert rules[1]["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert all(r["timeouts"] == {"request": "0s"} for r in rules)
    assert objs["HTTPRoute"]["spec"]["parentRefs"][0]["sectionName"] == "http"
    svc = objs["Service"]["spec"]
    # public: the Gateway balances, so websocket's implied sticky renders no affinity (test_expose_fields.py)
    assert (svc["ipFamilies"], svc["ipFamilyPolicy"], svc["sessionAffinity"]) == (["IPv4"], "SingleStack", "None")


def test_no_protocols_lets_the_cluster_choose(tmp_path: Path) -> None:
    svc = objects(tmp_path, "expose: port: 8080")["Service"]["spec"]
    assert "ipFamilies" not in svc and svc["ipFamilyPolicy"] == "PreferDualStack"


def test_env_references_become_secret_key_refs(tmp_path: Path) -> None:
    objs = objects(tmp_path, 'expose: port: 8080\n\t\tneeds: pg: {}\n\t\tenv: {A: "x", DB: claim.pg.url, '
                   'DB_POOLED: claim.pg.pooledUrl, K: secret: "api-keys/stripe"}')
    env = objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "A", "value": "x"},
                   {"name": "DB", "valueFrom": {"secretKeyRef": {"name": "demo-pg-conn", "key": "url"}}},
                   # the pooled URL (issue 42 item 5): the Secret's key of the same name
                   {"name": "DB_POOLED", "valueFrom": {"secretKeyRef": {"name": "demo-pg-conn", "key": "pooledUrl"}}},
                   {"name": "K", "valueFrom": {"secretKeyRef": {"name": "api-keys", "key": "stripe"}}}]
    assert objs["ResourceClaim"]["spec"] == {"type": "pg", "selector": {"tier": "integrated"}}


def test_resources_seed_is_burstable_and_explicit_is_verbatim(tmp_path: Path) -> None:
    seed = objects(tmp_path, "expose: port: 8080")["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert seed["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
    explicit = objects(tmp_path, 'expose: port: 8080\n\t\tresources: limits: {cpu: "2", memory: "1Gi"}')
    container = explicit["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"cpu": "2", "memory": "1Gi"}}


def test_autoscale_leaves_replicas_to_keda(tmp_path: Path) -> None:
    objs = objects(tmp_path, 'expose: port: 8080\n\t\tautoscale: {on: "cpu", min: 2, max: 5, target: 60}')
    assert "replicas" not in objs["Deployment"]["spec"]
    assert objs["ScaledObject"]["spec"]["triggers"] == [
        {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]


def test_every_object_carries_the_recommended_labels(tmp_path: Path) -> None:
    for obj in objects(tmp_path, 'expose: {port: 8080, network: "public"}').values():
        labels = obj["metadata"]["labels"]
        assert labels["apprafter.io/environment"] == "dev"
        assert labels["app.kubernetes.io/name"] == "demo" and labels["app.kubernetes.io/instance"] == "demo-dev"
        assert obj["metadata"]["namespace"] == "ns1"


def test_what_a_tier_cannot_provide_is_a_warning_not_a_drop(tmp_path: Path) -> None:
    extra = 'expose: port: 8080\n\t\tconfidential: true\n\t\tnetwork: egressIP: {static: true, pool: "p1"}'
    write_app(tmp_path, MINIMAL.replace("expose: port: 8080", extra))
    solo = run_cli("render", ".", "--env", "dev", "--mode", "manifests", cwd=tmp_path)
    assert solo.returncode == 0
    assert [line.split(": ")[3] for line in solo.stderr.splitlines()] == ["confidential", "network.egressIP"]
    pod = next(d for d in yaml.safe_load_all(solo.stdout) if d["kind"] == "Deployment")["spec"]["template"]
    assert pod["spec"]["runtimeClassName"] == "kata-cc"
    production = run_cli("render", ".", "--env", "dev", "--mode", "manifests", "--tier", "production", cwd=tmp_path)
    assert production.returncode == 0 and production.stderr == ""
    pod = next(d for d in yaml.safe_load_all(production.stdout) if d["kind"] == "Deployment")["spec"]["template"]
    assert pod["metadata"]["labels"]["apprafter.io/egress-ip-pool"] == "p1"


def test_platform_file_then_flags(tmp_path: Path) -> None:
    platform = tmp_path / "platform.yaml"
    platform.write_text("domain: from-file.example\ngateway: {name: gw, namespace: edge}\n")
    write_app(tmp_path, MINIMAL.replace("expose: port: 8080", 'expose: {port: 8080, network: "public"}'))
    out = run_cli("render", ".", "--env", "dev", "--mode", "manifests", "--platform", str(platform), cwd=tmp_path)
    route = next(d for d in yaml.safe_load_all(out.stdout) if d["kind"] == "HTTPRoute")["spec"]
    assert route["hostnames"] == ["demo.dev.from-file.example"]
    assert (route["parentRefs"][0]["name"], route["parentRefs"][0]["namespace"]) == ("gw", "edge")
    out = run_cli("render", ".", "--env", "dev", "--mode", "manifests", "--platform", str(platform),
                  "--domain", "flag.example", cwd=tmp_path)
    route = next(d for d in yaml.safe_load_all(out.stdout) if d["kind"] == "HTTPRoute")["spec"]
    assert route["hostnames"] == ["demo.dev.flag.example"]
    platform.write_text("domian: typo.example\n")
    bad = run_cli("render", ".", "--env", "dev", "--platform", str(platform), cwd=tmp_path)
    assert bad.returncode == 1 and bad.stdout == "" and "domian: unknown platform setting" in bad.stderr


def test_public_tls_is_a_cert_manager_certificate_the_platform_gateway_may_use(tmp_path: Path) -> None:
    objs = objects(tmp_path, 'expose: {port: 8080, network: "public", hostname: "shop.acme.example"}',
                   cluster_issuer="letsencrypt-prod")
    cert = objs["Certificate"]
    assert cert["apiVersion"] == "cert-manager.io/v1" and cert["metadata"]["namespace"] == "ns1"
    assert cert["spec"] == {"secretName": "demo-dev-tls", "dnsNames": ["shop.acme.example"],
                            "issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer",
                                          "name": "letsencrypt-prod"}}
    parent = objs["HTTPRoute"]["spec"]["parentRefs"][0]
    grant = objs["ReferenceGrant"]["spec"]
    assert grant == {"from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                               "namespace": parent["namespace"]}],
                     "to": [{"group": "", "kind": "Secret", "name": "demo-dev-tls"}]}
    plain = objects(tmp_path, 'expose: {port: 8080, network: "public", tls: false}')
    assert "Certificate" not in plain and "ReferenceGrant" not in plain
    assert "Certificate" not in objects(tmp_path, "expose: port: 8080")


def test_routes_attach_to_the_gateway_the_platform_stack_deploys(tmp_path: Path) -> None:
    from lifecycle.listeners import FIELD_MANAGER, listener
    from platform_stack.source import evaluate

    gateway = evaluate()["values"]["components"]["gateway"]
    route = objects(tmp_path, 'expose: {port: 8080, network: "public"}')["HTTPRoute"]["spec"]
    [parent], [host] = route["parentRefs"], route["hostnames"]
    assert parent["namespace"] == gateway["namespace"]
    assert parent["name"] == gateway["values"]["gateways"]["public"]["name"]
    # With TLS: the listener the operator adds for the hostname, as the field manager Argo CD leaves alone there.
    assert parent["sectionName"] == listener(host, "ns1", "demo", "dev")["name"]
    assert gateway["ignoreDifferences"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                             "managedFieldsManagers": [FIELD_MANAGER]}]
    plain = objects(tmp_path, 'expose: {port: 8080, network: "public", tls: false}')["HTTPRoute"]["spec"]
    assert plain["parentRefs"][0]["sectionName"] == gateway["values"]["gateways"]["public"]["listeners"]["http"]


def test_egress_is_default_deny_plus_dns_namespace_needs_and_the_world(tmp_path: Path) -> None:
    # Spec (known limitations, ADR 0045): "default-deny plus DNS, same-namespace, world and one rule per need".
    egress = objects(tmp_path, "expose: port: 8080\n\t\tneeds: pg: {}")["CiliumNetworkPolicy"]["spec"]["egress"]
    assert egress[1] == {"toEndpoints": [{}]} and egress[0]["toPorts"][0]["ports"] == [{"port": "53",
                                                                                      "protocol": "ANY"}]
    assert {"toEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "apprafter-pg"}}],
            "toPorts": [{"ports": [{"port": "5432", "protocol": "TCP"}]}]} in egress
    assert egress[-1] == {"toEntities": ["world"]} and len(egress) == 4
    declared = objects(tmp_path, 'expose: port: 8080\n\t\tconnects: egress: external: [{host: "api.example.com", '
                       'port: 443}]')["CiliumNetworkPolicy"]["spec"]["egress"]
    assert {"toEntities": ["world"]} not in declared  # declared external egress narrows the world to it
    assert {"toFQDNs": [{"matchName": "api.example.com"}],
            "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]} in declared
