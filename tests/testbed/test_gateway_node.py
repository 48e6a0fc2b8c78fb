"""HTTPS to an app's pods through the platform's `public` Gateway on the node tier (issue 32 item 4's data-plane
proofs), with Traefik as the Gateway API implementation (tests/testbed/traefik.py): the app rendered by our renderer
(`expose: {network: public, ...}`: Deployment, Service, HTTPRoute, Certificate, ReferenceGrant), cert-manager played
by the bed's CA, every request made from the node's network namespace with curl resolving the app's host to the
Gateway's address. Each app lives in a namespace of this module's, removed after it."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.images.podman import make_images
from tests.testbed.node import NodeTestBed
from tests.testbed.traefik import (
    CONTROLLER,
    DOMAIN,
    GATEWAY,
    GATEWAY_API,
    NAMESPACE,
    NodeGateway,
    chart_objects,
    deploy_app,
    https_listener,
    install_traefik,
    listener_status,
    programmed,
    route_accepted,
    uninstall_traefik,
    websocket_echo,
)

pytestmark = [pytest.mark.node, pytest.mark.testbed]

RUN = uuid.uuid4().hex[:6]
ENV = "prod"  # the environment every app here is rendered for (deploy_app's)


@pytest.fixture(scope="module")
def gateway(node: NodeTestBed, testbed_dir: Path) -> Iterator[NodeGateway]:
    """Traefik (the image `make images` builds, imported into the node) serving the chart's `public` Gateway."""
    image = node.import_image(make_images(names=("traefik",))["traefik"].ref)
    bed = install_traefik(node, image, testbed_dir / f"gateway-{RUN}")
    try:
        yield bed
    finally:
        uninstall_traefik(node)


def deploy(node: NodeTestBed, gateway: NodeGateway, tmp_path: Path, name: str, image: str,
           expose: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """The app rendered and applied into a namespace of this module's, its Certificate played, its pod Available."""
    namespace = f"gw-{name}-{RUN}"
    return namespace, deploy_app(gateway, tmp_path / name, name, image, expose, namespace)[0]


def host_of(objects: dict[str, dict[str, Any]]) -> str:
    host: str = objects["HTTPRoute"]["spec"]["hostnames"][0]
    return host


def test_https_reaches_the_apps_pod_through_the_public_gateway(
        node: NodeTestBed, gateway: NodeGateway, test_app: str, tmp_path: Path) -> None:
    namespace = f"gw-shop-{RUN}"
    try:
        _, objects = deploy(node, gateway, tmp_path, "shop", test_app,
                            '{port: 8080, network: "public", websocket: true, '
                            'rewrites: [{from: "/api/(.*)", to: "/echo/$1"}]}')
        host = host_of(objects)
        assert host == f"shop.{ENV}.{DOMAIN}"
        # Traefik accepted the rendered route on the chart's Gateway, for real (its controllerName in the status)
        route = node.wait(GATEWAY_API, "HTTPRoute", "shop", namespace, route_accepted, timeout=60,
                          what="HTTPRoute shop Accepted by Traefik")
        assert [p["parentRef"]["sectionName"] for p in route["status"]["parents"]] == ["https"]
        listeners = node.get(GATEWAY_API, "Gateway", GATEWAY, NAMESPACE) or {}
        assert listener_status(listeners, "https")["Programmed"]["status"] == "True"
        assert {a["value"] for a in listeners["status"]["addresses"]} == {gateway.address}

        answer = wait_answer(gateway, f"https://{host}/", host, lambda a: a.status == 200)
        assert (answer.status, answer.body) == (200, "hello from shop\n")
        # the chart's wildcard certificate for *.prod.<domain>, signed by the CA playing the ClusterIssuer
        shown = gateway.certificate(host)
        assert f"DNS:*.{ENV}.{DOMAIN}" in shown and "issuer=CN = apprafter-public test CA" in shown, shown

        # the rewrite: /api/<rest> reaches the pod as /echo/<rest>, Host kept
        assert gateway.curl(f"https://{host}/api/orders?id=7", host).body == f"path /echo/orders?id=7 host {host}\n"
        # an unrewritten path is the app's own
        assert gateway.curl(f"https://{host}/echo/direct", host).body == f"path /echo/direct host {host}\n"
        # a WebSocket upgrade through the Gateway echoes
        echoed = websocket_echo(gateway, host, "/ws", "ping through the gateway")
        assert echoed == {"status": "HTTP/1.1 101 Switching Protocols", "echoed": "ping through the gateway"}

        # plain HTTP: the renderer routes a TLS app on the `https` listener only, so the `http` listener has nothing
        # for the host (Traefik: 404); the redirect route a platform adds for it is honoured (301 to https)
        assert gateway.curl(f"http://{host}/cart", host).status == 404
        node.apply(redirect_route("shop", host), namespace, field_manager="test")
        node.wait(GATEWAY_API, "HTTPRoute", "shop-redirect", namespace, route_accepted, timeout=60)
        redirected = wait_answer(gateway, f"http://{host}/cart", host, lambda a: a.status == 301)
        assert redirected.headers["location"] == f"https://{host}/cart"
    finally:
        node.delete_namespace(namespace)


def redirect_route(app: str, host: str) -> dict[str, Any]:
    """HTTP -> HTTPS for the app's host on the Gateway's `http` listener (Gateway API's RequestRedirect)."""
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": {"name": f"{app}-redirect"}, "spec": {
        "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY,
                        "namespace": NAMESPACE, "sectionName": "http"}],
        "hostnames": [host],
        "rules": [{"filters": [{"type": "RequestRedirect",
                                "requestRedirect": {"scheme": "https", "statusCode": 301}}]}]}}


