"""Pushes a chart .tgz to an OCI registry exactly as Helm lays it out, refusing to move an existing tag."""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from platform_stack.errors import StackError, StackToolError
from platform_stack.registry import connect
from platform_stack.tarball import MAX_ARCHIVE_BYTES, read_chart_files
from renderer import userfile
from renderer.imageref import parse_image
from renderer.yaml_input import parse

__all__ = ["ChartArchive", "PushResult", "Reference", "parse_reference", "push", "read_archive"]

CONFIG_MEDIA_TYPE = "application/vnd.cncf.helm.config.v1+json"
CHART_LAYER_MEDIA_TYPE = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


@dataclass(frozen=True)
class Reference:
    """host/repository plus a tag and/or a digest."""

    host: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    def by_digest(self) -> str:
        """`host/repo@sha256:...` (what cosign signs and verifies)."""
        if not self.digest:
            raise StackError(f"{self.host}/{self.repository}: reference: a digest (@sha256:...) is required")
        return f"{self.host}/{self.repository}@{self.digest}"

    def oci(self) -> str:
        """`oci://host/repo[:tag][@digest]`."""
        tail = (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")
        return f"oci://{self.host}/{self.repository}{tail}"


def parse_reference(text: str) -> Reference:
    """Parse `[oci://]host[:port]/path[:tag][@sha256:hex]` (renderer.imageref's grammar, a registry host
    required); a bad reference is the user's error. Credentials in it (`oci://user:password@host/...`) are
    refused without printing them."""
    bare = text.strip().removeprefix("oci://")
    authority = bare.split("/", 1)[0]
    if "@" in authority:
        host = authority.rsplit("@", 1)[1]
        raise StackError(f"oci://***@{host}/...: reference: credentials do not belong in a reference; log in with "
                         f"`docker login {host}` or `helm registry login {host}` (read from DOCKER_CONFIG, "
                         "~/.docker/config.json or Helm's registry/config.json)")
    parsed = parse_image(bare)
    if parsed is None or parsed.domain is None:
        raise StackError(f"{text.strip()[:200]}: reference: expected [oci://]host[:port]/repository[:tag]"
                         "[@sha256:<hex>]")
    return Reference(parsed.domain, parsed.path, parsed.tag, parsed.digest)


@dataclass(frozen=True)
class ChartArchive:
    """What push needs from a chart .tgz: its bytes, Chart.yaml metadata and the entries' fixed mtime."""

    path: Path
    data: bytes
    metadata: dict[str, Any]
    mtime: int

    @property
    def name(self) -> str:
        return str(self.metadata["name"])

    @property
    def version(self) -> str:
        return str(self.metadata["version"])

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def read_archive(path: Path) -> ChartArchive:
    """Open a chart .tgz (within Helm's limits) and read `<name>/Chart.yaml`; a non-chart is the user's error."""
    files = read_chart_files(path, ("Chart.yaml",))
    if "Chart.yaml" not in files.files:
        raise StackError(f"{path}:1:1: chart: no {files.top}/Chart.yaml in the archive")
    meta = parse(files.files["Chart.yaml"], f"{path}!/{files.top}/Chart.yaml")
    if not isinstance(meta.data, dict):
        raise meta.error((), "Chart.yaml is a mapping (name, version, ...)")
    for key in ("name", "version"):
        if not isinstance(meta.data.get(key), str) or not meta.data[key]:
            raise meta.error((key,), "required: a non-empty string")
    data = userfile.read_bytes(path, max_bytes=MAX_ARCHIVE_BYTES, what="the chart archive")
    return ChartArchive(path, data, meta.data, files.mtime)


def manifest_annotations(archive: ChartArchive) -> dict[str, str]:
    """The annotations helm's pusher sets, with `created` pinned to the archive's fixed mtime."""
    meta = archive.metadata
    created = datetime.fromtimestamp(archive.mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    annotations.update({
        "org.opencontainers.image.title": archive.name,
        "org.opencontainers.image.version": archive.version,
        "org.opencontainers.image.created": created,
    })
    if meta.get("description"):
        annotations["org.opencontainers.image.description"] = str(meta["description"])
    if meta.get("home"):
        annotations["org.opencontainers.image.url"] = str(meta["home"])
    if meta.get("sources"):
        annotations["org.opencontainers.image.source"] = str(meta["sources"][0])
    return annotations


def config_json(archive: ChartArchive) -> bytes:
    """The Helm config blob: Chart.yaml metadata as compact JSON with sorted keys."""
    return json.dumps(archive.metadata, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class PushResult:
    """Where the chart went: the repository reference, its tag and the registry's manifest digest."""

    reference: Reference
    digest: str
    created: bool  # False when the identical artifact was already there


def push(archive: ChartArchive, to: str, plain_http: bool) -> PushResult:
    """Push to `<to>/<chart-name>:<version>` (helm's convention); same content again is a no-op."""
    base = parse_reference(to)
    if base.tag or base.digest:
        raise StackError(f"{base.oci()}: --to: give the repository namespace only; the tag is the chart version")
    tag = archive.version.replace("+", "_")
    ref = Reference(base.host, f"{base.repository}/{archive.name}", tag)
    client = connect(ref.host, plain_http)
    client.check()
    config = config_json(archive)
    layer_digest = "sha256:" + archive.sha256
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    existing = client.manifest(ref.repository, tag)
    if existing is not None:
        digest, manifest = existing
        layers = [layer["digest"] for layer in manifest["layers"]]
        if layers == [layer_digest] and manifest["config"]["digest"] == config_digest:
            return PushResult(Reference(ref.host, ref.repository, tag, digest), digest, created=False)
        raise StackError(f"{archive.path}:1:1: push: tag {ref.oci()} already exists with digest {digest} and "
                         "different content; tags are immutable, bump the chart version")
    with tempfile.TemporaryDirectory(prefix="apprafter-push-") as tmp:
        layer = Path(tmp) / archive.path.name
        layer.write_bytes(archive.data)
        config_path = Path(tmp) / "config.json"
        config_path.write_bytes(config)  # must exist: oras-py silently uses {} for a missing config path
        client.push_artifact(f"{ref.host}/{ref.repository}:{ref.tag}", [f"{layer}:{CHART_LAYER_MEDIA_TYPE}"],
                             f"{config_path}:{CONFIG_MEDIA_TYPE}", manifest_annotations(archive))
    pushed = client.manifest(ref.repository, tag)
    if pushed is None:
        raise StackToolError(f"registry {ref.host}: tag {tag} missing right after the push: retry")
    return PushResult(Reference(ref.host, ref.repository, tag, pushed[0]), pushed[0], created=True)
