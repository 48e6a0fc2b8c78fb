"""Traefik as the node's Gateway API implementation (issue 32 item 4), standing in for Cilium's Gateway, which cannot
be built here: Traefik's pods in the platform's gateway namespace with its Gateway provider on, its GatewayClass, the
ClusterRole upstream's docs give it, the `public` Gateway and its wildcard Certificate from our chart
(deploy/charts/apprafter-gateway, `gatewayClassName: traefik`), cert-manager played (tests/testbed/cert_manager.py)
by one test CA standing in for the ClusterIssuer `apprafter-public`.

The Gateway's address is the ClusterIP of the Service `traefik` (ports 80 and 443 to the pods' entry points),
reached through kube-proxy from the node's network namespace; Traefik writes it into the Gateway's status
(`statusAddress.ip`), where Cilium writes its LoadBalancer Service's address. Requests are made with curl and
openssl inside the namespace (`curl --resolve HOST:443:ADDRESS`), as a client resolving HOST to the Gateway would.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from lifecycle.listeners import listener
from renderer.context import LISTENERS_FIELD_MANAGER, PlatformContext
from renderer.load import load
from renderer.render import render_loaded
from tests.renderer.helpers import write_app
from tests.testbed.cert_manager import issue_certificate, mark_ready
from tests.testbed.node import NodeTestBed, has_condition
from tests.testbed.pki import CA
from tests.testbed.procs import tool
from toolchain.pins import pins
from toolchain.tools import crds_dir

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "charts" / "apprafter-gateway"
NAMESPACE = "apprafter-gateway"  # the chart's release namespace, what the renderer's routes name
GATEWAY = "public"
CLASS = "traefik"
CONTROLLER = "traefik.io/gateway-controller"  # Traefik's GatewayClass controllerName (its Gateway provider's)
GATEWAY_API = "gateway.networking.k8s.io/v1"
DOMAIN = "apps.gateway.test"  # the platform's domain on the bed (never resolved outside the namespace)
ISSUER = "apprafter-public"  # the ClusterIssuer the renderer's Certificates name; played by the bed's CA
LABELS = {"app.kubernetes.io/name": "traefik", "app.kubernetes.io/instance": "apprafter-gateway"}
PING_PORT = 9000  # Traefik's own entry point for /ping: apart from the Gateway's ports (80 and 443)
# What upstream's RBAC for the Gateway provider grants (docs/content/reference/dynamic-configuration/
# kubernetes-gateway-rbac.yml in the module at TRAEFIK_VERSION), less `get pods` (only for OpenTelemetry).
RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    {"apiGroups": [""], "resources": ["services", "secrets", "configmaps"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
    {"apiGroups": ["gateway.networking.k8s.io"],
     "resources": ["gatewayclasses", "gateways", "httproutes", "grpcroutes", "tcproutes", "tlsroutes",
                   "referencegrants", "backendtlspolicies"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["gateway.networking.k8s.io"],
     "resources": ["gatewayclasses/status", "gateways/status", "httproutes/status", "grpcroutes/status",
                   "tcproutes/status", "tlsroutes/status", "referencegrants/status", "backendtlspolicies/status"],
     "verbs": ["update"]},
]


@dataclasses.dataclass
class Answer:
    """One HTTP exchange made with curl inside the namespace."""

    status: int
    headers: dict[str, str]
    body: str


@dataclasses.dataclass
class NodeGateway:
    """Traefik serving the `public` Gateway on the node; `address` is where clients connect."""

    node: NodeTestBed
    address: str
    ca: CA
    workdir: Path
    domain: str = DOMAIN

    @property
    def ca_path(self) -> Path:
        path = self.workdir / "gateway-ca.crt"
        if not path.exists():
            path.write_bytes(self.ca.pem)
        return path

    def issue(self, name: str, namespace: str) -> None:
        """cert-manager's part for a Certificate the renderer or the chart wrote: the CA signs its dnsNames into
        its Secret, and the Certificate is Ready."""
        issue_certificate(self.node, name, namespace, self.workdir, ca=self.ca)
        mark_ready(self.node, "Certificate", name, namespace, "Certificate is up to date and has not expired")

    def curl(self, url: str, host: str, *, method: str = "GET", port: int | None = None,
             headers: Mapping[str, str] | None = None, body: bytes | None = None, timeout: float = 10) -> Answer:
        """curl `url` inside the namespace, `host` resolved to the Gateway's address (SNI and Host are `host`),
        TLS verified with the bed's CA, `body` sent as the request's; raises CalledProcessError when curl fails
        (certificate, connection)."""
        port = port or (443 if url.startswith("https:") else 80)
        argv = ["curl", "-sS", "--max-time", str(timeout), "--cacert", str(self.ca_path), "-X", method,
                "--resolve", f"{host}:{port}:{self.address}", "-D", "-", url]
        for key, value in (headers or {}).items():
            argv += ["-H", f"{key}: {value}"]
        if body is not None:
            argv += ["--data-binary", "@-"]
        # bytes, not text: universal newlines would turn the header block's CRLFs into LFs
        out = subprocess.run(self.node.nsenter(*argv), input=body or b"", capture_output=True, timeout=timeout + 10,
                             check=True).stdout.decode()
        head, _, body = out.partition("\r\n\r\n")
        status_line, *lines = head.split("\r\n")
        fields = dict(line.split(": ", 1) for line in lines if ": " in line)
        return Answer(int(status_line.split()[1]), {k.lower(): v for k, v in fields.items()}, body)

    def certificate(self, host: str) -> str:
        """The certificate the Gateway presents for SNI `host` (not verified), as `openssl x509 -text` prints it:
        subject, issuer, SANs."""
        shown = subprocess.run(self.node.nsenter("openssl", "s_client", "-connect", f"{self.address}:443",
                                                 "-servername", host), input="", capture_output=True,
                               text=True, timeout=30, check=False)
        pem = shown.stdout[shown.stdout.find("-----BEGIN CERTIFICATE-----"):]
        assert pem.startswith("-----BEGIN"), f"no certificate for {host}: {shown.stderr[-500:]}"
        return subprocess.run(["openssl", "x509", "-noout", "-subject", "-issuer", "-ext", "subjectAltName"],
                              input=pem, capture_output=True, text=True, check=True, timeout=30).stdout


def traefik_crds() -> list[Path]:
    """The CRDs Traefik's Gateway provider needs beyond the pinned Gateway API: those only TRAEFIK_GATEWAY_API_VERSION's
    standard channel has (BackendTLSPolicy v1, which it watches; without it its caches never sync)."""
    pinned = {path.name for path in (crds_dir() / f"gateway-api-{pins()['GATEWAY_API_VERSION']}").glob("*.yaml")}
    newer = crds_dir() / f"gateway-api-{pins()['TRAEFIK_GATEWAY_API_VERSION']}"
    found = sorted(path for path in newer.glob("*.yaml") if path.name not in pinned)
    assert found, f"no CRDs in {newer}: run `make setup` (tools/fetch-crds.sh)"
    return found


def chart_objects(domain: str) -> list[dict[str, Any]]:
    """Our gateway chart's `public` Gateway and its Certificate, templated by the pinned helm with Traefik's class
    and the issuer the bed's CA plays (`issuer.type=none`: an issuer of the administrator's that signs wildcards, so
    the chart's `https` listener is there too); the `internal` and `vpn` Gateways are left out: on Traefik every
    Gateway of a class shares the same entry points, so they would answer on the same address."""
    out = subprocess.run([str(tool("helm")), "template", "apprafter-gateway", str(CHART), "--namespace", NAMESPACE,
                          "--set", f"domain={domain}", "--set", f"gatewayClassName={CLASS}", "--set",
                          "issuer.type=none"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc and doc["metadata"]["name"] in (GATEWAY, f"{GATEWAY}-tls")]


def manifests(image: str, address: str, timeout: str | None = None) -> list[dict[str, Any]]:
    """Traefik's ServiceAccount, ClusterRole and binding, GatewayClass and Deployment. The entry points listen on the
    Gateway's listener ports (80, 443): Traefik maps a listener to the entry point whose address ends in its port.
    Binding them as uid 65532 with every capability dropped takes the pod's `ip_unprivileged_port_start` sysctl.
    `timeout` (a duration such as "3s"): the Gateway entry points' read and idle timeouts (v3's defaults: 60 s and
    180 s), short so a test can outlive them."""
    meta = {"name": "traefik", "namespace": NAMESPACE, "labels": LABELS}
    role_name = f"{NAMESPACE}-traefik"
    args = ["--entryPoints.web.address=:80", "--entryPoints.websecure.address=:443",
            f"--entryPoints.traefik.address=:{PING_PORT}", "--ping=true", "--providers.kubernetesgateway=true",
            f"--providers.kubernetesgateway.statusaddress.ip={address}", "--global.checknewversion=false",
            "--global.sendanonymoususage=false", "--log.level=INFO"]
    if timeout:
        args += [f"--entryPoints.{entry}.transport.respondingTimeouts.{kind}Timeout={timeout}"
                 for entry in ("web", "websecure") for kind in ("read", "idle")]
    container = {
        "name": "traefik", "image": image, "imagePullPolicy": "Never", "args": args,
        "ports": [{"name": "web", "containerPort": 80}, {"name": "websecure", "containerPort": 443},
                  {"name": "ping", "containerPort": PING_PORT}],
        "readinessProbe": {"httpGet": {"path": "/ping", "port": "ping"}, "periodSeconds": 1, "failureThreshold": 1},
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {"runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": True,
                            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "data", "mountPath": "/data"}],
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role_name},
         "rules": RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role_name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
         "subjects": [{"kind": "ServiceAccount", "name": "traefik", "namespace": NAMESPACE}]},
        {"apiVersion": GATEWAY_API, "kind": "GatewayClass", "metadata": {"name": CLASS},
         "spec": {"controllerName": CONTROLLER}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": 1, "selector": {"matchLabels": LABELS},
            "template": {"metadata": {"labels": LABELS}, "spec": {
                "serviceAccountName": "traefik", "enableServiceLinks": False,
                "securityContext": {"sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]},
                "containers": [container],
                "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]}}}},
    ]


def service() -> dict[str, Any]:
    """The Gateway's address: a ClusterIP Service to Traefik's entry points (Cilium's is a LoadBalancer)."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "traefik", "namespace": NAMESPACE,
                                                                "labels": LABELS},
            "spec": {"type": "ClusterIP", "selector": LABELS,
                     "ports": [{"name": "web", "port": 80, "targetPort": "web", "protocol": "TCP"},
                               {"name": "websecure", "port": 443, "targetPort": "websecure", "protocol": "TCP"}]}}


