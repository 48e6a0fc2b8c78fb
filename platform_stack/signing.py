"""Signs and verifies a pushed chart by digest with cosign v2's offline key-pair flow (no Rekor, no TUF)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from platform_stack.docker_config import docker_config_json
from platform_stack.errors import StackError, StackToolError
from platform_stack.oci import Reference, parse_reference
from platform_stack.proc import run
from platform_stack.registry import RegistryClient, connect
from renderer.imageref import is_loopback

__all__ = ["VerificationFailed", "resolve_digest", "sign", "verify", "verify_digest"]

COSIGN_TIMEOUT = 120.0
# An empty trusted root: trust nothing but the given key. Without it cosign v2.6 verify tries to fetch
# trusted_root.json from the public-good TUF CDN even with --offline (sigstore/cosign#4454, #4613).
EMPTY_TRUSTED_ROOT = {"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}


def _registry_flags(ref: Reference, plain_http: bool) -> list[str]:
    # cosign treats loopback as HTTP already; other hosts need the flag for plain HTTP.
    return ["--allow-http-registry=true"] if plain_http and not is_loopback(ref.host) else []


class VerificationFailed(StackError):
    """cosign did not verify a signature of the digest with the key; `reason` is cosign's own words."""

    def __init__(self, ref: str, reason: str) -> None:
        super().__init__(f"{ref}: verify: {reason}")
        self.reason = reason


def _cosign_reason(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.startswith("Error:")]
    return lines[0].removeprefix("Error:").strip()[:300] if lines else "cosign failed"


def _cosign_error(ref: str, stderr: bytes, action: str) -> StackError:
    return StackError(f"{ref}: {action}: {_cosign_reason(stderr)}")


def _key(path: Path, what: str) -> Path:
    if not path.is_file():
        raise StackError(f"{path}:1:1: --key: {what} not found")
    return path.resolve()


def _cosign(args: list[str], client: RegistryClient,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """cosign with the registry credential we use ourselves (a DOCKER_CONFIG of just that host), else none."""
    with tempfile.TemporaryDirectory(prefix="apprafter-cosign-auth-") as config_dir:
        if client.credential is not None:
            (Path(config_dir) / "config.json").write_bytes(docker_config_json(client.host, client.credential))
        return run("cosign", args, env={**(env or {}), "DOCKER_CONFIG": config_dir}, timeout=COSIGN_TIMEOUT)


def sign(reference: str, key: Path, password: str, plain_http: bool = False) -> Reference:
    """Sign `host/repo@sha256:…`; the signature lands as tag sha256-<hex>.sig in the same repository."""
    ref = parse_reference(reference)
    plain_http = plain_http or is_loopback(ref.host)
    target = ref.by_digest()
    key = _key(key, "private key")
    client = connect(ref.host, plain_http)
    client.check()
    if client.manifest(ref.repository, ref.digest or "") is None:
        raise StackError(f"{ref.oci()}: sign: no such manifest in the registry")
    proc = _cosign(["sign", "--yes", "--key", str(key), "--tlog-upload=false", *_registry_flags(ref, plain_http),
                    target], client, {"COSIGN_PASSWORD": password})
    if proc.returncode != 0:
        raise _cosign_error(ref.oci(), proc.stderr, "sign")
    return ref


def resolve_digest(ref: Reference, client: RegistryClient) -> Reference:
    """Pin a tag to the digest it names now; with both tag and digest, fail if the tag has moved."""
    client.check()
    if ref.tag is None:
        return ref
    found = client.manifest(ref.repository, ref.tag)
    if found is None:
        raise StackError(f"{ref.oci()}: verify: tag {ref.tag} not found")
    if ref.digest and found[0] != ref.digest:
        raise StackError(f"{ref.oci()}: verify: tag {ref.tag} has moved to {found[0]}")
    return Reference(ref.host, ref.repository, ref.tag, found[0])


def verify_digest(ref: Reference, public_key: Path, client: RegistryClient,
                  plain_http: bool = False) -> list[dict[str, Any]]:
    """Verify the cosign signature of `ref`'s digest against `public_key`, reading the registry with `client`'s
    credential; the signature payloads. VerificationFailed with cosign's reason when it does not verify."""
    target = ref.by_digest()
    with tempfile.TemporaryDirectory(prefix="apprafter-cosign-") as tmp:
        root = Path(tmp) / "trusted_root.json"
        root.write_text(json.dumps(EMPTY_TRUSTED_ROOT))
        proc = _cosign(["verify", "--key", str(public_key), "--insecure-ignore-tlog=true", "--offline=true",
                        "--trusted-root", str(root), *_registry_flags(ref, plain_http), target], client)
    if proc.returncode != 0:
        raise VerificationFailed(ref.oci(), _cosign_reason(proc.stderr))
    try:
        payloads = json.loads(proc.stdout)
    except (json.JSONDecodeError, RecursionError):
        payloads = None
    if not isinstance(payloads, list) or not payloads or not all(isinstance(p, dict) for p in payloads):
        raise StackToolError(f"{ref.oci()}: verify: cosign printed no signature payload (fail closed)")
    for payload in payloads:
        critical = payload.get("critical")
        image = critical.get("image") if isinstance(critical, dict) else None
        signed = image.get("docker-manifest-digest") if isinstance(image, dict) else None
        if signed != ref.digest:
            raise VerificationFailed(ref.oci(), f"signature is for {str(signed)[:80]}, not {ref.digest}")
    return payloads


def verify(reference: str, public_key: Path,
           plain_http: bool = False) -> tuple[Reference, list[dict[str, Any]]]:
    """Verify the cosign signature of `reference` against `public_key`; returns the digest and payloads."""
    parsed = parse_reference(reference)
    plain_http = plain_http or is_loopback(parsed.host)
    client = connect(parsed.host, plain_http)
    ref = resolve_digest(parsed, client)
    return ref, verify_digest(ref, _key(public_key, "public key"), client, plain_http)
