"""A stand-in for the kubelet on the test bed: runs one pod of a Deployment, as stored in the API server, under
podman the way a node would (its image, command, args, env, security context, volumes, memory limit, service
account token, probes), on the host network.

Only the fields listed below are honoured; any other field of the pod fails the test, so a chart cannot rely
on something this stand-in would silently drop. Scheduling fields mean nothing on one host and are ignored.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.images.podman import env as podman_env
from tests.images.podman import podman
from tests.testbed.kube import KubeTestBed, ssl_context
from tests.testbed.procs import ManagedProcess, wait_for

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
POD_FIELDS = {"serviceAccountName", "automountServiceAccountToken", "securityContext", "containers", "volumes",
              "terminationGracePeriodSeconds"}
# Scheduling, and what the API server fills in by default with the same meaning on one host.
IGNORED = {"affinity", "nodeSelector", "tolerations", "topologySpreadConstraints", "priorityClassName",
           "imagePullSecrets", "dnsPolicy", "restartPolicy", "schedulerName", "serviceAccount"}
CONTAINER_FIELDS = {"name", "image", "imagePullPolicy", "command", "args", "env", "ports", "readinessProbe",
                    "livenessProbe", "securityContext", "resources", "volumeMounts", "terminationMessagePath",
                    "terminationMessagePolicy"}
SECURITY_FIELDS = {"runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile", "allowPrivilegeEscalation",
                   "readOnlyRootFilesystem", "capabilities"}
_UNITS = {"Ki": "k", "Mi": "m", "Gi": "g"}


def _only(what: str, given: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(given) - allowed
    if unknown:
        pytest.fail(f"{what}: the kubelet stand-in does not honour {sorted(unknown)}", pytrace=False)


def _size(quantity: str) -> str:
    """A Kubernetes quantity (128Mi) as podman writes it (128m)."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", quantity)
    if not m:
        pytest.fail(f"quantity {quantity}: the kubelet stand-in reads Ki, Mi and Gi only", pytrace=False)
    return m.group(1) + _UNITS[m.group(2)]


class Pod:
    """One running pod: its container under podman, its ports on 127.0.0.1."""

    def __init__(self, name: str, namespace: str, container: dict[str, Any], process: ManagedProcess,
                 container_name: str, grace: int) -> None:
        self.name, self.namespace, self.container = name, namespace, container
        self.process, self.container_name, self.grace = process, container_name, grace

    def port(self, name_or_number: str | int) -> int:
        if isinstance(name_or_number, int):
            return name_or_number
        return int(next(p["containerPort"] for p in self.container["ports"] if p["name"] == name_or_number))

    def probe(self, which: str = "readinessProbe") -> httpx.Response:
        """One probe as the kubelet sends it (HTTPS without verifying the certificate, as the kubelet does)."""
        get = self.container[which]["httpGet"]
        scheme = get.get("scheme", "HTTP").lower()
        url = f"{scheme}://127.0.0.1:{self.port(get['port'])}{get['path']}"
        return httpx.get(url, verify=False, timeout=2)  # the kubelet does not verify a probe's certificate

    def wait_ready(self, timeout: float = 90) -> str:
        """Wait until the readiness probe answers 200; its body."""
        def ready() -> str | None:
            resp = self.probe()
            return resp.text if resp.status_code == 200 else None
        return wait_for(f"pod {self.name} ready", ready, timeout, self.process, interval=0.2)

    def log(self) -> str:
        return self.process.log_text()

    def stop(self) -> None:
        """Delete the pod: SIGTERM, then SIGKILL after the grace period (as the kubelet does)."""
        podman("stop", "--time", str(self.grace), self.container_name, check=False, timeout=60 + self.grace)
        podman("rm", "--force", "--ignore", self.container_name, check=False, timeout=60)
        self.process.stop(grace=5.0)


