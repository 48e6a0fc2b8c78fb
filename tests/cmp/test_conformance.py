"""The plugin under Argo CD's own plugin server: the repo streamed as Argo CD streams it, with Argo CD's env."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.renderer.helpers import EXAMPLES, MINIMAL, REPO, RUNAWAY, run_cli, write_app
from tests.testbed.cmp import CmpError, CmpServer
from tests.testbed.kube import KubeTestBed
from toolchain.tools import resolve

pytestmark = pytest.mark.testbed
VENV_BIN = str(Path(sys.executable).parent)
SECRET_VALUE = "s3cr3t-value-never-printed"


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("plugin")
    shutil.copy(REPO / "plugin.yaml", directory / "plugin.yaml")
    return directory


@pytest.fixture(scope="module")
def server(argocd_cmp_server: Any, plugin_dir: Path) -> CmpServer:
    # As in the sidecar image: apprafter and cue on PATH, nothing else of ours.
    return argocd_cmp_server(plugin_dir, path=[VENV_BIN, str(resolve("cue").parent)],
                             env={"APPRAFTER_CUE_TIMEOUT": "3"})


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    for example in ("parser", "webapp", "worker"):
        shutil.copytree(EXAMPLES / example, root / "apps" / example)
    write_app(root / "apps" / "broken", MINIMAL.replace("expose: port: 8080", "expose: port: 70000"))
    write_app(root / "apps" / "runaway", 'import "list"\n\n' + MINIMAL + RUNAWAY)
    return root


def local(example: str, env: str, mode: str = "cr", namespace: str = "argocd") -> list[dict[str, Any]]:
    result = run_cli("render", str(EXAMPLES / example), "--env", env, "--mode", mode, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    return list(yaml.safe_load_all(result.stdout))


@pytest.mark.parametrize(("example", "env"), [("parser", "prod"), ("webapp", "staging"), ("worker", "dev")])
def test_generate_by_parameter_equals_local_render(server: CmpServer, repo: Path, example: str, env: str) -> None:
    result = server.generate(repo, f"apps/{example}", app_name=f"{example}-anything",
                             parameters=[{"name": "environment", "string": env}])
    assert result.manifests == local(example, env)


def test_environment_from_the_application_name(server: CmpServer, repo: Path) -> None:
    result = server.generate(repo, "apps/webapp", app_name="shop-prod")
    assert [m["spec"]["environment"] for m in result.manifests] == ["prod"]


@pytest.fixture(scope="module")
def manifests_server(argocd_cmp_server: Any, plugin_dir: Path) -> CmpServer:
    """The plugin of a platform that renders the objects themselves: APPRAFTER_MODE in the sidecar's own env."""
    return argocd_cmp_server(plugin_dir, path=[VENV_BIN, str(resolve("cue").parent)],
                             env={"APPRAFTER_CUE_TIMEOUT": "3", "APPRAFTER_MODE": "manifests"})


def test_environment_from_plugin_env_and_the_sidecars_manifests_mode(manifests_server: CmpServer, repo: Path) -> None:
    result = manifests_server.generate(repo, "apps/parser", app_name="parser",
                                       plugin_env={"APPRAFTER_ENVIRONMENT": "dev"})
    assert result.manifests == local("parser", "dev", "manifests")
    assert "HTTPRoute" not in {m["kind"] for m in result.manifests}  # dev is vpn, not public


@pytest.mark.parametrize("plugin_env", [{"APPRAFTER_MODE": "manifests"}, {"apprafter_mode": "cr"},
                                        {"APPRAFTER_TIER": "team", "APPRAFTER_ENVIRONMENT": "dev"}])
def test_a_setting_of_the_platforms_as_plugin_env_is_refused_through_argo_cd(server: CmpServer, repo: Path,
                                                                             plugin_env: dict[str, str]) -> None:
    """What an Application's plugin.env, or a repository's .argocd-source.yaml, sets arrives as ARGOCD_ENV_<name>:
    refused by name, whatever the value, through Argo CD's own plugin server (issue 34)."""
    with pytest.raises(CmpError) as err:
        server.generate(repo, "apps/parser", app_name="parser-dev", plugin_env=plugin_env)
    name = next(k for k in plugin_env if k != "APPRAFTER_ENVIRONMENT")
    assert f"argocd: plugin env {name}: how the plugin renders is the platform's setting" in str(err.value)


def test_parameters_announce_the_declared_environments(server: CmpServer, repo: Path) -> None:
    announced = server.parameters(repo, "apps/parser", app_name="parser-staging")
    assert [p["name"] for p in announced] == ["environments", "environment"]  # dynamic first, then static
    assert announced[0]["array"] == ["dev", "prod", "staging"]
    assert "selects 'staging'" in announced[0]["tooltip"]


def test_no_environment_is_an_error_listing_the_declared_ones(server: CmpServer, repo: Path) -> None:
    with pytest.raises(CmpError, match="declared: dev, prod, staging"):
        server.generate(repo, "apps/parser", app_name="parser")


def test_broken_repo_surfaces_our_error_text(server: CmpServer, repo: Path) -> None:
    with pytest.raises(CmpError) as err:
        server.generate(repo, "apps/broken", app_name="demo-dev")
    assert ("apprafter/Application.cue:7:17: spec.base.expose.port: port 70000 is out of range: a port is an integer "
            "1-65535"
            in str(err.value))


