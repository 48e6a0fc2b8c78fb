"""Image references: repository versus tag/digest (Docker Hub short names normalised)."""

from __future__ import annotations

DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")


def split_image(ref: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference; repository normalised for Docker Hub."""
    name, _, digest = ref.partition("@")
    tag = None
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return _normalise(name), tag, digest or None


def _normalise(name: str) -> str:
    first, _, rest = name.partition("/")
    has_registry = bool(rest) and ("." in first or ":" in first or first == "localhost")
    if not has_registry:
        return f"docker.io/library/{name}" if "/" not in name else f"docker.io/{name}"
    if first in DOCKER_HUB:
        return f"docker.io/library/{rest}" if "/" not in rest else f"docker.io/{rest}"
    return name


def is_digest_pinned(ref: str) -> bool:
    return split_image(ref)[2] is not None
