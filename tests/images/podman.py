"""podman and `make images` for the image tests, with this machine's settings (tools/containers.conf)."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.testbed.argocd import ARGOCD_VERSIONS
from tests.testbed.cmp import CmpServer, plugin_socket_name
from tests.testbed.procs import ManagedProcess, tool, wait_for
from toolchain import tools
from toolchain.pins import pins

REPO = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = REPO / "tools" / "containers.conf"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
# Tags of this checkout's test builds, apart from `make images`' own and from other checkouts' on the
# shared image store, so concurrent test runs never swap an image under each other.
PREFIX = "localhost/test-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:8]
ARGOCD_CMP_SERVER = "/var/run/argocd/argocd-cmp-server"  # where Argo CD's init container puts the binary
PLUGIN_SOCKETS = "/home/argocd/cmp-server/plugins"
# what `make images` builds, in its order (tools/images.sh ALL)
IMAGES = ("argocd-cue-cmp", "apprafter-operator", "argocd", "redis", "cnpg", "postgresql", "pgbouncer", "traefik",
          "versitygw")
RELEASE = ("argocd-cue-cmp", "apprafter-operator")  # what `make publish` pushes (Argo CD's and Redis on request)


def tag(name: str) -> str:
    """The tag `make images` gives image `name` (Argo CD's, CloudNativePG's and Traefik's carry the version they are
    built from, the PostgreSQL image its major: versions.env POSTGRES_MAJOR, which CloudNativePG reads)."""
    if name == "cnpg":
        return tools.TOOLS["cnpg-manager"].pinned.removeprefix("v")
    if name == "traefik":
        return pins()["TRAEFIK_VERSION"]
    if name == "versitygw":
        return pins()["VERSITYGW_VERSION"].removeprefix("v")
    return {"argocd": ARGOCD_VERSIONS[0], "postgresql": pins()["POSTGRES_MAJOR"]}.get(name, VERSION)


def env(**extra: str) -> dict[str, str]:
    """The caller's environment plus the machine's podman settings."""
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF), **extra}


def run(argv: Sequence[str | os.PathLike[str]], *, timeout: float = 300, check: bool = True,
        extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command with the podman settings; with check, a failure fails the test with its output."""
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False,
                          env=env(**(extra_env or {})), cwd=REPO)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(str(a) for a in argv)} exited {proc.returncode}\nstdout: {proc.stdout[-3000:]}\n"
                    f"stderr: {proc.stderr[-3000:]}", pytrace=False)
    return proc


def podman(*args: str | os.PathLike[str], timeout: float = 300,
           check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(["podman", *args], timeout=timeout, check=check)


def inspect(ref: str) -> dict[str, Any]:
    """`podman image inspect` of one image."""
    data: list[dict[str, Any]] = json.loads(podman("image", "inspect", ref).stdout)
    return data[0]


@dataclasses.dataclass(frozen=True)
class Image:
    """A built image: its tag and its image ID (the digest of its config)."""

    ref: str
    id: str


def make_images(prefix: str = PREFIX, names: Sequence[str] = ()) -> dict[str, Image]:
    """`make images` as a user runs it (tags under `prefix`); name -> Image. `names`: those alone
    (`tools/images.sh build NAME...`, what `make images` runs)."""
    venv = Path(sys.executable).parent.parent
    (REPO / "build").mkdir(exist_ok=True)
    # One build at a time in this checkout: pytest-xdist workers ask for the images at once (tests/parallel.py);
    # the second finds them built (same inputs, same hash) and builds nothing.
    with open(REPO / "build" / ".make-images.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if names:
            run(["tools/images.sh", "build", *names], timeout=1200,
                extra_env={"IMAGE_PREFIX": prefix, "PYTHON": str(venv / "bin" / "python")})
        else:
            # -o: the running venv is taken as installed; make would otherwise re-install it from this checkout
            # when pyproject.toml is newer than its stamp (a worktree), pointing a shared venv at another tree
            run(["make", "--no-print-directory", "-o", f"{venv}/.installed", "images", f"VENV={venv}"], timeout=1200,
                extra_env={"IMAGE_PREFIX": prefix})
    images = {}
    for name in names or IMAGES:
        ref = f"{prefix}/{name}:{tag(name)}"
        images[name] = Image(ref, inspect(ref)["Id"])
    return images


class Sidecar(CmpServer):
    """The sidecar image run the way argocd-repo-server runs it, serving its plugin on a host directory."""

    def __init__(self, name: str, socket_dir: Path, process: ManagedProcess) -> None:
        super().__init__(REPO, socket_dir, plugin_socket_name(REPO), process, ARGOCD_VERSIONS[0])  # tool("argocd")
        self.name = name

    def stop(self) -> None:
        # The podman client is not the container: stop the container, then reap the client.
        podman("stop", "--time", "1", self.name, check=False, timeout=60)
        podman("rm", "--force", "--ignore", self.name, check=False, timeout=60)
        self.process.stop(grace=5.0)


def start_sidecar(image: Image, workdir: Path, name: str, extra: Sequence[str] = ()) -> Sidecar:
    """`podman run` the image as uid 999 with a read-only root and /tmp its only writable place, Argo CD's
    plugin server mounted where Argo CD's init container puts it, and the socket directory on the host."""
    sockets = workdir / "plugins"
    sockets.mkdir(parents=True, exist_ok=True)
    os.chown(sockets, 999, 999)  # the plugin server runs as 999 and creates its socket here
    argv = ["podman", "run", "--rm", "--name", name, "--timeout", "1800",
            "--user", "999:999", "--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp",
            "--cap-drop", "all", "--security-opt", "no-new-privileges",
            "--volume", f"{tool('argocd')}:{ARGOCD_CMP_SERVER}:ro",
            "--volume", f"{sockets}:{PLUGIN_SOCKETS}",
            *extra, image.ref]
    proc = ManagedProcess(f"sidecar {name}", argv, workdir / f"{name}.log", env=env())
    sidecar = Sidecar(name, sockets, proc)
    try:
        wait_for(f"the sidecar's plugin socket {sidecar.socket}",
                 lambda: True if "serving on" in proc.log_text() and sidecar.socket.exists() else None, 60, proc)
        return sidecar
    except BaseException:
        sidecar.stop()
        raise