def install_traefik(node: NodeTestBed, image: str, workdir: Path, *, domain: str = DOMAIN, chart: bool = True,
                    timeout: float = 180, entry_timeout: str | None = None) -> NodeGateway:
    """Traefik and its class on the node, with the chart's `public` Gateway (`chart`; without it, the Gateway is
    already there: the stack's `gateway` component made it, class `traefik`, as on the bootstrapped node); returns
    once Traefik has programmed the Gateway (its `Programmed` condition) and its pod is Ready. `image` is the name
    the node's containerd has; `entry_timeout` as manifests() says."""
    workdir.mkdir(parents=True, exist_ok=True)
    known = list(node.crd_names)
    node.crd_names = known + node.install_crds(traefik_crds(), timeout=timeout)
    node.ensure_namespace(NAMESPACE)
    address = node.apply(service(), field_manager="apprafter-testbed")["spec"]["clusterIP"]
    for obj in manifests(image, address, entry_timeout):
        node.apply(obj, NAMESPACE, field_manager="apprafter-testbed")
    gateway = NodeGateway(node, address, CA(f"{ISSUER} test CA"), workdir, domain)
    if chart:
        for obj in chart_objects(domain):
            node.apply(obj, NAMESPACE, field_manager="helm")
        gateway.issue(f"{GATEWAY}-tls", NAMESPACE)
    node.wait("apps/v1", "Deployment", "traefik", NAMESPACE, available, timeout=timeout,
              what="Traefik's Deployment Available")
    node.wait(GATEWAY_API, "Gateway", GATEWAY, NAMESPACE, programmed, timeout=timeout,
              what=f"Gateway {GATEWAY} Programmed by Traefik")
    return gateway