def wait_answer(gateway: NodeGateway, url: str, host: str, done: Any, timeout: float = 30) -> Any:
    """Ask until `done(answer)`: Traefik applies a new configuration a moment after it writes the status (a failed
    request is asked again until the deadline, then raised)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = gateway.curl(url, host)
        except subprocess.CalledProcessError:
            if time.monotonic() > deadline:
                raise
        else:
            if done(answer) or time.monotonic() > deadline:
                return answer
        time.sleep(0.2)


def wait_certificate(gateway: NodeGateway, host: str, wanted: str, timeout: float = 30) -> str:
    """The certificate served for SNI `host` once it shows `wanted` (Traefik applies a configuration a moment, up to
    its 2 s provider throttle, after writing the status), else the last one seen."""
    deadline = time.monotonic() + timeout
    while True:
        shown = gateway.certificate(host)
        if wanted in shown or time.monotonic() > deadline:
            return shown
        time.sleep(0.2)


def set_listeners(node: NodeTestBed, listeners: list[dict[str, Any]]) -> dict[str, Any]:
    """Replace the Gateway's listeners; returns the Gateway once Traefik wrote its status for that generation."""
    current = node.get(GATEWAY_API, "Gateway", GATEWAY, NAMESPACE)
    assert current is not None
    current["spec"]["listeners"] = listeners
    resp = node.http.put(node.resource_for(GATEWAY_API, "Gateway").path(GATEWAY, NAMESPACE), json=current)
    assert resp.status_code == 200, resp.text
    generation = resp.json()["metadata"]["generation"]
    return node.wait(GATEWAY_API, "Gateway", GATEWAY, NAMESPACE, lambda g: g if observed(g, generation) else None,
                     timeout=60, what=f"Traefik's status for the Gateway's generation {generation}")


def observed(gateway: dict[str, Any], generation: int) -> bool:
    conditions = (gateway.get("status") or {}).get("conditions") or []
    return bool(conditions) and all(c.get("observedGeneration") == generation for c in conditions) and \
        len((gateway.get("status") or {}).get("listeners") or []) == len(gateway["spec"]["listeners"])


