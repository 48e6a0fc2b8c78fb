"""The test bed playing cert-manager and its cainjector where the node runs neither (their binaries cannot be built
here: docs/images.md "cert-manager: not built"): the key pair a Certificate asks for in the Secret it
names, the Ready conditions cert-manager writes on Certificates and Issuers, and the CA into the webhook
configurations that name a Certificate in `cert-manager.io/inject-ca-from`."""

from __future__ import annotations

import base64
import datetime
from pathlib import Path
from typing import Any

from tests.testbed.kube import KubeTestBed
from tests.testbed.pki import CA

CERT_MANAGER_API = "cert-manager.io/v1"
WEBHOOK_CONFIGS = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")
FIELD_MANAGER = "cert-manager"


def issue_certificate(bed: KubeTestBed, name: str, namespace: str, workdir: Path, *, ca: CA | None = None) -> bytes:
    """cert-manager's part: the key pair the Certificate asks for, in the Secret it names, signed by `ca` (the
    Issuer's; a CA of its own when not given); returns the CA."""
    certificate = bed.get(CERT_MANAGER_API, "Certificate", name, namespace)
    assert certificate is not None, f"no Certificate {namespace}/{name}"
    spec = certificate["spec"]
    names = tuple(spec.get("dnsNames") or [spec.get("commonName") or name])
    serving = (ca or CA(f"{name}-ca")).serving_cert(workdir / "tls" / namespace / name, name, names)
    data = {"tls.crt": serving.cert_path.read_bytes(), "tls.key": serving.key_path.read_bytes(),
            "ca.crt": serving.ca_pem}
    bed.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": spec["secretName"], "namespace": namespace},
               "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}, field_manager=FIELD_MANAGER)
    return serving.ca_pem


def mark_ready(bed: KubeTestBed, kind: str, name: str, namespace: str | None, message: str) -> None:
    """The Ready condition cert-manager's controller writes on a Certificate or an (Cluster)Issuer it serves."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                              "message": message, "lastTransitionTime": now}]}
    if kind == "Certificate":
        status["notBefore"] = now
    info = bed.resource_for(CERT_MANAGER_API, kind)
    resp = bed.http.patch(info.path(name, namespace) + "/status", json={"status": status},
                          headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text


def inject_ca(bed: KubeTestBed, certificate: str, ca_pem: bytes) -> int:
    """cainjector's part: the caBundle into every webhook of each configuration whose annotation names the
    Certificate (namespace/name). The webhooks keep their Service reference: the API server reaches them through
    kube-proxy. Returns how many webhooks got it."""
    injected = 0
    for plural in WEBHOOK_CONFIGS:
        path = f"/apis/admissionregistration.k8s.io/v1/{plural}"
        for config in bed.http.get(path).json()["items"]:
            if config["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from") != certificate:
                continue
            for hook in config["webhooks"]:
                assert set(hook["clientConfig"]) == {"service"}, hook["clientConfig"]
                hook["clientConfig"]["caBundle"] = base64.b64encode(ca_pem).decode()
                injected += 1
            resp = bed.http.put(f"{path}/{config['metadata']['name']}", json=config)
            assert resp.status_code == 200, resp.text
    return injected