def uninstall_traefik(node: NodeTestBed) -> None:
    """Remove what install_traefik made (the CRD it added stays: nothing else serves it)."""
    node.delete_namespace(NAMESPACE)
    node.delete(GATEWAY_API, "GatewayClass", CLASS)
    for kind in ("ClusterRoleBinding", "ClusterRole"):
        node.delete("rbac.authorization.k8s.io/v1", kind, f"{NAMESPACE}-traefik")


def application(name: str, image: str, expose: str, environment: str = "prod") -> str:
    """An Application.cue running the test image (`serve`, MESSAGE "hello from <name>") with `expose` as written."""
    return f'''apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "{name}"
spec: {{
	base: {{
		image:    "{image}"
		replicas: 1
		env: {{MODE: "serve", MESSAGE: "hello from {name}"}}
		expose: {expose}
	}}
	environments: {environment}: {{}}
}}
'''


def deploy_app(gateway: NodeGateway, source: Path, name: str, image: str, expose: str, namespace: str, *,
               environment: str = "prod") -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Render the app with our renderer (manifests mode, the bed's domain), apply every object it makes into
    `namespace`, play cert-manager for its Certificate, add its hostname's listener as the operator does (for the
    benchmark, which runs no operator; the tests do) and wait for its Deployment; returns the objects by kind and
    the seconds from the first apply to each step (all applied, certificate issued, Deployment Available)."""
    node = gateway.node
    write_app(source, application(name, image, expose, environment))
    rendered = render_loaded(load(source), environment, "manifests", namespace, PlatformContext(domain=gateway.domain))
    started = time.monotonic()
    node.ensure_namespace(namespace)
    for obj in rendered.objects:
        node.apply(obj, namespace, field_manager="apprafter")
    steps = {"applied": time.monotonic() - started}
    objects = {obj["kind"]: obj for obj in rendered.objects}
    gateway.issue(objects["Certificate"]["metadata"]["name"], namespace)
    steps["certificate issued (played)"] = time.monotonic() - started
    # the hostname's own listener, as the operator applies it once the certificate is issued (no operator here)
    host = objects["HTTPRoute"]["spec"]["hostnames"][0]
    node.apply({"apiVersion": GATEWAY_API, "kind": "Gateway", "metadata": {"name": GATEWAY, "namespace": NAMESPACE},
                "spec": {"listeners": [listener(host, namespace, name, environment)]}}, NAMESPACE,
               field_manager=LISTENERS_FIELD_MANAGER)
    node.wait("apps/v1", "Deployment", name, namespace, available, timeout=120, what=f"{name} Available")
    steps["Deployment Available"] = time.monotonic() - started
    return objects, steps


def available(obj: dict[str, Any]) -> Any:
    status = obj.get("status") or {}
    return obj if status.get("observedGeneration") == obj["metadata"]["generation"] and \
        status.get("availableReplicas", 0) >= obj["spec"]["replicas"] and has_condition(obj, "Available") else None


def programmed(obj: dict[str, Any]) -> Any:
    """A Gateway Traefik has accepted and programmed at its current generation."""
    conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
    return obj if all(conditions.get(t, {}).get("status") == "True" and
                      conditions[t].get("observedGeneration") == obj["metadata"]["generation"]
                      for t in ("Accepted", "Programmed")) else None


def route_accepted(obj: dict[str, Any]) -> Any:
    """An HTTPRoute whose every parent Traefik (by its controllerName) marked Accepted and ResolvedRefs at the
    route's generation."""
    parents = (obj.get("status") or {}).get("parents") or []

    def ok(parent: dict[str, Any]) -> bool:
        conditions = {c["type"]: c for c in parent.get("conditions") or []}
        return parent.get("controllerName") == CONTROLLER and all(
            conditions.get(t, {}).get("status") == "True" and
            conditions[t].get("observedGeneration") == obj["metadata"]["generation"]
            for t in ("Accepted", "ResolvedRefs"))
    return obj if parents and all(ok(p) for p in parents) else None