def test_two_apps_with_custom_hostnames_each_get_their_own_certificate_by_sni(
        node: NodeTestBed, gateway: NodeGateway, test_app: str, tmp_path: Path) -> None:
    chart = next(o for o in chart_objects(DOMAIN) if o["kind"] == "Gateway")["spec"]["listeners"]
    apps: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {}
    try:
        for name, host in (("alpha", "alpha.customer-one.test"), ("beta", "www.customer-two.test")):
            apps[name] = (f"gw-{name}-{RUN}", {})  # removed in `finally` even when the deploy fails
            apps[name] = deploy(node, gateway, tmp_path, name, test_app,
                                f'{{port: 8080, network: "public", hostname: "{host}"}}')
        (ns_a, alpha), (ns_b, beta) = apps["alpha"], apps["beta"]
        hosts = {"alpha": host_of(alpha), "beta": host_of(beta)}
        secrets = {name: (ns, objs["Certificate"]["spec"]["secretName"]) for name, (ns, objs) in apps.items()}

        # 1. several certificateRefs on the one `https` listener (alpha's first, then the chart's wildcard, then
        #    beta's): Traefik loads the first only (its source: "TODO Should we support multiple certificates?"),
        #    with no condition saying so: alpha's host gets alpha's certificate, beta's and every default hostname
        #    Traefik's own default one
        https = next(listener for listener in chart if listener["name"] == "https")
        refs = [{"group": "", "kind": "Secret", "name": secret, "namespace": ns} for ns, secret in secrets.values()]
        several = dict(https, tls={"mode": "Terminate",
                                   "certificateRefs": [refs[0], *https["tls"]["certificateRefs"], refs[1]]})
        status = set_listeners(node, [several if listener["name"] == "https" else listener for listener in chart])
        assert programmed(status) and listener_status(status, "https")["ResolvedRefs"]["status"] == "True"
        assert f"DNS:{hosts['alpha']}" in wait_certificate(gateway, hosts["alpha"], f"DNS:{hosts['alpha']}")
        assert "TRAEFIK DEFAULT CERT" in gateway.certificate(hosts["beta"])
        assert "TRAEFIK DEFAULT CERT" in gateway.certificate(f"shop.{ENV}.{DOMAIN}")

        # 2. one HTTPS listener per custom hostname, each with the app's Secret (its ReferenceGrant allows it);
        #    alpha's route stays on `https` as rendered, beta's attaches to its own listener
        per_host = [*chart, *(https_listener(f"{name}-{ENV}", hosts[name], [secrets[name]]) for name in hosts),
                    https_listener("nogrant", "nogrant.customer-one.test", [(ns_a, "not-granted-tls")])]
        status = set_listeners(node, per_host)
        for name in hosts:
            conditions = listener_status(status, f"{name}-{ENV}")
            assert {t: conditions[t]["status"] for t in ("Accepted", "ResolvedRefs", "Programmed")} == {
                "Accepted": "True", "ResolvedRefs": "True", "Programmed": "True"}, conditions
        refused = listener_status(status, "nogrant")["ResolvedRefs"]
        assert (refused["status"], refused["reason"]) == ("False", "RefNotPermitted"), refused
        # one listener in error makes Traefik call the whole shared Gateway not Accepted (ListenersNotValid) and
        # drop its Programmed condition, while the valid listeners keep serving (below)
        whole = {c["type"]: c for c in status["status"]["conditions"]}
        assert (whole["Accepted"]["status"], whole["Accepted"]["reason"]) == ("False", "ListenersNotValid"), whole
        assert "Programmed" not in whole, whole

        route = beta["HTTPRoute"]
        route["spec"]["parentRefs"][0]["sectionName"] = f"beta-{ENV}"
        node.apply(route, ns_b, field_manager="apprafter")
        for name, (namespace, _) in apps.items():
            accepted = node.wait(GATEWAY_API, "HTTPRoute", name, namespace, route_accepted, timeout=60,
                                 what=f"HTTPRoute {name} Accepted by Traefik")
            assert accepted["status"]["parents"][0]["controllerName"] == CONTROLLER

        for name, host in hosts.items():
            shown = wait_certificate(gateway, host, f"DNS:{host}")
            assert f"DNS:{host}" in shown and "issuer=CN = apprafter-public test CA" in shown, shown
            assert "*." not in shown, shown  # the app's own certificate, not the wildcard
            answer = wait_answer(gateway, f"https://{host}/", host, lambda a: a.status == 200)
            assert (answer.status, answer.body) == (200, f"hello from {name}\n")
        # the chart's wildcard is back for the default hostnames
        assert f"DNS:*.{ENV}.{DOMAIN}" in wait_certificate(gateway, f"shop.{ENV}.{DOMAIN}", f"DNS:*.{ENV}.{DOMAIN}")
        # a host no listener has a permitted certificate for gets Traefik's default certificate: curl refuses it
        with pytest.raises(subprocess.CalledProcessError) as refused_tls:
            gateway.curl("https://nogrant.customer-one.test/", "nogrant.customer-one.test", timeout=5)
        assert refused_tls.value.returncode == 60, refused_tls.value.stderr  # peer certificate not trusted
    finally:
        set_listeners(node, chart)
        for namespace, _ in apps.values():
            node.delete_namespace(namespace)
