"""Push, pull, sign and verify against the loopback test-bed registry with the real helm and cosign."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from platform_stack.oci import CHART_LAYER_MEDIA_TYPE, CONFIG_MEDIA_TYPE
from platform_stack.registry import MANIFEST_MEDIA_TYPE
from tests.platform_stack.conftest import EPOCH, built_tgz, cli, helm, ok
from tests.renderer.helpers import REPO

pytestmark = pytest.mark.testbed
KeyPair = Callable[[str], tuple[Path, Path, str]]


def manifest(registry: Any, repository: str, reference: str) -> tuple[str, dict[str, Any]]:
    resp = httpx.get(
        f"{registry.base_url}/v2/{repository}/manifests/{reference}",
        headers={"Accept": MANIFEST_MEDIA_TYPE},
        timeout=10,
    )
    resp.raise_for_status()
    return resp.headers["Docker-Content-Digest"], resp.json()


def push(tgz: Path, registry: Any, namespace: str) -> str:
    return ok(
        cli("stack", "push", str(tgz), "--to", f"oci://{registry.url}/{namespace}", "--plain-http")
    ).strip()


def test_push_then_helm_pull_returns_the_same_bytes(
    stack_all: Path, oci_registry: Any, tmp_path: Path
) -> None:
    ref = push(stack_all, oci_registry, "pull")
    version = stack_all.stem.rsplit("-", 1)[1]
    assert ref.startswith(f"oci://{oci_registry.url}/pull/platform-stack:{version}@sha256:")
    digest, man = manifest(oci_registry, "pull/platform-stack", version)
    assert ref.endswith(digest)
    assert man["config"]["mediaType"] == CONFIG_MEDIA_TYPE
    assert [layer["mediaType"] for layer in man["layers"]] == [CHART_LAYER_MEDIA_TYPE]
    assert man["layers"][0]["digest"] == "sha256:" + hashlib.sha256(stack_all.read_bytes()).hexdigest()
    created = datetime.fromtimestamp(int(EPOCH), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert man["annotations"]["org.opencontainers.image.created"] == created
    pulled = helm(
        "pull",
        f"oci://{oci_registry.url}/pull/platform-stack",
        "--version",
        version,
        "--plain-http",
        "--destination",
        str(tmp_path),
    )
    assert digest in ok(pulled) + pulled.stderr
    assert (tmp_path / stack_all.name).read_bytes() == stack_all.read_bytes()


def test_pushing_the_same_chart_again_is_a_no_op(stack_all: Path, oci_registry: Any) -> None:
    first = push(stack_all, oci_registry, "again")
    assert push(stack_all, oci_registry, "again") == first


def test_a_tag_is_never_moved_to_different_content(
    stack_all: Path, oci_registry: Any, tmp_path: Path
) -> None:
    first = push(stack_all, oci_registry, "immutable")
    built = ok(cli("stack", "build", "--out", str(tmp_path), env={"SOURCE_DATE_EPOCH": "1700000001"}))
    other = Path(built.split("  ")[1].strip())
    assert other.read_bytes() != stack_all.read_bytes()
    proc = cli("stack", "push", str(other), "--to", f"oci://{oci_registry.url}/immutable", "--plain-http")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "already exists with digest" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    version = stack_all.stem.rsplit("-", 1)[1]
    assert first.endswith(manifest(oci_registry, "immutable/platform-stack", version)[0])


def test_push_to_a_registry_that_is_down_is_a_tool_error(stack_all: Path) -> None:
    proc = cli("stack", "push", str(stack_all), "--to", "oci://127.0.0.1:9/x", "--plain-http")
    assert proc.returncode == 2 and proc.stdout == "" and "unreachable" in proc.stderr


def test_sign_then_verify_and_the_wrong_key_fails(
    stack_all: Path, oci_registry: Any, key_pair: KeyPair
) -> None:
    key, pub, password = key_pair("release")
    _, other_pub, _ = key_pair("intruder")
    ref = push(stack_all, oci_registry, "signed")
    by_digest = ref.replace(":" + stack_all.stem.rsplit("-", 1)[1] + "@", "@")
    signed = cli("stack", "sign", by_digest, "--key", str(key), env={"COSIGN_PASSWORD": password})
    assert password not in ok(signed) + signed.stderr
    assert ok(cli("stack", "verify", by_digest, "--key", str(pub))).strip() == f"verified {by_digest}"
    assert ok(cli("stack", "verify", ref, "--key", str(pub))).strip() == f"verified {ref}"
    wrong = cli("stack", "verify", by_digest, "--key", str(other_pub))
    assert wrong.returncode == 1 and wrong.stdout == ""
    assert "verify: no matching signatures" in wrong.stderr


def test_sign_with_a_wrong_password_fails_without_echoing_it(
    stack_all: Path, oci_registry: Any, key_pair: KeyPair
) -> None:
    key, _, _ = key_pair("release")
    ref = push(stack_all, oci_registry, "badpw").split(":", 2)
    by_digest = ref[0] + ":" + ref[1] + "@" + ref[2].split("@")[1]
    proc = cli("stack", "sign", by_digest, "--key", str(key), env={"COSIGN_PASSWORD": "not-the-password-xyz"})
    assert proc.returncode == 1 and "not-the-password-xyz" not in proc.stderr + proc.stdout


def test_signing_requires_a_digest(stack_all: Path, oci_registry: Any, key_pair: KeyPair) -> None:
    key, _, password = key_pair("release")
    proc = cli(
        "stack",
        "sign",
        f"oci://{oci_registry.url}/x/platform-stack:0.2.0",
        "--key",
        str(key),
        env={"COSIGN_PASSWORD": password},
    )
    assert proc.returncode == 1 and "a digest (@sha256:...) is required" in proc.stderr


def test_verify_fails_after_the_tag_is_moved(oci_registry: Any, key_pair: KeyPair, tmp_path: Path) -> None:
    key, pub, password = key_pair("release")
    good = built_tgz(tmp_path / "good")
    ref = ok(
        cli(
            "stack",
            "release",
            "--out",
            str(tmp_path / "rel"),
            "--to",
            f"oci://{oci_registry.url}/moved",
            "--key",
            str(key),
            "--plain-http",
            env={"COSIGN_PASSWORD": password},
        )
    ).splitlines()[-1]
    assert ok(cli("stack", "verify", ref, "--key", str(pub)))
    version = good.stem.rsplit("-", 1)[1]
    # Someone moves the tag with another client (our push refuses to): same version, different bytes.
    evil = tmp_path / "evil.tgz"
    with tarfile.open(evil, "w:gz") as tar:
        extra = tmp_path / "x.txt"
        extra.write_text("tampered\n")
        tar.add(extra, arcname="platform-stack/x.txt")
    _raw_push(oci_registry, "moved/platform-stack", version, evil.read_bytes())
    moved = cli("stack", "verify", ref, "--key", str(pub))  # tag@digest: the tag no longer points there
    assert moved.returncode == 1 and "has moved to" in moved.stderr
    tag_only = ref.split("@")[0]
    unsigned = cli("stack", "verify", tag_only, "--key", str(pub))  # the tag's new content is unsigned
    assert unsigned.returncode == 1 and unsigned.stdout == ""


def _raw_push(registry: Any, repository: str, tag: str, layer: bytes) -> None:
    base = f"{registry.base_url}/v2/{repository}"
    config = json.dumps({"name": "platform-stack", "version": tag}).encode()
    with httpx.Client(timeout=10) as client:
        for blob in (layer, config):
            digest = "sha256:" + hashlib.sha256(blob).hexdigest()
            start = client.post(f"{base}/blobs/uploads/")
            location = start.headers["Location"]
            url = location if location.startswith("http") else registry.base_url + location
            sep = "&" if "?" in url else "?"
            client.put(
                f"{url}{sep}digest={digest}",
                content=blob,
                headers={"Content-Type": "application/octet-stream"},
            ).raise_for_status()
        body = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {
                "mediaType": CONFIG_MEDIA_TYPE,
                "size": len(config),
                "digest": "sha256:" + hashlib.sha256(config).hexdigest(),
            },
            "layers": [
                {
                    "mediaType": CHART_LAYER_MEDIA_TYPE,
                    "size": len(layer),
                    "digest": "sha256:" + hashlib.sha256(layer).hexdigest(),
                }
            ],
        }
        client.put(
            f"{base}/manifests/{tag}",
            content=json.dumps(body).encode(),
            headers={"Content-Type": MANIFEST_MEDIA_TYPE},
        ).raise_for_status()


def test_release_runs_every_step_and_prints_tgz_and_reference(
    oci_registry: Any, key_pair: KeyPair, tmp_path: Path
) -> None:
    key, pub, password = key_pair("release")
    proc = cli(
        "stack",
        "release",
        "--tier",
        "dev",
        "--out",
        str(tmp_path),
        "--to",
        f"oci://{oci_registry.url}/rel",
        "--key",
        str(key),
        "--public-key",
        str(pub),
        "--plain-http",
        env={"COSIGN_PASSWORD": password},
    )
    sha_line, ref = ok(proc).splitlines()
    sha, tgz = sha_line.split("  ")
    assert hashlib.sha256(Path(tgz).read_bytes()).hexdigest() == sha
    assert ref.startswith(f"oci://{oci_registry.url}/rel/platform-stack-dev:")
    for step in ("built", "helm lint and template passed", "pushed", "signed", "verified"):
        assert step in proc.stderr


def test_release_fails_closed_when_verification_fails(
    oci_registry: Any, key_pair: KeyPair, tmp_path: Path
) -> None:
    key, _, password = key_pair("release")
    _, other_pub, _ = key_pair("intruder")
    proc = cli(
        "stack",
        "release",
        "--tier",
        "solo",
        "--out",
        str(tmp_path),
        "--to",
        f"oci://{oci_registry.url}/relbad",
        "--key",
        str(key),
        "--public-key",
        str(other_pub),
        "--plain-http",
        env={"COSIGN_PASSWORD": password},
    )
    assert proc.returncode == 1 and proc.stdout == "" and "verify:" in proc.stderr


def test_password_env_must_be_set(stack_all: Path, key_pair: KeyPair) -> None:
    key, _, _ = key_pair("release")
    env = {k: v for k, v in os.environ.items() if k != "COSIGN_PASSWORD"}
    proc = cli(
        "stack",
        "sign",
        "127.0.0.1:1/x@sha256:" + "0" * 64,
        "--key",
        str(key),
        "--password-env",
        "NO_SUCH_VAR_FOR_TEST",
        env=env,
    )
    assert proc.returncode == 1 and "NO_SUCH_VAR_FOR_TEST is not set" in proc.stderr


DEVELOPMENT_KEY = REPO / "tests" / "fixtures" / "keys" / "apprafter-development.key"
DEVELOPMENT_PUB = REPO / "deploy" / "keys" / "apprafter-development.pub"
DEVELOPMENT_PASSWORD = "apprafter-development"  # not a secret: deploy/keys/README.md


def test_the_shipped_development_public_key_verifies_what_the_development_key_signs(
    stack_all: Path, oci_registry: Any, key_pair: KeyPair
) -> None:
    """deploy/keys/apprafter-development.pub is the public half of the development key (test registries only)."""
    ref = push(stack_all, oci_registry, "development")
    by_digest = ref.replace(":" + stack_all.stem.rsplit("-", 1)[1] + "@", "@")
    ok(cli("stack", "sign", by_digest, "--key", str(DEVELOPMENT_KEY), env={"COSIGN_PASSWORD": DEVELOPMENT_PASSWORD}))
    assert ok(cli("stack", "verify", by_digest, "--key", str(DEVELOPMENT_PUB))).strip() == f"verified {by_digest}"
    _, other_pub, _ = key_pair("not-development")
    assert cli("stack", "verify", by_digest, "--key", str(other_pub)).returncode == 1
