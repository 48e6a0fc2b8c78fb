"""OCI/Docker references, parsed once: `[domain[:port]/]path[:tag][@sha256:hex]`, as distribution reads them.

The classifier compares image repositories (Docker Hub short names normalised); the stack commands parse
`oci://` references to charts with the same grammar.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["DOCKER_HUB", "ImageRef", "is_digest_pinned", "parse_image", "split_image"]

DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")
# distribution/reference: path components are lowercase alphanumerics joined by '.', '_', '__' or dashes.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(rf"^(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)(?::(?P<tag>\w[\w.-]{{0,127}}))?"
                        r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")
_DOMAIN = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                     r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?$")


@dataclasses.dataclass(frozen=True)
class ImageRef:
    """A parsed reference: the registry (None when none is written), the repository path, tag and digest."""

    domain: str | None
    path: str
    tag: str | None
    digest: str | None


def parse_image(ref: str) -> ImageRef | None:
    """The parts of a reference, or None when it is not one. The first component is the registry when it
    looks like a host (has '.' or ':', or is localhost), as docker decides."""
    first, sep, rest = ref.partition("/")
    domain = None
    if sep and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        if not _DOMAIN.match(first):
            return None
        domain, ref = first, rest
    m = _REFERENCE.match(ref)
    if not m:
        return None
    return ImageRef(domain, m["path"], m["tag"], m["digest"])


def split_image(ref: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference; repository normalised for Docker Hub. Text that is
    not a reference is its own repository (so a change of it reads as a change of repository: fail closed)."""
    parsed = parse_image(ref)
    if parsed is None:
        return ref, None, None
    domain = parsed.domain or "docker.io"
    if domain in DOCKER_HUB:
        path = parsed.path if "/" in parsed.path else f"library/{parsed.path}"
        return f"docker.io/{path}", parsed.tag, parsed.digest
    return f"{domain}/{parsed.path}", parsed.tag, parsed.digest


def is_digest_pinned(ref: str) -> bool:
    return split_image(ref)[2] is not None
