"""The real SealedSecrets controller (bitnami sealed-secrets, SEALED_SECRETS_VERSION, built by the set-up) against the
test bed's API server: its CRD from the same module, the controller as a process on 127.0.0.1 with its sealing key
in `key_namespace`, and its certificate as `kubeseal --fetch-cert` serves it.

The controller only takes the in-cluster config (rest.InClusterConfig: KUBERNETES_SERVICE_HOST/PORT and the token and
CA at /var/run/secrets/kubernetes.io/serviceaccount), as it runs in a pod. It runs unmodified in a mount namespace of
its own (unshare) where a tmpfs over /run holds the bed's token and CA there; the host's /run is untouched."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.testbed.crds import sealed_secret_crd
from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import ManagedProcess, free_port, system_tool, tool, wait_for

__all__ = ["SealedSecrets", "start_sealed_secrets"]

SERVICE_ACCOUNT = "/run/secrets/kubernetes.io/serviceaccount"
# in the controller's own mount namespace: a private /run holding the bed's token and CA where a pod has them
_MOUNT_AND_RUN = (f'mount -t tmpfs -o size=1m,mode=0755 apprafter-sealed "$(readlink -f /var/run)" && '
                  f'mkdir -p {SERVICE_ACCOUNT} && cp "$1" {SERVICE_ACCOUNT}/token && cp "$2" {SERVICE_ACCOUNT}/ca.crt'
                  ' && shift 2 && exec "$@"')


class SealedSecrets:
    """A running controller: `cert_url` (GET /v1/cert.pem, as kubeseal --cert takes it), `cert_pem`, its log."""

    def __init__(self, process: ManagedProcess, port: int, key_namespace: str, cert_pem: bytes) -> None:
        self.process = process
        self.port = port
        self.key_namespace = key_namespace
        self.cert_pem = cert_pem

    @property
    def cert_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/cert.pem"

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def stop(self) -> None:
        self.process.stop()


def crd_path() -> Path:
    """The SealedSecret CRD the set-up keeps beside the controller (helm/sealed-secrets/crds/ of the module)."""
    tool("sealed-secrets-controller")  # a missing tool fails the test with the set-up's remedy
    return sealed_secret_crd()


def _cert(port: int) -> bytes | None:
    resp = httpx.get(f"http://127.0.0.1:{port}/v1/cert.pem", timeout=5)
    return resp.content if resp.status_code == 200 and b"BEGIN CERTIFICATE" in resp.content else None


def start_sealed_secrets(bed: KubeTestBed, workdir: Path, key_namespace: str = "kube-system",
                         timeout: float = 120.0) -> SealedSecrets:
    """The CRD installed, the controller started (key renewal off) and serving its certificate."""
    workdir.mkdir(parents=True, exist_ok=True)
    bed.install_crds([crd_path()])
    bed.ensure_namespace(key_namespace)
    token = workdir / "token"
    token.write_text(bed.token)
    token.chmod(0o600)
    ca = workdir / "ca.crt"
    shutil.copyfile(bed.ca_path, ca)
    api = urlsplit(bed.url)
    port, metrics = free_port(), free_port()
    argv = [system_tool("unshare", "util-linux (apt-get install util-linux)"), "--mount", "--propagation",
            "private", "--", "sh", "-c", _MOUNT_AND_RUN, "sealed-secrets", str(token), str(ca),
            str(tool("sealed-secrets-controller")), f"--listen-addr=127.0.0.1:{port}",
            f"--listen-metrics-addr=127.0.0.1:{metrics}", "--key-renew-period=0", "--update-status=true"]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "KUBERNETES_SERVICE_HOST": str(api.hostname),
           "KUBERNETES_SERVICE_PORT": str(api.port), "POD_NAMESPACE": key_namespace}
    process = ManagedProcess("sealed-secrets-controller", argv, workdir / "sealed-secrets-controller.log", env=env)
    try:
        pem = wait_for("the SealedSecrets controller's certificate", lambda: _cert(port), timeout, process,
                       interval=0.2)
    except BaseException:
        process.stop()
        raise
    return SealedSecrets(process, port, key_namespace, pem)
