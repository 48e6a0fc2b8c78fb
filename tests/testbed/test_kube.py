"""The loopback kube-apiserver is real: auth, pinned CRDs, status subresource, server-side apply, webhooks."""

from __future__ import annotations

import contextlib
import http.server
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from lightkube import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.types import PatchType

from tests.testbed.kube import ApplyRejected, ssl_context
from tests.testbed.pki import CA
from toolchain.pins import pins

pytestmark = pytest.mark.testbed

# Kinds rendered output targets; each must be served by the test bed's API server.
PINNED_KINDS = [
    ("gateway.networking.k8s.io/v1", "GatewayClass", "gatewayclasses", False),
    ("gateway.networking.k8s.io/v1", "Gateway", "gateways", True),
    ("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes", True),
    ("gateway.networking.k8s.io/v1", "GRPCRoute", "grpcroutes", True),
    ("keda.sh/v1alpha1", "ScaledObject", "scaledobjects", True),
    ("keda.sh/v1alpha1", "TriggerAuthentication", "triggerauthentications", True),
    ("cilium.io/v2", "CiliumNetworkPolicy", "ciliumnetworkpolicies", True),
    ("cilium.io/v2", "CiliumClusterwideNetworkPolicy", "ciliumclusterwidenetworkpolicies", False),
    ("argoproj.io/v1alpha1", "Application", "applications", True),
    ("argoproj.io/v1alpha1", "AppProject", "appprojects", True),
    ("postgresql.cnpg.io/v1", "Cluster", "clusters", True),
    ("cert-manager.io/v1", "Certificate", "certificates", True),
    ("cert-manager.io/v1", "Issuer", "issuers", True),
    ("cert-manager.io/v1", "ClusterIssuer", "clusterissuers", False),
]


def test_api_server_runs_the_pinned_version_and_requires_the_token(kube):
    version = kube.http.get("/version").json()
    assert version["gitVersion"] == pins()["KUBERNETES_VERSION"]
    assert kube.url.startswith("https://127.0.0.1:")
    anonymous = httpx.get(kube.url + "/api/v1/namespaces", verify=ssl_context(kube.ca_path), timeout=10)
    assert anonymous.status_code in (401, 403)
    wrong = httpx.get(
        kube.url + "/api/v1/namespaces",
        verify=ssl_context(kube.ca_path),
        timeout=10,
        headers={"Authorization": "Bearer not-the-token"},
    )
    assert wrong.status_code == 401
    names = {ns.metadata.name for ns in kube.client.list(Namespace)}
    assert {"default", "kube-system"} <= names
    assert Path(kube.kubeconfig).read_text().count(kube.url) == 1


@pytest.mark.parametrize(("api_version", "kind", "plural", "namespaced"), PINNED_KINDS)
def test_pinned_crds_are_established_and_served(kube, api_version, kind, plural, namespaced):
    info = kube.resource_for(api_version, kind)
    assert (info.plural, info.namespaced) == (plural, namespaced)
    assert f"{api_version}/{kind}" in kube.api_versions()


def test_dry_run_apply_validates_against_crd_schemas_and_persists_nothing(kube):
    ns = "dryrun-" + uuid.uuid4().hex[:6]
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "parser", "namespace": ns},
        "spec": {
            "parentRefs": [{"name": "public", "namespace": "gateway"}],
            "hostnames": ["parser.example.com"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                    "backendRefs": [{"name": "parser", "port": 8080}],
                }
            ],
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "parser"},
        "spec": {
            "selector": {"matchLabels": {"app": "parser"}},
            "template": {
                "metadata": {"labels": {"app": "parser"}},
                "spec": {"containers": [{"name": "app", "image": "ghcr.io/user/parser:1"}]},
            },
        },
    }
    out = kube.dry_run_apply([{"apiVersion": "v1", "kind": "List", "items": [route]}, deployment], namespace=ns)
    assert out[0]["spec"]["rules"][0]["backendRefs"][0]["weight"] == 1  # defaulted by the CRD schema
    assert out[1]["metadata"]["namespace"] == ns
    assert out[1]["spec"]["strategy"]["type"] == "RollingUpdate"  # defaulted by the API server
    assert kube.get("gateway.networking.k8s.io/v1", "HTTPRoute", "parser", ns) is None
    assert kube.get("apps/v1", "Deployment", "parser", ns) is None

    bad = json.loads(json.dumps(route))
    bad["spec"]["rules"][0]["matches"][0]["path"]["type"] = "Glob"
    with pytest.raises(ApplyRejected) as exc:
        kube.dry_run_apply([bad], namespace=ns)
    assert exc.value.code == 422
    assert "Glob" in str(exc.value) and "HTTPRoute" in str(exc.value)

    with pytest.raises(ApplyRejected, match="serves no kind"):
        kube.dry_run_apply([{"apiVersion": "example.com/v1", "kind": "Nope", "metadata": {"name": "x"}}])


WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.testbed.apprafter.io"},
    "spec": {
        "group": "testbed.apprafter.io",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {"size": {"type": "integer", "minimum": 1}},
                            },
                            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                        },
                    }
                },
            }
        ],
    },
}


