"""The argocd-cue-cmp image under podman: Argo CD's plugin server inside it renders as `apprafter render` does;
what both images share: no CA bundle in a layer, identical rebuilds."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.images.podman import (
    IMAGES,
    PREFIX,
    RELEASE,
    REPO,
    VERSION,
    Image,
    Sidecar,
    inspect,
    make_images,
    podman,
)
from tests.renderer.helpers import EXAMPLES, MINIMAL, run_cli, write_app
from tests.testbed.cmp import CmpError

pytestmark = pytest.mark.images


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    shutil.copytree(EXAMPLES / "parser", root / "apps" / "parser")
    write_app(root / "apps" / "broken", MINIMAL.replace("expose: port: 8080", "expose: port: 70000"))
    return root


def local(example: str, env: str, mode: str) -> list[dict[str, Any]]:
    result = run_cli("render", str(EXAMPLES / example), "--env", env, "--mode", mode, "--namespace", "argocd")
    assert result.returncode == 0, result.stderr
    return list(yaml.safe_load_all(result.stdout))


def test_sidecar_renders_the_parser_example_equal_to_local_render(sidecar: Sidecar, repo: Path) -> None:
    by_parameter = sidecar.generate(repo, "apps/parser", app_name="parser",
                                    parameters=[{"name": "environment", "string": "prod"}])
    assert by_parameter.manifests == local("parser", "prod", "cr")
    by_plugin_env = sidecar.generate(repo, "apps/parser", app_name="parser",
                                     plugin_env={"APPRAFTER_ENVIRONMENT": "dev"})
    assert by_plugin_env.manifests == local("parser", "dev", "cr")
    with pytest.raises(CmpError, match="plugin env APPRAFTER_MODE: how the plugin renders is the platform's"):
        sidecar.generate(repo, "apps/parser", app_name="parser-dev", plugin_env={"APPRAFTER_MODE": "manifests"})


def test_sidecar_reports_the_users_mistake_at_its_line(sidecar: Sidecar, repo: Path) -> None:
    with pytest.raises(CmpError) as err:
        sidecar.generate(repo, "apps/broken", app_name="demo-dev")
    assert ("apprafter/Application.cue:7:17: spec.base.expose.port: port 70000 is out of range: a port is an integer "
            "1-65535"
            in str(err.value))


def test_image_renders_like_local_render_as_docs_install_shows(sidecar_image: Image) -> None:
    inside = podman("run", "--rm", "--read-only", "--user", "999:999", "-v", f"{EXAMPLES / 'parser'}:/src:ro",
                    "--entrypoint", "apprafter", sidecar_image.ref, "render", "/src", "--env", "prod")
    outside = run_cli("render", str(EXAMPLES / "parser"), "--env", "prod")
    assert outside.returncode == 0, outside.stderr
    assert inside.stdout == outside.stdout


def test_sidecar_runs_as_999_with_only_tmp_writable(sidecar: Sidecar) -> None:
    # The proof above is only worth something if the container really had Argo CD's restrictions.
    assert sidecar.socket.stat().st_uid == 999
    probe = podman("exec", sidecar.name, "sh", "-c",
                   "id -u; for d in / /home/argocd /opt/apprafter /run /var/tmp /tmp; do "
                   "touch $d/.w 2>/dev/null && echo $d; done").stdout.split()
    assert probe == ["999", "/tmp"]


def test_image_metadata(sidecar_image: Image) -> None:
    config = inspect(sidecar_image.ref)["Config"]
    assert config["User"] == "999:999"
    assert config["Entrypoint"] == ["/var/run/argocd/argocd-cmp-server"]
    assert "HOME=/tmp" in config["Env"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "argocd-cue-cmp"
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.revision"].split("-")[0] == run_git("rev-parse", "HEAD")
    assert labels["org.opencontainers.image.base.name"].startswith("localhost/apprafter-base:")


def test_image_ships_plugin_yaml_and_the_pinned_cue(sidecar_image: Image) -> None:
    shipped = podman("run", "--rm", "--read-only", "--entrypoint", "cat", sidecar_image.ref,
                     "/home/argocd/cmp-server/config/plugin.yaml").stdout
    assert shipped == (REPO / "plugin.yaml").read_text()
    doctor = podman("run", "--rm", "--read-only", "--entrypoint", "apprafter", sidecar_image.ref,
                    "doctor", "-o", "json", check=False)
    assert doctor.returncode == 0, doctor.stderr
    (cue,) = json.loads(doctor.stdout)["tools"]
    assert (cue["tool"], cue["ok"], cue["path"]) == ("cue", True, "/opt/apprafter/bin/cue")


@pytest.mark.parametrize("name", IMAGES)
def test_ca_bundle_is_a_build_secret_not_a_layer(images: dict[str, Image], name: str) -> None:
    """Every file of the layers the image adds to its base, read where the storage keeps each layer's files (the
    overlay driver's diff directories, top layer first: `podman save` of the whole image cost ≈ 6 s an image)."""
    image = images[name]
    bundle = Path("/etc/ssl/certs/ca-certificates.crt").read_bytes()
    own = inspect(image.ref)
    base = inspect(own["Config"]["Labels"]["org.opencontainers.image.base.name"])
    ours = [layer for layer in own["RootFS"]["Layers"] if layer not in base["RootFS"]["Layers"]]
    assert ours, "the image adds no layer to its base"
    driver = own["GraphDriver"]
    assert driver["Name"] == "overlay", driver["Name"]
    layers = [driver["Data"]["UpperDir"], *filter(None, driver["Data"].get("LowerDir", "").split(":"))]
    assert layers[len(ours)] == base["GraphDriver"]["Data"]["UpperDir"]  # the base's top: the split is right
    for diff in map(Path, layers[:len(ours)]):
        for path in diff.rglob("*"):
            relative = path.relative_to(diff).as_posix()
            assert not relative.startswith("run/secrets/") or path.is_dir(), relative
            if path.is_file() and not path.is_symlink() and path.stat().st_size == len(bundle):
                assert path.read_bytes() != bundle, f"{relative} is the CA bundle"


def test_rebuilding_gives_the_same_images(images: dict[str, Image]) -> None:
    """The plugin's image `make publish` pushes (the one every Argo CD sync runs), rebuilt: the same id. The suite's
    time budget keeps it to that one: every image is built by the same tools/images.sh rules, `make publish`'s
    other (the operator's) among them."""
    again = make_images(PREFIX + "-again", names=RELEASE[:1])
    try:
        assert {name: image.id for name, image in again.items()} == {name: images[name].id for name in RELEASE[:1]}
    finally:
        for image in again.values():
            podman("rmi", image.ref)


def run_git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
