"""`vault server -dev` on loopback, standing in for OpenBao: OpenBao's own server is not served by the Go module
proxy here, and OpenBao (a fork of Vault 1.14) keeps Vault's HTTP API for what the operator uses — KV v2 reads
(`GET /v1/<mount>/data/<path>`, `X-Vault-Token`) and the Kubernetes auth method (`POST /v1/auth/kubernetes/login`).
The dev server is in memory, unsealed, with KV v2 at `secret/` and a root token the test chooses; the helpers here
write secrets, policies, tokens and the Kubernetes auth configuration through the same API with that root token."""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path
from typing import Any

import httpx

from tests.testbed.procs import ManagedProcess, free_port, tool, wait_for

OPERATOR_POLICY = "apprafter-operator"


@dataclasses.dataclass
class DevVault:
    """A running dev server: `url`, its root token (the test's only; the operator never gets it), its process."""

    url: str
    root_token: str
    process: ManagedProcess
    workdir: Path

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One root-token request; the reply's JSON ({} for 204)."""
        resp = httpx.request(method, f"{self.url}/v1/{path}", json=body, timeout=10,
                             headers={"X-Vault-Token": self.root_token})
        if resp.status_code >= 400:
            raise AssertionError(f"vault {method} /v1/{path}: HTTP {resp.status_code}: {resp.text[:300]}")
        return resp.json() if resp.content else {}

    def put(self, path: str, data: dict[str, str], mount: str = "secret") -> int:
        """Write a new version of KV v2 secret `path` (as `bao kv put mount/path k=v`); its version number."""
        version: int = self.api("POST", f"{mount}/data/{path}", {"data": data})["data"]["version"]
        return version

    def delete_latest(self, path: str, mount: str = "secret") -> None:
        """Soft-delete the current version (as `bao kv delete`)."""
        self.api("DELETE", f"{mount}/data/{path}")

    def policy(self, name: str, hcl: str) -> None:
        self.api("PUT", f"sys/policies/acl/{name}", {"policy": hcl})

    def token(self, policies: list[str], ttl: str = "1h") -> str:
        """A new client token with these policies (not root)."""
        token: str = self.api("POST", "auth/token/create", {"policies": policies, "ttl": ttl})["auth"]["client_token"]
        return token

    def kubernetes_auth(self, host: str, ca_pem: str, reviewer_jwt: str, role: str, service_account: str,
                        namespace: str, policies: list[str], token_ttl: str) -> None:
        """Enable the Kubernetes auth method at auth/kubernetes against API server `host` (it checks each login's
        ServiceAccount token with a TokenReview, authenticated by `reviewer_jwt`) and a role bound to one
        ServiceAccount."""
        self.api("POST", "sys/auth/kubernetes", {"type": "kubernetes"})
        self.api("POST", "auth/kubernetes/config", {"kubernetes_host": host, "kubernetes_ca_cert": ca_pem,
                                                    "token_reviewer_jwt": reviewer_jwt,
                                                    "disable_local_ca_jwt": True})
        self.api("POST", f"auth/kubernetes/role/{role}", {
            "bound_service_account_names": [service_account], "bound_service_account_namespaces": [namespace],
            "token_policies": policies, "token_ttl": token_ttl, "token_max_ttl": token_ttl})

    def audit_to(self, path: Path) -> Path:
        """Every request and reply into `path` (a file audit device: tokens and values HMAC'd, as by default)."""
        self.api("PUT", "sys/audit/file", {"type": "file", "options": {"file_path": str(path)}})
        return path

    def stop(self) -> None:
        self.process.stop()


def start_vault(workdir: Path) -> DevVault:
    """`vault server -dev` on 127.0.0.1, a fresh root token, the token helper off (nothing written to HOME)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    root = f"root-{secrets.token_hex(12)}"
    argv: list[str | Path] = [tool("vault"), "server", "-dev", f"-dev-listen-address=127.0.0.1:{port}",
                              f"-dev-root-token-id={root}", "-dev-no-store-token"]
    env = {"HOME": str(workdir), "PATH": "/usr/bin:/bin", "VAULT_DISABLE_MLOCK": "true"}
    process = ManagedProcess("vault", argv, workdir / "vault.log", env=env, cwd=workdir)
    vault = DevVault(f"http://127.0.0.1:{port}", root, process, workdir)
    wait_for("vault to be unsealed", lambda: httpx.get(f"{vault.url}/v1/sys/health", timeout=2).status_code == 200
             or None, 60, process)
    return vault
