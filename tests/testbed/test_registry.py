"""The loopback OCI registry stores artifacts and serves the same bytes back (OCI distribution API, oras)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import oras.client
import pytest

pytestmark = pytest.mark.testbed


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _push_blob(base: str, repo: str, data: bytes) -> str:
    start = httpx.post(f"{base}/v2/{repo}/blobs/uploads/", timeout=10)
    assert start.status_code == 202, start.text
    location = start.headers["Location"]
    if location.startswith("/"):
        location = base + location
    sep = "&" if "?" in location else "?"
    done = httpx.put(
        f"{location}{sep}digest={_digest(data)}",
        content=data,
        timeout=10,
        headers={"Content-Type": "application/octet-stream"},
    )
    assert done.status_code == 201, done.text
    return _digest(data)


def test_registry_listens_on_loopback_only(oci_registry):
    assert oci_registry.host == "127.0.0.1"
    assert oci_registry.url == f"127.0.0.1:{oci_registry.port}"
    assert httpx.get(oci_registry.base_url + "/v2/", timeout=5).status_code == 200


def test_registry_stores_an_artifact_and_serves_the_same_bytes(oci_registry):
    base, repo = oci_registry.base_url, "apprafter/testbed-artifact"
    layer = b"apiVersion: v2\nname: platform-stack\nversion: 0.1.0\n" * 50
    config = b"{}"
    layer_digest, config_digest = _push_blob(base, repo, layer), _push_blob(base, repo, config)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": "application/vnd.apprafter.testbed.v1",
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": config_digest, "size": 2},
            "layers": [
                {
                    "mediaType": "application/vnd.apprafter.testbed.layer.v1",
                    "digest": layer_digest,
                    "size": len(layer),
                }
            ],
        },
        separators=(",", ":"),
    ).encode()
    put = httpx.put(
        f"{base}/v2/{repo}/manifests/0.1.0",
        content=manifest,
        timeout=10,
        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
    )
    assert put.status_code == 201, put.text
    assert put.headers["Docker-Content-Digest"] == _digest(manifest)

    got = httpx.get(
        f"{base}/v2/{repo}/manifests/0.1.0",
        timeout=10,
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    assert got.status_code == 200
    assert got.content == manifest
    assert got.headers["Docker-Content-Digest"] == _digest(manifest)
    blob = httpx.get(f"{base}/v2/{repo}/blobs/{layer_digest}", timeout=10, follow_redirects=True)
    assert blob.status_code == 200 and blob.content == layer
    tags = httpx.get(f"{base}/v2/{repo}/tags/list", timeout=10).json()
    assert "0.1.0" in tags["tags"]
    missing = httpx.get(f"{base}/v2/{repo}/manifests/9.9.9", timeout=10)
    assert missing.status_code == 404


def test_oras_push_and_pull_round_trip(oci_registry, tmp_path: Path):
    src = tmp_path / "chart.tgz"
    src.write_bytes(bytes(range(256)) * 64)
    client = oras.client.OrasClient(hostname=oci_registry.url, insecure=True)
    ref = oci_registry.ref("apprafter/oras-roundtrip", "1.2.3")
    resp = client.push(target=ref, files=[str(src)], disable_path_validation=True)
    assert resp.status_code in (200, 201)
    out = tmp_path / "pulled"
    pulled = client.pull(target=ref, outdir=str(out))
    assert len(pulled) == 1
    assert Path(pulled[0]).read_bytes() == src.read_bytes()
