"""HTTPS to an app's pods through the platform's `public` Gateway on the node tier (issue 32's data-plane proofs),
with Traefik as the Gateway API implementation (tests/testbed/traefik.py) and `apprafter operator` in the node's
network namespace doing what it does on a cluster: an Application applied as Argo CD applies it is rendered, its
children applied, its hostname held, and once its Certificate is issued (cert-manager played by the bed's CA) the
operator adds the hostname's own HTTPS listener to the shared Gateway (lifecycle/listeners.py). Every request is
made from the node's network namespace with curl resolving the app's host to the Gateway's address. Each app lives
in a namespace of this module's, removed after it."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.listeners import FIELD_MANAGER
from tests.images.podman import make_images
from tests.reconciler.helpers import API, apply, cr
from tests.reconciler.node_pods import ready
from tests.reconciler.operator_proc import FAST, Operator, operator_fixture
from tests.testbed.node import NodeTestBed
from tests.testbed.traefik import (
    CONTROLLER,
    DOMAIN,
    GATEWAY,
    GATEWAY_API,
    NAMESPACE,
    NodeGateway,
    install_traefik,
    keepalive_closed_after,
    listener_status,
    route_accepted,
    uninstall_traefik,
    websocket_echo,
)

pytestmark = [pytest.mark.node, pytest.mark.testbed]

RUN = uuid.uuid4().hex[:6]
ENV = "prod"  # the environment every app here is rendered for (deploy_app's)
# The Gateway entry points' read and idle timeouts here (Traefik v3's defaults: 60 s and 180 s): short, so a WebSocket
# can be held idle past them in seconds; IDLE is that silence.
ENTRY_TIMEOUT, IDLE = 3, 5


@pytest.fixture(scope="module")
def gateway(node: NodeTestBed, testbed_dir: Path) -> Iterator[NodeGateway]:
    """Traefik (the image `make images` builds, imported into the node) serving the chart's `public` Gateway."""
    image = node.import_image(make_images(names=("traefik",))["traefik"].ref)
    bed = install_traefik(node, image, testbed_dir / f"gateway-{RUN}", entry_timeout=f"{ENTRY_TIMEOUT}s")
    try:
        yield bed
    finally:
        uninstall_traefik(node)


# The operator as on a cluster (its listeners' controller on), in the node's network namespace, the bed's domain.
operator = operator_fixture("--no-leader-elect", "--no-platform-stack", "--no-claim-binder", *FAST,
                            "--domain", DOMAIN, bed="node", crds=True, inside=True, name="gateway-node",
                            requires=("gateway",))


def app(image: str, name: str, expose: dict[str, Any]) -> dict[str, Any]:
    """The test image serving "hello from <name>", exposed as `expose` says."""
    return {"image": image, "replicas": 1, "expose": {"port": 8080, **expose},
            "env": {"MODE": "serve", "MESSAGE": f"hello from {name}"}}


def deploy(node: NodeTestBed, gateway: NodeGateway, name: str, image: str, expose: dict[str, Any],
           namespace: str | None = None) -> tuple[str, dict[str, Any]]:
    """The Application applied as Argo CD applies it; the operator's Certificate issued (cert-manager's part, played);
    the Application Ready (its route Accepted by Traefik on the listener the operator added). Its namespace and the
    Application."""
    namespace = namespace or f"gw-{name}-{RUN}"
    node.ensure_namespace(namespace)
    apply(node, cr(namespace, app(image, name, expose), name=name, env=ENV))
    node.wait("cert-manager.io/v1", "Certificate", name, namespace, lambda c: c, timeout=120,
              what=f"the operator's Certificate {namespace}/{name}")
    gateway.issue(name, namespace)
    done = node.wait(API, "Application", name, namespace, ready, timeout=180, what=f"Application {namespace}/{name}")
    return namespace, done


def host_route(node: NodeTestBed, name: str, namespace: str) -> dict[str, Any]:
    route = node.get(GATEWAY_API, "HTTPRoute", name, namespace)
    assert route is not None
    return route


