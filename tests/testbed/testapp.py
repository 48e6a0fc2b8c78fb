"""The node tier's test images, built with buildah on the local Debian base, named by the hash of what they are made
of, so a session reuses an unchanged image and two checkouts never share a tag: the test image (tests/testbed/testapp/)
and the shop, the user guide's example app with a Postgres and a Redis (tests/testbed/shopapp/, its base with Debian's
python3-psycopg2 and python3-redis)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.testbed.procs import BedError
from toolchain.pins import pins

REPO = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).resolve().parent / "testapp"
SHOP_SOURCE = Path(__file__).resolve().parent / "shopapp"
SHOP_PACKAGES = pins()["SHOP_PACKAGES"]  # tools/versions.env: tools/setup-images.sh builds its base
EPOCH = "1747699200"  # file mtimes and the image's creation time: the same source makes the same image ID
CHECKOUT = hashlib.sha256(str(REPO).encode()).hexdigest()[:8]


@contextlib.contextmanager
def _one_build_at_a_time() -> Iterator[None]:
    """The two node units' workers ask for the same images at once (tests/parallel.py): one builds, the other then
    finds the image (buildah's working containers are named, and the base image is one build)."""
    (REPO / "build").mkdir(exist_ok=True)
    with open(REPO / "build" / ".test-images.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(argv: list[str], timeout: float = 600) -> str:
    env = {**os.environ, "CONTAINERS_CONF": str(REPO / "tools" / "containers.conf")}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=REPO)
    if proc.returncode != 0:
        raise BedError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]} (run `make setup`)")
    return proc.stdout.strip()


def build_test_app() -> str:
    """Build (or find) the test image in podman's storage; returns its reference."""
    return _build(SOURCE, "apprafter-testapp")


def build_shop_app() -> str:
    """Build (or find) the shop's image (its base with SHOP_PACKAGES: tools/base-image.sh --with builds that once,
    from the apt mirror); returns its reference."""
    return _build(SHOP_SOURCE, "apprafter-shop", SHOP_PACKAGES)


def _build(source: Path, name: str, packages: str = "") -> str:
    with _one_build_at_a_time():
        return _build_unlocked(source, name, packages)


def _build_unlocked(source: Path, name: str, packages: str) -> str:
    with_packages = ["--with", packages] if packages else []
    base = _run([str(REPO / "tools" / "base-image.sh"), *with_packages, "--name"])
    exists = subprocess.run(["podman", "image", "exists", base], check=False,
                            env={**os.environ, "CONTAINERS_CONF": str(REPO / "tools" / "containers.conf")})
    if exists.returncode != 0:
        _run([str(REPO / "tools" / "base-image.sh"), *with_packages], timeout=1200)
    base_id = _run(["podman", "image", "inspect", "--format", "{{.Id}}", base])
    digest = hashlib.sha256(base_id.encode())
    for file in sorted(p.name for p in source.iterdir()):
        digest.update(file.encode() + b"\0" + (source / file).read_bytes())
    ref = f"localhost/test-{CHECKOUT}/{name}:{digest.hexdigest()[:12]}"
    exists = subprocess.run(["podman", "image", "exists", ref], check=False,
                            env={**os.environ, "CONTAINERS_CONF": str(REPO / "tools" / "containers.conf")})
    if exists.returncode != 0:
        _run(["buildah", "bud", "--quiet", "--isolation", "chroot", "--timestamp", EPOCH, "--build-arg",
              f"BASE={base}", "-f", str(source / "Containerfile"), "-t", ref, str(source)])
    return ref


def variant_of(ref: str, label: str) -> str:
    """`ref` with one label more (`apprafter.test/variant=<label>`): the same layers, another config, so another
    digest once pushed — a release that moves a tag, without a build."""
    with _one_build_at_a_time():
        return _variant_unlocked(ref, label)


def _variant_unlocked(ref: str, label: str) -> str:
    repository, _, tag = ref.rpartition(":")
    target = f"{repository}:{tag}-{label}"
    exists = subprocess.run(["podman", "image", "exists", target], check=False,
                            env={**os.environ, "CONTAINERS_CONF": str(REPO / "tools" / "containers.conf")})
    if exists.returncode != 0:
        _run(["buildah", "from", "--pull=never", "--name", f"variant-{CHECKOUT}-{label}", ref])
        try:
            _run(["buildah", "config", "--label", f"apprafter.test/variant={label}", f"variant-{CHECKOUT}-{label}"])
            _run(["buildah", "commit", "--quiet", "--timestamp", EPOCH, f"variant-{CHECKOUT}-{label}", target])
        finally:
            subprocess.run(["buildah", "rm", f"variant-{CHECKOUT}-{label}"], capture_output=True, check=False)
    return target
