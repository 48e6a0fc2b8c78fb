"""The webhook as users run it (`apprafter webhook`, a subprocess over TLS) registered with a real kube-apiserver."""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.admission.reviews import API, OPERATOR
from tests.charts.chart import render
from tests.testbed.kube import KubeTestBed, ssl_context
from tests.testbed.pki import CA, ServingCert
from tests.testbed.procs import ManagedProcess, free_port, wait_for

T = TypeVar("T")


class Webhook:
    """`apprafter webhook` on 127.0.0.1 with a serving certificate from the test's own CA."""

    def __init__(self, workdir: Path, args: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.args = args  # more `apprafter webhook` flags (bounds, workers)
        self.ca = CA("apprafter-admission-test-ca")
        self.cert: ServingCert = self.ca.serving_cert(workdir / "tls", "webhook")
        self.port, self.metrics_port = free_port(), free_port()
        self.process: ManagedProcess | None = None
        self.starts = 0
        self.honoured = False  # registered and seen answering through the API server

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def argv(self) -> list[str | os.PathLike[str]]:
        return [sys.executable, "-m", "apprafter", "webhook", "--cert-file", self.cert.cert_path,
                "--key-file", self.cert.key_path, "--host", "127.0.0.1", "--port", str(self.port),
                "--metrics-port", str(self.metrics_port), "--operator-user", OPERATOR, "--cert-poll-seconds", "0.2",
                *self.args]

    def ready(self) -> bool | None:
        with self.client() as client:
            return client.get("/readyz").status_code == 200 or None

    def start(self) -> None:
        self.starts += 1
        self.process = ManagedProcess("apprafter-webhook", self.argv(), self.workdir / f"webhook-{self.starts}.log")
        wait_for("apprafter webhook /readyz", self.ready, 60, self.process, interval=0.1)

    def stop(self) -> None:
        self.honoured = False
        if self.process is not None:
            self.process.stop()
            self.process = None

    def client(self, ca: Path | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, verify=ssl_context(ca or self.cert.ca_path), timeout=10)

    def log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.workdir.glob("webhook-*.log")))

    def pids(self) -> list[int]:
        """The webhook's process and its review workers."""
        assert self.process is not None
        main = self.process.popen.pid
        children = Path(f"/proc/{main}/task/{main}/children").read_text().split()
        return [main, *map(int, children)]

    def workers(self) -> list[int]:
        return self.pids()[1:]

    def rss_bytes(self) -> int:
        """Resident memory of the webhook and its workers together (what its container's limit counts)."""
        total = 0
        for pid in self.pids():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        return total

    def reviews(self) -> list[dict[str, Any]]:
        """The webhook's log line of each review so far (object, user, verdict, "ms": body read to answer)."""
        return [json.loads(line[line.index('{"webhook"'):]) for line in self.log().splitlines() if '{"webhook"' in line]

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` on the metrics port whose labels include `labels`."""
        from prometheus_client.parser import text_string_to_metric_families

        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text
        return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
                   if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def configurations(webhook_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """The chart's webhook configurations pointed at `webhook_url` (instead of the Service) trusting `ca_pem`."""
    out = []
    for doc in chart_objects():
        if not doc["kind"].endswith("WebhookConfiguration"):
            continue
        doc = copy.deepcopy(doc)
        doc["metadata"].pop("annotations", None)  # cert-manager's injection: the test sets caBundle itself
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": webhook_url + path, "caBundle": base64.b64encode(ca_pem).decode()}
        out.append(doc)
    return out


def webhook_kubeconfig(bed: KubeTestBed, workdir: Path) -> Path:
    """A kubeconfig for the webhook's ServiceAccount (a TokenRequest token, as its pod mounts it), bound by the
    chart's own RBAC for it (it reads HostnamePolicies and ServiceProviders) and nothing else."""
    namespace, account = "apprafter-system", "apprafter-admission"
    token = bed.service_account_token(namespace, account)
    for obj in chart_objects():
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding") and obj["metadata"]["name"] == "apprafter:admission":
            bed.apply(obj, field_manager="admission-test")
    workdir.mkdir(parents=True, exist_ok=True)
    return bed.kubeconfig_for(workdir / "webhook.kubeconfig", token, f"system:serviceaccount:{namespace}:{account}")


def register(bed: KubeTestBed, webhook_url: str, ca_pem: bytes) -> None:
    for config in configurations(webhook_url, ca_pem):
        bed.apply(config, field_manager="admission-test")


def unregister(bed: KubeTestBed) -> None:
    for config in configurations("https://unused", b""):
        bed.delete(config["apiVersion"], config["kind"], config["metadata"]["name"])


@functools.cache
def chart_objects() -> list[dict[str, Any]]:
    """deploy/charts/apprafter-operator with its default values, as `helm template` renders it."""
    return render()


def eventually(what: str, probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    return wait_for(what, probe, timeout, interval=0.2)


# --- writes as a user ----------------------------------------------------------------------------------

def path(bed: KubeTestBed, obj: Mapping[str, Any], status: bool = False) -> str:
    info = bed.resource_for(API, obj["kind"])
    return info.path(obj["metadata"]["name"], obj["metadata"].get("namespace")) + ("/status" if status else "")


def apply(client: httpx.Client, bed: KubeTestBed, obj: Mapping[str, Any], *, status: bool = False,
          dry_run: bool = False, manager: str = "admission-test") -> httpx.Response:
    """Server-side apply as kubectl does it (fieldValidation=Strict, the kubectl default)."""
    params = {"fieldManager": manager, "force": "true", "fieldValidation": "Strict"}
    if dry_run:
        params["dryRun"] = "All"
    return client.patch(path(bed, obj, status), params=params, content=json.dumps(obj).encode(),
                        headers={"Content-Type": "application/apply-patch+yaml"})


def merge_status(client: httpx.Client, bed: KubeTestBed, obj: Mapping[str, Any], status: Mapping[str, Any],
                 dry_run: bool = False) -> httpx.Response:
    """A merge patch of the status subresource, as `kubectl patch --subresource=status --type=merge` sends it."""
    params = {"dryRun": "All"} if dry_run else {}
    return client.patch(path(bed, obj, status=True), params=params, json={"status": dict(status)},
                        headers={"Content-Type": "application/merge-patch+json"})


def message(resp: httpx.Response) -> str:
    """The API server's refusal message (fails the test when the write went through)."""
    assert resp.status_code >= 400, f"expected a refusal, got {resp.status_code}: {resp.text[:500]}"
    return str(resp.json().get("message", resp.text))


def ok(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code < 300, f"{resp.status_code}: {resp.text[:2000]}"
    result: dict[str, Any] = resp.json()
    return result


def fresh_namespace(bed: KubeTestBed, prefix: str = "adm") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    bed.ensure_namespace(name)
    return name


def rbac(bed: KubeTestBed, editors: tuple[str, ...], approver: str) -> None:
    """The roles a cluster administrator gives: the editor writes apps and claims (and, to show the webhook's refusal,
    their status) but not plan status; the approver gets the chart's approver role; the operator everything."""
    rules = [{"apiGroups": ["apprafter.io"], "resources": ["applications", "applications/status", "platformstacks",
                                                           "platformstacks/status", "migrationplans", "resourceclaims",
                                                           "resourceclaims/status"],
              "verbs": ["*"]}]
    operator_rules = [{"apiGroups": ["apprafter.io"], "resources": ["*"], "verbs": ["*"]}]
    approver_role = next(d for d in chart_objects() if d["metadata"]["name"] == "apprafter:migration-approver")
    objects: list[dict[str, Any]] = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "test-editor"},
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "test-operator"},
         "rules": operator_rules},
        approver_role,
    ]
    namespace, sa = OPERATOR.split(":")[2:]
    bindings = [("test-editor", [{"kind": "User", "name": editor, "apiGroup": "rbac.authorization.k8s.io"}
                                 for editor in editors]),
                ("test-operator", [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]),
                (approver_role["metadata"]["name"], [{"kind": "User", "name": approver,
                                                       "apiGroup": "rbac.authorization.k8s.io"}])]
    objects += [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": role}, "subjects": subjects,
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}}
                for role, subjects in bindings]
    for obj in objects:
        bed.apply(obj, field_manager="admission-test")
