"""Pushes a chart .tgz to an OCI registry exactly as Helm lays it out, refusing to move an existing tag."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import re
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from platform_stack.errors import StackError, StackToolError

CONFIG_MEDIA_TYPE = "application/vnd.cncf.helm.config.v1+json"
CHART_LAYER_MEDIA_TYPE = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
PROBE_TIMEOUT = 5.0
_REF = re.compile(r"^(?:oci://)?(?P<host>[^/@]+)/(?P<path>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
                  r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")


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
    """Parse `[oci://]host[:port]/path[:tag][@sha256:hex]`; a bad reference is the user's error."""
    m = _REF.match(text.strip())
    if not m:
        raise StackError(f"{text}: reference: expected [oci://]host[:port]/repository[:tag][@sha256:<hex>]")
    return Reference(m["host"], m["path"], m["tag"], m["digest"])


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
    """Open a chart .tgz and read `<name>/Chart.yaml`; a non-chart is the user's error."""
    from renderer import userfile

    data = userfile.read_bytes(path, max_bytes=userfile.MAX_ARCHIVE_BYTES, what="the chart archive")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            tops = {m.name.split("/", 1)[0] for m in members}
            if len(tops) != 1:
                raise StackError(f"{path}:1:1: chart: expected every entry under one <chart>/ directory")
            top = tops.pop()
            handle = tar.extractfile(f"{top}/Chart.yaml")
            if handle is None:
                raise KeyError("Chart.yaml")
            metadata = yaml.safe_load(handle.read())
    except (OSError, tarfile.TarError, KeyError, yaml.YAMLError) as exc:
        raise StackError(f"{path}:1:1: chart: not a readable chart archive ({exc})") from exc
    if not isinstance(metadata, dict) or not metadata.get("name") or not metadata.get("version"):
        raise StackError(f"{path}:1:1: Chart.yaml: name and version are required")
    return ChartArchive(path, data, metadata, int(max(m.mtime for m in members)))


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


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """cosign (go-containerregistry) talks plain HTTP to loopback registries without being asked."""
    return host.rsplit(":", 1)[0] in LOOPBACK_HOSTS if not host.startswith("[") else host.startswith("[::1]")


def _client(plain_http: bool) -> httpx.Client:
    return httpx.Client(timeout=PROBE_TIMEOUT, follow_redirects=True)


def _base(ref: Reference, plain_http: bool) -> str:
    return f"{'http' if plain_http else 'https'}://{ref.host}/v2/{ref.repository}"


def probe(ref: Reference, plain_http: bool) -> None:
    """Fail fast (exit 2) when the registry does not answer, instead of oras-py's minutes of retries."""
    scheme = "http" if plain_http else "https"
    try:
        with _client(plain_http) as client:
            client.get(f"{scheme}://{ref.host}/v2/")
    except httpx.HTTPError as exc:
        raise StackToolError(f"registry {ref.host} unreachable over {scheme} ({exc.__class__.__name__}): "
                             "start the registry or check --plain-http") from exc


def remote_manifest(ref: Reference, reference: str, plain_http: bool) -> tuple[str, dict[str, Any]] | None:
    """(digest, manifest) for a tag or digest, or None when the registry does not have it."""
    try:
        with _client(plain_http) as client:
            resp = client.get(f"{_base(ref, plain_http)}/manifests/{reference}",
                              headers={"Accept": MANIFEST_MEDIA_TYPE})
    except httpx.HTTPError as exc:
        raise StackToolError(f"registry {ref.host}: {exc.__class__.__name__}: retry when it answers") from exc
    if resp.status_code == 404:
        return None
    if resp.status_code != 200:
        raise StackToolError(f"registry {ref.host}: GET manifest {reference}: HTTP {resp.status_code}")
    digest = resp.headers.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(resp.content).hexdigest()
    return digest, resp.json()


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
        raise StackError(f"{to}: --to: give the repository namespace only; the tag is the chart version")
    tag = archive.version.replace("+", "_")
    ref = Reference(base.host, f"{base.repository}/{archive.name}", tag)
    probe(ref, plain_http)
    config = config_json(archive)
    layer_digest = "sha256:" + archive.sha256
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    existing = remote_manifest(ref, tag, plain_http)
    if existing is not None:
        digest, manifest = existing
        layers = [layer.get("digest") for layer in manifest.get("layers", [])]
        if layers == [layer_digest] and manifest.get("config", {}).get("digest") == config_digest:
            return PushResult(Reference(ref.host, ref.repository, tag, digest), digest, created=False)
        raise StackError(f"{archive.path}:1:1: push: tag {ref.oci()} already exists with digest {digest} and "
                         "different content; tags are immutable, bump the chart version")
    _oras_push(archive, ref, config, plain_http)
    pushed = remote_manifest(ref, tag, plain_http)
    if pushed is None:
        raise StackToolError(f"registry {ref.host}: tag {tag} missing right after the push: retry")
    return PushResult(Reference(ref.host, ref.repository, tag, pushed[0]), pushed[0], created=True)


def _oras_push(archive: ChartArchive, ref: Reference, config: bytes, plain_http: bool) -> None:
    import oras.provider  # imported lazily: the CLI must start fast

    logging.getLogger("oras").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="apprafter-push-") as tmp:
        layer = Path(tmp) / archive.path.name
        layer.write_bytes(archive.data)
        config_path = Path(tmp) / "config.json"
        config_path.write_bytes(config)  # must exist: oras-py silently uses {} for a missing config path
        registry = oras.provider.Registry(hostname=ref.host, insecure=plain_http)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                registry.push(target=f"{ref.host}/{ref.repository}:{ref.tag}",
                              files=[f"{layer}:{CHART_LAYER_MEDIA_TYPE}"],
                              manifest_config=f"{config_path}:{CONFIG_MEDIA_TYPE}",
                              manifest_annotations=manifest_annotations(archive),
                              disable_path_validation=True, quiet=True)
        except Exception as exc:  # oras-py raises bare ValueError/RuntimeError/requests errors
            raise StackToolError(f"registry {ref.host}: push failed ({exc.__class__.__name__}: {exc}): "
                                 "retry when the registry answers") from exc