def test_https_reaches_the_apps_pod_through_the_public_gateway(
        node: NodeTestBed, gateway: NodeGateway, operator: Operator, test_app: str) -> None:
    namespace = f"gw-shop-{RUN}"
    try:
        # no `websocket`: on Traefik the field adds nothing (renderer.manifests.network.websocket_timeouts), so what
        # it must guarantee is proven here without it
        deploy(node, gateway, "shop", test_app,
               {"network": "public", "rewrites": [{"from": "/api/(.*)", "to": "/echo/$1"}]}, namespace)
        route = host_route(node, "shop", namespace)
        host = route["spec"]["hostnames"][0]
        assert host == f"shop.{ENV}.{DOMAIN}"
        # Traefik accepted the route on the hostname's own listener, which the operator added (its field manager)
        accepted = node.wait(GATEWAY_API, "HTTPRoute", "shop", namespace, route_accepted, timeout=60,
                             what="HTTPRoute shop Accepted by Traefik")
        assert [p["parentRef"]["sectionName"] for p in accepted["status"]["parents"]] == [host]
        live = node.get(GATEWAY_API, "Gateway", GATEWAY, NAMESPACE) or {}
        ours = [e for e in live["metadata"]["managedFields"] if e.get("manager") == FIELD_MANAGER]
        assert ours and f'k:{{"name":"{host}"}}' in str(ours[0]["fieldsV1"]), ours
        assert listener_status(live, host)["Programmed"]["status"] == "True"
        assert {a["value"] for a in live["status"]["addresses"]} == {gateway.address}

        answer = wait_answer(gateway, f"https://{host}/", host, lambda a: a.status == 200)
        assert (answer.status, answer.body) == (200, "hello from shop\n")
        # the app's own certificate (its hostname, not the chart's wildcard), signed by the CA playing the issuer
        shown = wait_certificate(gateway, host, f"DNS:{host}")
        assert f"DNS:{host}" in shown and "*." not in shown and "issuer=CN = apprafter-public test CA" in shown, shown

        # the rewrite: /api/<rest> reaches the pod as /echo/<rest>, Host kept
        assert gateway.curl(f"https://{host}/api/orders?id=7", host).body == f"path /echo/orders?id=7 host {host}\n"
        # an unrewritten path is the app's own
        assert gateway.curl(f"https://{host}/echo/direct", host).body == f"path /echo/direct host {host}\n"
        # what `websocket` must guarantee: the upgrade, and the upgraded connection held open through an idle
        # longer than the entry point's timeouts, which are in force (an idle keep-alive connection is closed)
        kept = keepalive_closed_after(gateway, host)
        assert kept["status"] == "200" and kept["closed_after"] is not None, kept
        assert ENTRY_TIMEOUT - 1 < kept["closed_after"] < IDLE, kept
        echoed = websocket_echo(gateway, host, "/ws", "ping through the gateway", idle=IDLE)
        assert echoed == {"status": "HTTP/1.1 101 Switching Protocols", "echoed": "ping through the gateway",
                          "after_idle": "ping through the gateway after idle"}, echoed

        # plain HTTP: the renderer's redirect route on the `http` listener answers 301 to the same URL over HTTPS
        node.wait(GATEWAY_API, "HTTPRoute", "shop-redirect", namespace, route_accepted, timeout=60)
        redirected = wait_answer(gateway, f"http://{host}/cart?x=1", host, lambda a: a.status == 301)
        assert redirected.headers["location"] == f"https://{host}/cart?x=1"
    finally:
        node.delete_namespace(namespace)


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


def test_two_apps_with_custom_hostnames_each_get_their_own_certificate_and_a_held_hostname_gets_nothing(
        node: NodeTestBed, gateway: NodeGateway, operator: Operator, test_app: str) -> None:
    hosts = {"alpha": "alpha.customer-one.test", "beta": "www.customer-two.test"}
    namespaces = {name: f"gw-{name}-{RUN}" for name in (*hosts, "squat")}
    allowed = {"allowed": sorted(hosts.values())}
    policy = {"apiVersion": API, "kind": "HostnamePolicy", "metadata": {"name": f"gateway-{RUN}"},
              "spec": {"namespaces": sorted(namespaces.values()), "allowedHostnames": allowed}}
    node.apply(policy, field_manager="admin")
    try:
        for name, host in hosts.items():
            deploy(node, gateway, name, test_app, {"network": "public", "hostname": host}, namespaces[name])
        live = node.get(GATEWAY_API, "Gateway", GATEWAY, NAMESPACE) or {}
        for name, host in hosts.items():
            conditions = listener_status(live, host)
            assert {t: conditions[t]["status"] for t in ("Accepted", "ResolvedRefs", "Programmed")} == {
                "Accepted": "True", "ResolvedRefs": "True", "Programmed": "True"}, conditions
            [listener] = [item for item in live["spec"]["listeners"] if item["name"] == host]
            assert listener["tls"]["certificateRefs"] == [{"group": "", "kind": "Secret", "name": f"{name}-{ENV}-tls",
                                                           "namespace": namespaces[name]}]
            accepted = node.wait(GATEWAY_API, "HTTPRoute", name, namespaces[name], route_accepted, timeout=60,
                                 what=f"HTTPRoute {name} Accepted by Traefik")
            assert accepted["status"]["parents"][0]["controllerName"] == CONTROLLER
        for name, host in hosts.items():  # each its own certificate by SNI, and its own pod
            shown = wait_certificate(gateway, host, f"DNS:{host}")
            assert f"DNS:{host}" in shown and "issuer=CN = apprafter-public test CA" in shown, shown
            assert "*." not in shown, shown
            answer = wait_answer(gateway, f"https://{host}/", host, lambda a: a.status == 200)
            assert (answer.status, answer.body) == (200, f"hello from {name}\n")
        # Another namespace asking for alpha's hostname: HostnameConflict, and nothing of it is routed
        squat = namespaces["squat"]
        node.ensure_namespace(squat)
        apply(node, cr(squat, app(test_app, "squat", {"network": "public", "hostname": hosts["alpha"]}), name="squat",
                       env=ENV))
        refused = node.wait(API, "Application", "squat", squat, lambda a: a if (
            (a.get("status") or {}).get("phase") and any(c.get("reason") == "HostnameConflict"
                                                       for c in (a.get("status") or {}).get("conditions") or [])) else
            None, timeout=60, what="Application squat refused with HostnameConflict")
        assert refused["status"]["phase"] != "Ready"
        assert node.get(GATEWAY_API, "HTTPRoute", "squat", squat) is None
        assert wait_answer(gateway, f"https://{hosts['alpha']}/", hosts["alpha"],
                           lambda a: a.status == 200).body == "hello from alpha\n"
        # the app that goes takes its listener with it
        node.delete_namespace(namespaces["beta"])
        node.wait(GATEWAY_API, "Gateway", GATEWAY, NAMESPACE, lambda g: g if hosts["beta"] not in {
            item["name"] for item in g["spec"]["listeners"]} else None, timeout=120,
            what=f"the listener of {hosts['beta']} gone with its app")
    finally:
        node.delete(API, "HostnamePolicy", f"gateway-{RUN}")
        node.delete_namespaces(namespaces.values())