def escaping_repo(tmp_path: Path, target: Path) -> Path:
    (tmp_path / "outside.cue").write_text(MINIMAL)
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "README.md").write_text("a repository with an escaping link\n")
    app = tmp_path / "repo" / "apps" / "escape" / "apprafter"
    app.mkdir(parents=True)
    (app / "Application.cue").symlink_to(target)
    return tmp_path / "repo"


def test_absolute_symlink_escape_is_refused(server: CmpServer, tmp_path: Path) -> None:
    # Argo CD re-roots an absolute link inside the unpacked repo, where it points to nothing: we refuse it.
    repo = escaping_repo(tmp_path, tmp_path / "outside.cue")
    with pytest.raises(CmpError, match=r"refused: the file is a symlink that does not resolve to a file inside"):
        server.generate(repo, "apps/escape", app_name="demo-dev")


def test_relative_symlink_escape_is_refused(server: CmpServer, tmp_path: Path) -> None:
    # A relative link that climbs out is refused by Argo CD's own unpack before the plugin runs: v3.1 says
    # "illegal filepath in symlink", v3.6 (an os.Root-based unpack) "path escapes from parent".
    repo = escaping_repo(tmp_path, Path("../../../../outside.cue"))
    with pytest.raises(CmpError, match=r"error decompressing tgz file: .*(illegal filepath in symlink|"
                                       r"error checking symlink .* path escapes from parent)"):
        server.generate(repo, "apps/escape", app_name="demo-dev")


def test_runaway_evaluation_is_stopped_inside_the_deadline(server: CmpServer, repo: Path) -> None:
    # the plugin's own budget (3 s here) ends it, not Argo CD's 60 s deadline: its message says which
    with pytest.raises(CmpError, match=r"did not finish within 3s|memory budget"):
        server.generate(repo, "apps/runaway", app_name="demo-dev", timeout=60)


def test_the_sidecar_env_never_reaches_cue(argocd_cmp_server: Any, plugin_dir: Path, repo: Path,
                                           tmp_path: Path) -> None:
    # CUE_EXPERIMENT is read by cue: handed to it, this value fails every evaluation and is quoted in the error.
    (tmp_path / "probe.cue").write_text("a: 1\n")
    leaked = subprocess.run([str(resolve("cue")), "export", "probe.cue"], cwd=tmp_path, capture_output=True,
                            text=True, env={**os.environ, "CUE_EXPERIMENT": SECRET_VALUE}, timeout=60, check=False)
    assert leaked.returncode != 0 and SECRET_VALUE in leaked.stderr  # the oracle: cue does read it
    server = argocd_cmp_server(plugin_dir, path=[VENV_BIN, str(resolve("cue").parent)],
                               env={"CUE_EXPERIMENT": SECRET_VALUE, "GIT_PASSWORD": SECRET_VALUE})
    ok = server.generate(repo, "apps/parser", app_name="parser-prod")
    assert ok.manifests == local("parser", "prod")  # cue ran without the sidecar's env
    with pytest.raises(CmpError) as err:
        server.generate(repo, "apps/broken", app_name="demo-dev")
    assert "port 70000 is out of range" in str(err.value) and SECRET_VALUE not in str(err.value) + server.log()


def test_every_emitted_object_passes_a_server_side_dry_run(server: CmpServer, manifests_server: CmpServer,
                                                           repo: Path, kube: KubeTestBed, tmp_path: Path) -> None:
    crds = tmp_path / "crds.yaml"
    crds.write_text(subprocess.run([*_apprafter(), "crds"], check=True, capture_output=True, text=True).stdout)
    kube.install_crds([crds])
    for example, app_name in (("parser", "parser-prod"), ("webapp", "shop-prod"), ("worker", "ingest-worker-dev")):
        for mode_of_the_sidecar in (server, manifests_server):
            result = mode_of_the_sidecar.generate(repo, f"apps/{example}", app_name=app_name, namespace=app_name)
            assert result.manifests
            kube.dry_run_apply(result.manifests, namespace=app_name)


def _apprafter() -> list[str]:
    return [sys.executable, "-m", "apprafter"]


def test_a_symlinked_app_directory_is_refused_not_guessed(server: CmpServer, tmp_path: Path) -> None:
    """Argo CD unpacks a relative link inside the repository; the app directory then resolves elsewhere, and
    the resolved working directory does not end with the source path: refused (main walked up from it)."""
    repo = tmp_path / "repo"
    write_app(repo / "real" / "shop", MINIMAL)
    (repo / "apps").mkdir()
    (repo / "apps" / "shop").symlink_to(Path("../real/shop"))
    with pytest.raises(CmpError, match=r"the working directory does not end with the source path"):
        server.generate(repo, "apps/shop", app_name="demo-dev")
    assert server.generate(repo, "real/shop", app_name="demo-dev").manifests[0]["kind"] == "Application"


def test_a_lowercase_plugin_env_name_works_as_written(server: CmpServer, repo: Path) -> None:
    result = server.generate(repo, "apps/parser", app_name="parser", plugin_env={"apprafter_environment": "staging"})
    assert [m["spec"]["environment"] for m in result.manifests] == ["staging"]
