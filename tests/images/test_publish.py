"""`make publish`: the images and every chart of deploy/charts pushed to an OCI registry, signed with cosign, pulled
back unchanged."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.charts.chart import KUBE_VERSION
from tests.images.podman import PREFIX, RELEASE, VERSION, Image, inspect, podman, run
from tests.platform_stack.conftest import helm, ok
from tests.renderer.helpers import REPO
from tests.testbed.registry import OciRegistry

pytestmark = pytest.mark.images
KeyPair = Callable[[str], tuple[Path, Path, str]]
# What `make publish` pushes after the images, in this order (tools/images.sh CHARTS).
CHARTS = sorted(path.parent for path in (REPO / "deploy" / "charts").glob("*/Chart.yaml"))


def publish(registry: OciRegistry, key: Path, password: str, prefix: str = PREFIX, *,
            make: bool = True) -> subprocess.CompletedProcess[str]:
    """`make publish` as CI runs it; make=False runs tools/images.sh itself, whose exit code tells a user's
    error (1) from a tool's (2), which make turns into its own 2."""
    venv = Path(sys.executable).parent.parent
    target = f"{registry.url}/apprafter"
    argv = (["make", "--no-print-directory", "-o", f"{venv}/.installed", "publish", f"VENV={venv}",  # as make_images
             f"REGISTRY={target}"] if make
            else ["tools/images.sh", "publish", target])
    return run(argv, check=False, timeout=600,
               extra_env={"IMAGE_PREFIX": prefix, "PLAIN_HTTP": "1", "COSIGN_KEY": str(key),
                          "COSIGN_PASSWORD": password, "PYTHON": sys.executable})


def verify(reference: str, public_key: Path) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "apprafter", "stack", "verify", reference, "--key", str(public_key)],
               check=False)


@pytest.fixture(scope="module")
def published(images: dict[str, Image], oci_registry: OciRegistry, key_pair: KeyPair) -> list[str]:
    """`make publish` once: its stdout lines, `REPO/<name>:<version>@sha256:<digest>`, one per image, then one per
    chart."""
    key, _, password = key_pair("release")
    proc = publish(oci_registry, key, password)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_publish_prints_each_image_and_each_chart_by_tag_and_digest(published: list[str], images: dict[str, Image],
                                                                    oci_registry: OciRegistry) -> None:
    repo = f"{oci_registry.url}/apprafter"
    assert [chart.name for chart in CHARTS] == ["apprafter-gateway", "apprafter-network-policies",
                                                "apprafter-operator", "apprafter-service-providers"]
    assert [line.split("@")[0] for line in published] == [
        *(f"{repo}/{name}:{VERSION}" for name in RELEASE), *(f"{repo}/charts/{c.name}:{VERSION}" for c in CHARTS)]


def test_published_images_pull_back_with_the_same_digest(published: list[str], images: dict[str, Image]) -> None:
    for line, image in zip(published[:-len(CHARTS)], (images[name] for name in RELEASE), strict=True):
        tag, digest = line.split("@")
        podman("pull", "--quiet", "--tls-verify=false", tag)
        try:
            pulled = inspect(tag)
            assert f"{tag.rsplit(':', 1)[0]}@{digest}" in pulled["RepoDigests"]  # the manifest pushed
            assert pulled["Id"] == image.id  # the same config, so the same layers, as the image built here
        finally:
            podman("rmi", tag)  # only the tag: the image stays as the local build


# What each chart renders with its defaults (the gateway chart needs the platform's domain).
RENDERS = {"apprafter-operator": ("kind: Deployment", []),
           "apprafter-gateway": ("kind: Gateway", ["--set", "domain=apps.example.com"]),
           "apprafter-network-policies": ("kind: CiliumClusterwideNetworkPolicy", []),
           # none by default: the stack passes its providers
           "apprafter-service-providers": ("kind: ServiceProvider", [
               "--set-json", 'providers={"disk": {"labels": {}, "type": "disk", "backend": "storage-class"}}'])}


def test_the_published_charts_pull_back_byte_identical_and_install(published: list[str], tmp_path: Path) -> None:
    for line, chart in zip(published[-len(CHARTS):], CHARTS, strict=True):
        tagged, digest = line.split("@")
        repository, version = tagged.rsplit(":", 1)
        into = tmp_path / chart.name
        into.mkdir()
        pulled = helm("pull", f"oci://{repository}", "--version", version, "--plain-http", "-d", str(into))
        ok(pulled)
        assert f"Digest: {digest}" in pulled.stderr  # helm reports the manifest it pulled
        [tgz] = into.glob("*.tgz")
        local = run([sys.executable, "scripts/package_chart.py", str(chart), str(into / "local")]).stdout.strip()
        assert tgz.read_bytes() == Path(local).read_bytes()  # the same bytes as packaging the chart here again
        kind, args = RENDERS[chart.name]
        assert kind in ok(helm("template", "x", str(tgz), "--kube-version", KUBE_VERSION, *args))


def test_signature_verifies_with_the_right_key_only(published: list[str], key_pair: KeyPair) -> None:
    _, pub, _ = key_pair("release")
    _, other_pub, _ = key_pair("intruder")
    for line in published:
        assert verify(line, pub).returncode == 0
        wrong = verify(line, other_pub)
        assert wrong.returncode == 1
        assert wrong.stderr.startswith(f"oci://{line}: verify:"), wrong.stderr
        assert wrong.stdout == ""


def test_publishing_again_is_a_no_op(published: list[str], oci_registry: OciRegistry, key_pair: KeyPair) -> None:
    key, _, password = key_pair("release")
    again = publish(oci_registry, key, password)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == published
    assert "already in the registry" in again.stderr
    assert "already signed" in again.stderr  # a re-run adds no second signature


def test_different_content_under_a_published_tag_is_refused(published: list[str], oci_registry: OciRegistry,
                                                            key_pair: KeyPair, tmp_path: Path) -> None:
    key, _, password = key_pair("release")
    # A one-file image posing as the sidecar at the same version.
    impostor = f"{PREFIX}-impostor/argocd-cue-cmp:{VERSION}"
    (tmp_path / "impostor").write_text("not the sidecar\n")
    ctr = run(["buildah", "from", "--quiet", "scratch"]).stdout.strip()
    try:
        run(["buildah", "copy", "--quiet", ctr, str(tmp_path / "impostor"), "/impostor"])
        run(["buildah", "commit", "--quiet", ctr, impostor])
    finally:
        run(["buildah", "rm", ctr])
    try:
        moved = publish(oci_registry, key, password, prefix=f"{PREFIX}-impostor", make=False)
    finally:
        podman("rmi", impostor)
    assert moved.returncode == 1
    assert moved.stderr.splitlines()[-1].endswith("tags are immutable, bump the version in pyproject.toml")
    assert moved.stdout == ""
