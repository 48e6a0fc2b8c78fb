"""What the stack commands and the PlatformStack controller ask of a registry: a reachability check, manifests
and tags read and checked, blobs read by digest within a cap, and a Helm-layout push (the manifest laid out by
oras-py's documented helpers)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import oras.defaults
import oras.oci

from platform_stack.credentials import config_paths, credential_for, local_configs
from platform_stack.docker_config import Credential, DockerConfig
from platform_stack.registry.replies import (
    MAX_BODY,
    REPLY_LIMITS,
    RegistryFailure,
    Reply,
    describe,
    failure_words,
    short,
    status_failure,
)
from platform_stack.registry.transport import Bounds, Transport
from renderer.yaml_input import parse
from toolchain.errors import UserError

__all__ = ["ANY_MANIFEST", "MANIFEST_MEDIA_TYPE", "MAX_TAGS", "TAG_PAGE", "RegistryClient", "connect"]

MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
# What a tag of a container image may name: an image or an index (multi-platform), OCI's or Docker's.
ANY_MANIFEST = ", ".join((MANIFEST_MEDIA_TYPE, "application/vnd.oci.image.index.v1+json",
                          "application/vnd.docker.distribution.manifest.v2+json",
                          "application/vnd.docker.distribution.manifest.list.v2+json"))
MAX_TAGS = 10_000  # tags read from one repository (pages of TAG_PAGE)
TAG_PAGE = 1000


class RegistryClient:
    """One registry host with the caller's credential: every call bounded, every reply checked."""

    def __init__(self, host: str, plain_http: bool, credential: Credential | None, searched: Sequence[str],
                 bounds: Bounds | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.host, self.plain_http, self.credential, self.searched = host, plain_http, credential, searched
        self.transport = Transport(host, plain_http, credential, bounds or Bounds(), clock)
        self.base = self.transport.base

    def request(self, method: str, path_or_url: str, headers: dict[str, str] | None = None,
                content: bytes | None = None, max_bytes: int = MAX_BODY) -> Reply:
        """One request; the statuses no caller can use (401, 403, 429, 5xx) raise their one line."""
        url = urljoin(self.base, path_or_url)
        what = describe(method, url)
        reply = self.transport.send(method, url, headers, content, max_bytes)
        line = status_failure(self.host, what, reply, self.credential, self.searched)
        if line is not None:
            raise RegistryFailure(line)
        return reply

    def unexpected(self, reply: Reply, what: str) -> RegistryFailure:
        return RegistryFailure(f"registry {self.host}: {what}: {failure_words(reply)}")

    def close(self) -> None:
        self.transport.close()

    # -- reads ----------------------------------------------------------------------------------------------
    def check(self) -> None:
        """Fail fast (exit 2) when the registry does not answer, or refuses the credentials."""
        self.request("GET", "/v2/")

    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]] | None:
        """(digest, manifest) of a tag or digest, None when the registry has no such manifest.

        The digest is the sha256 of the bytes received, and must equal the one the registry names (if any):
        the registry is not trusted to name the content it serves.
        """
        reply = self.request("GET", f"/v2/{repository}/manifests/{reference}", {"Accept": MANIFEST_MEDIA_TYPE})
        what = f"GET manifest {reference}"
        if reply.status == 404:
            return None
        if reply.status != 200:
            raise self.unexpected(reply, what)
        digest = "sha256:" + hashlib.sha256(reply.body).hexdigest()
        named = reply.headers.get("Docker-Content-Digest")
        if named is not None and named != digest:
            raise RegistryFailure(f"registry {self.host}: {what}: the reply's Docker-Content-Digest "
                                  f"{short(named, 80)} is not the digest of its content ({digest})")
        if reference.startswith("sha256:") and reference != digest:
            raise RegistryFailure(f"registry {self.host}: {what}: served content with digest {digest}")
        return digest, self.parse_manifest(reply.body, what)

    def digest(self, repository: str, tag: str) -> str | None:
        """The digest the tag names now (whatever kind of manifest: the kubelet pulls an index too), None when the
        registry has no such tag; any other answer raises its one line."""
        return self.tag_digest(repository, tag, checked=True)[1]

    def tag_digest(self, repository: str, tag: str, *, checked: bool = False) -> tuple[int, str | None]:
        """(HTTP status, digest) of `GET manifests/<tag>` (any image or index media type): the digest for a 200,
        None otherwise; `checked` raises the one line of a status no caller can use, as `request` does. As for
        `manifest`, the digest is the sha256 of the bytes received (at most MAX_BODY), checked against the one the
        registry names. Transport failures raise RegistryFailure."""
        path, headers = f"/v2/{repository}/manifests/{tag}", {"Accept": ANY_MANIFEST}
        reply = (self.request("GET", path, headers) if checked else
                 self.transport.send("GET", urljoin(self.base, path), headers))
        what = f"GET manifest {tag}"
        if checked and reply.status not in (200, 404):
            raise self.unexpected(reply, what)
        if reply.status != 200:
            return reply.status, None
        digest = "sha256:" + hashlib.sha256(reply.body).hexdigest()
        named = reply.headers.get("Docker-Content-Digest")
        if named is not None and named != digest:
            raise RegistryFailure(f"registry {self.host}: {what}: the reply's Docker-Content-Digest "
                                  f"{short(named, 80)} is not the digest of its content ({digest})")
        return 200, digest

    def parse_manifest(self, body: bytes, what: str) -> dict[str, Any]:
        """An OCI image manifest, or RegistryFailure saying what is wrong with the reply."""
        try:
            data = parse(body, "reply", json_only=True, limits=REPLY_LIMITS).data
        except UserError as e:
            raise RegistryFailure(f"registry {self.host}: {what}: the reply is not JSON "
                                  f"({short(e.lines()[0].removeprefix('reply:'))})") from None
        layers = data.get("layers") if isinstance(data, dict) else None
        config = data.get("config") if isinstance(data, dict) else None
        shaped = isinstance(layers, list) and all(isinstance(x, dict) and isinstance(x.get("digest"), str)
                                                  for x in layers)
        if not (shaped and isinstance(config, dict) and isinstance(config.get("digest"), str)):
            raise RegistryFailure(f"registry {self.host}: {what}: the reply is not an OCI image manifest "
                                  "(config and layers with digests)")
        assert isinstance(data, dict)
        return data

    def tags(self, repository: str, page: int = TAG_PAGE) -> list[str] | None:
        """Every tag of `repository` (following the registry's `Link` pages of `page` tags), None when the registry
        has no such repository."""
        url: str | None = f"{self.base}/v2/{repository}/tags/list?n={page}"
        what = "GET tag list"
        found: list[str] = []
        while url is not None:
            reply = self.request("GET", url)
            if reply.status == 404:
                return None
            if reply.status != 200:
                raise self.unexpected(reply, what)
            try:
                body = parse(reply.body, "reply", json_only=True, limits=REPLY_LIMITS).data
            except UserError:
                raise RegistryFailure(f"registry {self.host}: {what}: the reply is not JSON") from None
            tags = body.get("tags") if isinstance(body, dict) else None
            if tags is None:
                tags = []  # distribution answers `"tags": null` for a repository whose tags were all deleted
            if not isinstance(tags, list) or not all(isinstance(x, str) for x in tags):
                raise RegistryFailure(f"registry {self.host}: {what}: the reply has no list of tags")
            found += tags
            if len(found) > MAX_TAGS:
                raise RegistryFailure(f"registry {self.host}: {what}: more than {MAX_TAGS} tags in {repository}")
            url = urljoin(self.base, reply.next_page) if reply.next_page else None
            if url is not None and urlsplit(url).netloc != self.host:
                raise RegistryFailure(f"registry {self.host}: {what}: the next page is on another host: refused")
        return found

    def blob(self, repository: str, digest: str, max_bytes: int) -> bytes:
        """The blob `digest` of `repository`, read up to `max_bytes`; its sha256 must be `digest`."""
        what = f"GET blob {digest}"
        reply = self.request("GET", f"/v2/{repository}/blobs/{digest}", max_bytes=max_bytes)
        if reply.status != 200:
            detail = "not found" if reply.status == 404 else f"HTTP {reply.status}"
            raise RegistryFailure(f"registry {self.host}: {what}: {detail}")
        if "sha256:" + hashlib.sha256(reply.body).hexdigest() != digest:
            raise RegistryFailure(f"registry {self.host}: {what}: served content with another digest")
        return reply.body

    # -- push -----------------------------------------------------------------------------------------------
    def push_artifact(self, target: str, files: list[str], config: str, annotations: dict[str, str]) -> None:
        """Push `host/repository:tag`: each `path:media-type` of `files` a layer (titled with its file name), the
        `path:media-type` config, then the manifest, as oras-py lays them out (`oras.oci`)."""
        repository, tag = self.split_target(target)
        manifest = oras.oci.NewManifest()
        for spec in files:
            path, media_type = self.existing(spec)
            layer = oras.oci.NewLayer(str(path), media_type)
            layer["annotations"] = {oras.defaults.annotation_title: path.name}
            self.upload(repository, path, layer["digest"])
            manifest["layers"].append(layer)
        if annotations:
            manifest["annotations"] = dict(annotations)
        config_path, config_type = self.existing(config)
        descriptor, _ = oras.oci.ManifestConfig(str(config_path), config_type)
        self.upload(repository, config_path, descriptor["digest"])
        manifest["config"] = descriptor
        body = json.dumps(manifest, allow_nan=False).encode()
        reply = self.request("PUT", f"/v2/{repository}/manifests/{tag}", {"Content-Type": MANIFEST_MEDIA_TYPE}, body)
        if not 200 <= reply.status < 300:
            raise self.unexpected(reply, f"PUT manifest {tag}")

    def split_target(self, target: str) -> tuple[str, str]:
        prefix = f"{self.host}/"
        repository, sep, tag = target.removeprefix(prefix).rpartition(":")
        if not target.startswith(prefix) or not sep or "/" in tag:
            raise ValueError(f"push target {target!r}: expected {prefix}<repository>:<tag>")
        return repository, tag

    @staticmethod
    def existing(spec: str) -> tuple[Path, str]:
        """`path:media-type` of a file that must exist (oras-py would silently push `{}` for a missing config)."""
        path, _, media_type = spec.rpartition(":")
        if not Path(path).is_file() or not media_type:
            raise ValueError(f"push: {spec!r}: expected an existing file and its media type (path:media-type)")
        return Path(path), media_type

    def upload(self, repository: str, path: Path, digest: str) -> None:
        """One blob, unless the registry has it: POST an upload session, PUT the bytes to its Location."""
        exists = self.request("HEAD", f"/v2/{repository}/blobs/{digest}")
        if exists.status == 200:
            return
        start = self.request("POST", f"/v2/{repository}/blobs/uploads/", {"Content-Type": "application/octet-stream"})
        location = start.headers.get("Location")
        if not 200 <= start.status < 300 or not location:
            raise RegistryFailure(f"registry {self.host}: POST blob upload: "
                                  f"{failure_words(start) if start.status >= 300 else 'no upload Location given'}")
        url = urljoin(self.base, location)
        url += f"{'&' if '?' in url else '?'}digest={digest}"
        done = self.request("PUT", url, {"Content-Type": "application/octet-stream"}, path.read_bytes())
        if not 200 <= done.status < 300:
            raise self.unexpected(done, "PUT blob upload")


def connect(host: str, plain_http: bool, configs: Sequence[DockerConfig] | None = None, *, helpers: bool = True,
            deadline_s: float | None = None) -> RegistryClient:
    """A client for host with the credential the user's Docker/Helm config holds for it (if any); the controller
    passes the configs of a Secret and no credential helpers."""
    if configs is None:
        configs, searched = local_configs(), [str(p) for p in config_paths()]
    else:
        searched = [c.display for c in configs]
    bounds = Bounds() if deadline_s is None else Bounds(deadline_s=deadline_s)
    return RegistryClient(host, plain_http, credential_for(configs, host, helpers=helpers), searched, bounds)