def test_crd_and_custom_resource_with_status_subresource(kube):
    kube.apply(WIDGET_CRD, field_manager="testbed")

    def established():
        crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", WIDGET_CRD["metadata"]["name"])
        conds = ((crd or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    _eventually(established, "the Widget CRD to be Established")
    widget = create_namespaced_resource("testbed.apprafter.io", "v1", "Widget", "widgets")
    ns = "status-" + uuid.uuid4().hex[:6]
    kube.ensure_namespace(ns)
    _eventually(lambda: _can_list(kube, widget, ns), "Widget to be served")

    created = kube.client.create(
        widget(metadata={"name": "w1", "namespace": ns}, spec={"size": 2}, status={"phase": "Ignored"})
    )
    assert "status" not in created.to_dict() or not created.to_dict().get("status")  # main resource drops it

    patched = kube.client.patch(
        widget.Status,
        "w1",
        {"status": {"phase": "Ready"}, "spec": {"size": 9}},
        namespace=ns,
        patch_type=PatchType.MERGE,
    )
    assert patched.status["phase"] == "Ready"
    stored = kube.client.get(widget, "w1", namespace=ns)
    assert stored.status["phase"] == "Ready"
    assert stored.spec["size"] == 2  # the status subresource does not write spec

    with pytest.raises(ApiError) as exc:
        kube.client.create(widget(metadata={"name": "w2", "namespace": ns}, spec={"size": 0}))
    assert exc.value.status.code == 422 and "spec.size" in exc.value.status.message


def test_server_side_apply_tracks_field_managers(kube):
    ns = "ssa-" + uuid.uuid4().hex[:6]
    kube.ensure_namespace(ns)
    base = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": ns}}
    kube.client.apply(ConfigMap.from_dict({**base, "data": {"a": "1"}}), field_manager="team-a")
    kube.client.apply(ConfigMap.from_dict({**base, "data": {"b": "2"}}), field_manager="team-b")
    stored = kube.client.get(ConfigMap, "settings", namespace=ns)
    assert stored.data == {"a": "1", "b": "2"}
    managers = {m.manager: m for m in stored.metadata.managedFields}
    assert {"team-a", "team-b"} <= set(managers)
    assert managers["team-a"].operation == "Apply"
    assert "f:a" in json.dumps(managers["team-a"].fieldsV1) and "f:b" not in json.dumps(managers["team-a"].fieldsV1)

    with pytest.raises(ApplyRejected) as exc:  # team-b may not take team-a's field without force
        kube.apply({**base, "data": {"a": "changed"}}, field_manager="team-b", force=False)
    assert exc.value.code == 409 and "team-a" in str(exc.value)
    kube.apply({**base, "data": {"a": "changed"}}, field_manager="team-b", force=True)
    assert kube.client.get(ConfigMap, "settings", namespace=ns).data["a"] == "changed"


# --- validating admission webhook on 127.0.0.1 -------------------------------------------------------


class _Reviews:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.lock = threading.Lock()


@contextlib.contextmanager
def _webhook_server(tmp_path: Path) -> Iterator[tuple[int, bytes, _Reviews]]:
    """An HTTPS AdmissionReview server on 127.0.0.1 that denies objects named deny-*."""
    ca = CA("webhook-ca")
    cert = ca.serving_cert(tmp_path / "webhook", "webhook", ())
    reviews = _Reviews()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            req = review["request"]
            with reviews.lock:
                reviews.requests.append(req)
            name = req.get("name") or req["object"]["metadata"].get("name", "")
            allowed = not name.startswith("deny-")
            response = {"uid": req["uid"], "allowed": allowed}
            if not allowed:
                response["status"] = {"code": 403, "message": f"apprafter-testbed denies {name}"}
            body = json.dumps(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert.cert_path, cert.key_path)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], cert.ca_pem, reviews
    finally:
        server.shutdown()
        server.server_close()


def test_validating_webhook_on_loopback_is_called(kube, tmp_path):
    import base64

    ns = "webhook-" + uuid.uuid4().hex[:6]
    kube.ensure_namespace(ns)
    kube.http.patch(
        f"/api/v1/namespaces/{ns}",
        json={"metadata": {"labels": {"apprafter-testbed/webhook": ns}}},
        headers={"Content-Type": "application/merge-patch+json"},
    ).raise_for_status()
    name = "apprafter-testbed-" + ns
    with _webhook_server(tmp_path) as (port, ca_pem, reviews):
        config = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": "deny.testbed.apprafter.io",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 5,
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/validate",
                        "caBundle": base64.b64encode(ca_pem).decode(),
                    },
                    "namespaceSelector": {"matchLabels": {"apprafter-testbed/webhook": ns}},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["configmaps"],
                            "scope": "Namespaced",
                        }
                    ],
                }
            ],
        }
        kube.apply(config, field_manager="testbed")
        try:
            canary = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "deny-canary", "namespace": ns},
            }

            def denied():
                try:
                    kube.dry_run_apply([canary], namespace=ns)
                except ApplyRejected as exc:
                    return str(exc)
                return None

            message = _eventually(denied, "the webhook to be honoured", timeout=30)
            assert "apprafter-testbed denies deny-canary" in message
            assert "deny.testbed.apprafter.io" in message
            allowed = kube.dry_run_apply([{**canary, "metadata": {"name": "fine", "namespace": ns}}], namespace=ns)
            assert allowed[0]["metadata"]["name"] == "fine"
            with reviews.lock:
                seen = [r for r in reviews.requests if r.get("name") in ("deny-canary", "fine")]
            assert {r["name"] for r in seen} == {"deny-canary", "fine"}
            last = seen[-1]
            assert last["operation"] == "CREATE" and last["dryRun"] is True
            assert last["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
            assert last["namespace"] == ns and last["userInfo"]["username"] == "apprafter-admin"
        finally:
            kube.delete("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", name)


def _can_list(kube, res, ns) -> bool:
    try:
        list(kube.client.list(res, namespace=ns))
        return True
    except ApiError:
        return False


def _eventually(probe, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)