def listener_status(gateway: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """A listener's conditions by type, from a Gateway's status."""
    for entry in (gateway.get("status") or {}).get("listeners") or []:
        if entry["name"] == name:
            return {c["type"]: c for c in entry.get("conditions") or []}
    return {}


def https_listener(name: str, hostname: str | None, secrets: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """An HTTPS listener on 443 terminating with `secrets` ((namespace, name) each), routes from every namespace."""
    listener: dict[str, Any] = {
        "name": name, "protocol": "HTTPS", "port": 443,
        "tls": {"mode": "Terminate", "certificateRefs": [
            {"group": "", "kind": "Secret", "name": secret, "namespace": namespace} for namespace, secret in secrets]},
        "allowedRoutes": {"namespaces": {"from": "All"}}}
    if hostname:
        listener["hostname"] = hostname
    return listener



# A WebSocket client run inside the namespace (argv: address, host, CA file, path, message, idle seconds): the TLS
# handshake with SNI `host`, the upgrade, one masked text frame out and its echo; then, after `idle` seconds of
# silence, the same again on the same connection. Prints the status line and both echoes (None where the connection
# was closed).
WEBSOCKET_CLIENT = r'''
import base64, json, os, socket, ssl, sys, time
address, host, ca, path, message, idle = sys.argv[1:7]
tls = ssl.create_default_context(cafile=ca).wrap_socket(socket.create_connection((address, 443), timeout=10),
                                                        server_hostname=host)
key = base64.b64encode(os.urandom(16)).decode()
tls.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
head = b""
while b"\r\n\r\n" not in head:
    chunk = tls.recv(1)
    if not chunk:
        break
    head += chunk
status = head.split(b"\r\n", 1)[0].decode()


def echo(text):
    data, mask = text.encode(), os.urandom(4)
    try:
        tls.sendall(bytes([0x81, 0x80 | len(data)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
        frame = tls.recv(2)
        if len(frame) < 2:
            return None
        body = b""
        while len(body) < frame[1] & 0x7F:
            chunk = tls.recv((frame[1] & 0x7F) - len(body))
            if not chunk:
                return None
            body += chunk
        return body.decode()
    except OSError:
        return None


echoed = after = None
if " 101 " in status:
    echoed = echo(message)
    if float(idle) > 0:
        time.sleep(float(idle))  # the silence under test, nothing else
        after = echo(message + " after idle")
    tls.sendall(bytes([0x88, 0x80]) + os.urandom(4))
print(json.dumps({"status": status, "echoed": echoed, "after_idle": after}))
'''

# An HTTPS keep-alive client run inside the namespace (argv: address, host, CA file): one GET, its whole answer read
# (Content-Length), then the connection left idle; prints the seconds until the server closed it (None: not within
# 30 s).
KEEPALIVE_CLIENT = r'''
import json, socket, ssl, sys, time
address, host, ca = sys.argv[1:4]
tls = ssl.create_default_context(cafile=ca).wrap_socket(socket.create_connection((address, 443), timeout=30),
                                                        server_hostname=host)
tls.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
data = b""
while b"\r\n\r\n" not in data:
    data += tls.recv(4096)
head, _, body = data.partition(b"\r\n\r\n")
length = int([line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")][0])
while len(body) < length:
    body += tls.recv(4096)
answered = time.monotonic()
try:
    closed = time.monotonic() - answered if tls.recv(1) == b"" else None
except (TimeoutError, OSError):
    closed = None
print(json.dumps({"status": head.split(b" ")[1].decode(), "closed_after": closed}))
'''


def websocket_echo(gateway: NodeGateway, host: str, path: str, message: str, idle: float = 0) -> dict[str, Any]:
    """One WebSocket exchange through the Gateway from inside the namespace, and another after `idle` seconds of
    silence when idle > 0: {"status": ..., "echoed": ..., "after_idle": ...}."""
    out = subprocess.run(gateway.node.nsenter("python3", "-c", WEBSOCKET_CLIENT, gateway.address, host,
                                              str(gateway.ca_path), path, message, str(idle)),
                         capture_output=True, text=True, timeout=30 + idle, check=True).stdout
    answer: dict[str, Any] = json.loads(out)
    return answer


def keepalive_closed_after(gateway: NodeGateway, host: str) -> dict[str, Any]:
    """An idle HTTPS keep-alive connection through the Gateway: {"status": ..., "closed_after": seconds or None}."""
    out = subprocess.run(gateway.node.nsenter("python3", "-c", KEEPALIVE_CLIENT, gateway.address, host,
                                              str(gateway.ca_path)),
                         capture_output=True, text=True, timeout=60, check=True).stdout
    answer: dict[str, Any] = json.loads(out)
    return answer
