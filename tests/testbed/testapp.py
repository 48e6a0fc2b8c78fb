"""The node tier's test image (tests/testbed/testapp/): built with buildah on the local Debian base, named by
the hash of what it is made of, so a session reuses an unchanged image and two checkouts never share a tag."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from tests.testbed.procs import BedError

REPO = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).resolve().parent / "testapp"
EPOCH = "1747699200"  # file mtimes and the image's creation time: the same source makes the same image ID
CHECKOUT = hashlib.sha256(str(REPO).encode()).hexdigest()[:8]


def _run(argv: list[str], timeout: float = 600) -> str:
    env = {**os.environ, "CONTAINERS_CONF": str(REPO / "tools" / "containers.conf")}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=REPO)
    if proc.returncode != 0:
        raise BedError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]} (run `make setup`)")
    return proc.stdout.strip()


def build_test_app() -> str:
    """Build (or find) the test image in podman's storage; returns its reference."""
    base = _run([str(REPO / "tools" / "base-image.sh"), "--name"])
    base_id = _run(["podman", "image", "inspect", "--format", "{{.Id}}", base])
    digest = hashlib.sha256(base_id.encode())
    for name in sorted(p.name for p in SOURCE.iterdir()):
        digest.update(name.encode() + b"\0" + (SOURCE / name).read_bytes())
    ref = f"localhost/test-{CHECKOUT}/apprafter-testapp:{digest.hexdigest()[:12]}"
    exists = subprocess.run(["podman", "image", "exists", ref], check=False,
                            env={**os.environ, "CONTAINERS_CONF": str(REPO / "tools" / "containers.conf")})
    if exists.returncode != 0:
        _run(["buildah", "bud", "--quiet", "--isolation", "chroot", "--timestamp", EPOCH, "--build-arg",
              f"BASE={base}", "-f", str(SOURCE / "Containerfile"), "-t", ref, str(SOURCE)])
    return ref
