"""Signs and verifies a pushed chart by digest with cosign v2's offline key-pair flow (no Rekor, no TUF)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from platform_stack.errors import StackError
from platform_stack.oci import Reference, is_loopback, parse_reference, probe, remote_manifest
from platform_stack.proc import run

COSIGN_TIMEOUT = 120.0
# An empty trusted root: trust nothing but the given key. Without it cosign v2.6 verify tries to fetch
# trusted_root.json from the public-good TUF CDN even with --offline (sigstore/cosign#4454, #4613).
EMPTY_TRUSTED_ROOT = {"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}


def _registry_flags(ref: Reference, plain_http: bool) -> list[str]:
    # cosign treats loopback as HTTP already; other hosts need the flag for plain HTTP.
    return ["--allow-http-registry=true"] if plain_http and not is_loopback(ref.host) else []


def _cosign_error(ref: str, stderr: bytes, action: str) -> StackError:
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.startswith("Error:")]
    why = lines[0].removeprefix("Error:").strip() if lines else "cosign failed"
    return StackError(f"{ref}: {action}: {why}")


def _key(path: Path, what: str) -> Path:
    if not path.is_file():
        raise StackError(f"{path}:1:1: --key: {what} not found")
    return path.resolve()


def sign(reference: str, key: Path, password: str, plain_http: bool = False) -> Reference:
    """Sign `host/repo@sha256:…`; the signature lands as tag sha256-<hex>.sig in the same repository."""
    ref = parse_reference(reference)
    plain_http = plain_http or is_loopback(ref.host)
    target = ref.by_digest()
    key = _key(key, "private key")
    probe(ref, plain_http)
    if remote_manifest(ref, ref.digest or "", plain_http) is None:
        raise StackError(f"{reference}: sign: no such manifest in the registry")
    proc = run("cosign", ["sign", "--yes", "--key", str(key), "--tlog-upload=false",
                          *_registry_flags(ref, plain_http), target],
               env={"COSIGN_PASSWORD": password}, timeout=COSIGN_TIMEOUT)
    if proc.returncode != 0:
        raise _cosign_error(reference, proc.stderr, "sign")
    return ref


def resolve_digest(ref: Reference, plain_http: bool) -> Reference:
    """Pin a tag to the digest it names now; with both tag and digest, fail if the tag has moved."""
    probe(ref, plain_http)
    if ref.tag is None:
        return ref
    found = remote_manifest(ref, ref.tag, plain_http)
    if found is None:
        raise StackError(f"{ref.oci()}: verify: tag {ref.tag} not found")
    if ref.digest and found[0] != ref.digest:
        raise StackError(f"{ref.oci()}: verify: tag {ref.tag} has moved to {found[0]}")
    return Reference(ref.host, ref.repository, ref.tag, found[0])


def verify(reference: str, public_key: Path,
           plain_http: bool = False) -> tuple[Reference, list[dict[str, Any]]]:
    """Verify the cosign signature of `reference` against `public_key`; returns the digest and payloads."""
    parsed = parse_reference(reference)
    plain_http = plain_http or is_loopback(parsed.host)
    ref = resolve_digest(parsed, plain_http)
    target = ref.by_digest()
    public_key = _key(public_key, "public key")
    with tempfile.TemporaryDirectory(prefix="apprafter-cosign-") as tmp:
        root = Path(tmp) / "trusted_root.json"
        root.write_text(json.dumps(EMPTY_TRUSTED_ROOT))
        proc = run("cosign", ["verify", "--key", str(public_key), "--insecure-ignore-tlog=true",
                              "--offline=true", "--trusted-root", str(root),
                              *_registry_flags(ref, plain_http), target],
                   timeout=COSIGN_TIMEOUT)
    if proc.returncode != 0:
        raise _cosign_error(ref.oci(), proc.stderr, "verify")
    try:
        payloads: list[dict[str, Any]] = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise StackError(f"{ref.oci()}: verify: cosign printed no signature payload") from exc
    for payload in payloads:
        signed = payload.get("critical", {}).get("image", {}).get("docker-manifest-digest")
        if signed != ref.digest:
            raise StackError(f"{ref.oci()}: verify: signature is for {signed}, not {ref.digest}")
    return ref, payloads