def run_pod(bed: KubeTestBed, deployment: Mapping[str, Any], workdir: Path) -> Pod:
    """Start one pod of `deployment` (as read from the API server) and return it once its container runs."""
    namespace = deployment["metadata"]["namespace"]
    pod_name = f"{deployment['metadata']['name']}-{secrets.token_hex(3)}"
    spec = deployment["spec"]["template"]["spec"]
    _only(f"pod of {pod_name}", spec, POD_FIELDS | IGNORED)
    (container,) = spec["containers"]
    _only(f"container {container['name']}", container, CONTAINER_FIELDS)
    security = {**spec.get("securityContext", {}), **container.get("securityContext", {})}
    _only(f"securityContext of {pod_name}", security, SECURITY_FIELDS)
    pod_dir = workdir / pod_name
    pod_dir.mkdir(parents=True)

    argv: list[str] = ["podman", "run", "--rm", "--name", f"apprafter-test-{os.getpid()}-{pod_name}",
                       "--timeout", "1800", "--pull", "never"]
    uid, gid = security.get("runAsUser"), security.get("runAsGroup")
    if security.get("runAsNonRoot") and not uid:
        pytest.fail(f"{pod_name}: runAsNonRoot without a runAsUser (the kubelet would check the image)")
    if uid is not None:
        argv += ["--user", f"{uid}:{gid if gid is not None else uid}"]
    if security.get("readOnlyRootFilesystem"):
        argv += ["--read-only", "--read-only-tmpfs=false"]
    if security.get("allowPrivilegeEscalation") is False:
        argv += ["--security-opt", "no-new-privileges"]
    for cap in security.get("capabilities", {}).get("drop", []):
        argv += ["--cap-drop", cap.lower()]
    memory = container.get("resources", {}).get("limits", {}).get("memory")
    if memory:
        argv += ["--memory", _size(memory)]

    for var in container.get("env", []):
        argv += ["--env", f"{var['name']}={_env_value(var, pod_name, namespace)}"]
    argv += _volumes(bed, spec, container, namespace, pod_dir)
    argv += _service_account(bed, spec, namespace, pod_dir)
    if container.get("command"):
        argv += ["--entrypoint", json.dumps(container["command"])]
    argv += [container["image"], *container.get("args", [])]
    process = ManagedProcess(f"pod {pod_name}", argv, pod_dir / "container.log", env=podman_env())
    return Pod(pod_name, namespace, container, process, argv[argv.index("--name") + 1],
               int(spec.get("terminationGracePeriodSeconds", 30)))


def _env_value(var: Mapping[str, Any], pod_name: str, namespace: str) -> str:
    if "value" in var:
        return str(var["value"])
    field = var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    known = {"metadata.name": pod_name, "metadata.namespace": namespace}
    if field not in known:
        pytest.fail(f"env {var['name']}: the kubelet stand-in does not resolve {var.get('valueFrom')}")
    return known[field]


def _volumes(bed: KubeTestBed, spec: Mapping[str, Any], container: Mapping[str, Any], namespace: str,
             pod_dir: Path) -> list[str]:
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    out: list[str] = []
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            size = volume["emptyDir"].get("sizeLimit")
            out += ["--tmpfs", f"{mount['mountPath']}:rw,mode=1777" + (f",size={_size(size)}" if size else "")]
        elif "secret" in volume:
            name = volume["secret"]["secretName"]
            secret = bed.get("v1", "Secret", name, namespace)
            if secret is None:  # the kubelet would keep the pod in ContainerCreating
                pytest.fail(f"secret {namespace}/{name} of volume {mount['name']} does not exist", pytrace=False)
            files = pod_dir / "volumes" / mount["name"]
            files.mkdir(parents=True)
            for key, value in secret.get("data", {}).items():
                (files / key).write_bytes(base64.b64decode(value))
                (files / key).chmod(0o644)  # the secret volume's defaultMode
            out += ["--volume", f"{files}:{mount['mountPath']}:ro"]
        else:
            pytest.fail(f"volume {mount['name']}: the kubelet stand-in mounts emptyDir and secret only")
    return out


def _service_account(bed: KubeTestBed, spec: Mapping[str, Any], namespace: str, pod_dir: Path) -> list[str]:
    """The projected service-account token the kubelet mounts (from the API server's TokenRequest), unless
    the pod or its ServiceAccount turns it off; and the in-cluster API address every pod gets."""
    account = spec.get("serviceAccountName", "default")
    sa = bed.get("v1", "ServiceAccount", account, namespace)
    if sa is None:
        pytest.fail(f"serviceaccount {namespace}/{account} does not exist", pytrace=False)
    mount = spec.get("automountServiceAccountToken", sa.get("automountServiceAccountToken", True))
    host, _, port = bed.url.removeprefix("https://").rpartition(":")
    out = ["--env", f"KUBERNETES_SERVICE_HOST={host}", "--env", f"KUBERNETES_SERVICE_PORT={port}"]
    if not mount:
        return out
    files = pod_dir / "serviceaccount"
    files.mkdir()
    (files / "token").write_text(service_account_token(bed, namespace, account))
    (files / "ca.crt").write_bytes(bed.ca_path.read_bytes())
    (files / "namespace").write_text(namespace)
    for f in files.iterdir():
        f.chmod(0o644)
    return [*out, "--volume", f"{files}:{SERVICE_ACCOUNT_DIR}:ro"]


def service_account_token(bed: KubeTestBed, namespace: str, account: str, seconds: int = 3600) -> str:
    """A real token of the ServiceAccount, made by the API server (TokenRequest), as the kubelet asks for it."""
    resp = bed.http.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
                         json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": {"expirationSeconds": seconds}})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["status"]["token"])


def as_token(bed: KubeTestBed, token: str) -> httpx.Client:
    """An API client authenticated with a bearer token (a ServiceAccount's)."""
    return httpx.Client(base_url=bed.url, verify=ssl_context(bed.ca_path), timeout=30,
                        headers={"Authorization": f"Bearer {token}"})
