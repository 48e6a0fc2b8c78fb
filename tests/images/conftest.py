"""Fixtures for the image tests: the images `make images` builds and the sidecar running under podman."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.images.podman import Image, Sidecar, make_images, start_sidecar

# The platform-stack tests' cosign key pairs: images are signed the same way as the chart.
from tests.platform_stack.conftest import key_pair  # noqa: F401 - a fixture, used by name


@pytest.fixture(scope="session")
def images() -> dict[str, Image]:
    """Every image, built by `make images` from this checkout (kept when its inputs are unchanged)."""
    return make_images()


@pytest.fixture(scope="session")
def sidecar_image(images: dict[str, Image]) -> Image:
    return images["argocd-cue-cmp"]


@pytest.fixture(scope="module")
def sidecar(sidecar_image: Image, testbed_dir: Path) -> Iterator[Sidecar]:
    """The sidecar image serving its plugin through Argo CD's own plugin server, socket on the host."""
    server = start_sidecar(sidecar_image, testbed_dir / "sidecar", f"apprafter-test-sidecar-{os.getpid()}")
    try:
        yield server
    finally:
        server.stop()
