"""The plugin under hostile Argo CD input (issue 12): settings, parameters, source paths. One line, no trace.

Runs `apprafter cmp generate` as Argo CD does (its env, the app directory as working directory) with the
real cue; tests/cmp/test_conformance.py runs a few of these through Argo CD's own plugin server.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.renderer.helpers import MINIMAL, assert_clean_failure, run_cli, write_app

SECRET = "Sidecar_value_never_printed"


def generate(cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    full = {"ARGOCD_APP_NAME": "demo-dev", "ARGOCD_APP_SOURCE_PATH": ".", "PWD": str(cwd), **env}
    result = run_cli("cmp", "generate", cwd=cwd, env=full)
    return result.returncode, result.stdout, result.stderr


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write_app(tmp_path / "repo" / "apps" / "demo", MINIMAL)
    return tmp_path / "repo"


@pytest.mark.parametrize(("env", "expected"), [
    ({"ARGOCD_ENV_APPRAFTER_DOMAIN": f"{SECRET} x"}, "plugin env APPRAFTER_DOMAIN: must be a DNS name (DNS-1123 "
     "labels joined by '.', at most 253 characters)"),
    ({"ARGOCD_ENV_APPRAFTER_DOMAIN": "apps.example.com\n"}, "plugin env APPRAFTER_DOMAIN: must be a DNS name "
     "(DNS-1123 labels joined by '.', at most 253 characters)"),
    ({"ARGOCD_ENV_APPRAFTER_GATEWAY_NAMESPACE": ".."}, "plugin env APPRAFTER_GATEWAY_NAMESPACE: must be a DNS-1123 "
     "label (lowercase letters, digits and '-', at most 63 characters)"),
    ({"ARGOCD_ENV_APPRAFTER_TIER": "gold"}, "plugin env APPRAFTER_TIER: must be one of dev, solo, team, "
     "production, regulated"),
    ({"ARGOCD_ENV_APPRAFTER_MODE": "yaml"}, "plugin env APPRAFTER_MODE: must be one of cr, manifests"),
    ({"ARGOCD_APP_NAMESPACE": "shop\nprod"}, "ARGOCD_APP_NAMESPACE: must be a DNS-1123 label (lowercase letters, "
     "digits and '-', at most 63 characters)"),
    ({"ARGOCD_ENV_APPRAFTER_ENVIRONMNET": "dev"}, "argocd: unknown plugin env APPRAFTER_ENVIRONMNET; known: "
     "APPRAFTER_DOMAIN, APPRAFTER_ENVIRONMENT, APPRAFTER_GATEWAY_NAME, APPRAFTER_GATEWAY_NAMESPACE, APPRAFTER_MODE, "
     "APPRAFTER_TIER"),
    ({"ARGOCD_APP_PARAMETERS": "[" * 35000 + "]" * 35000}, "argocd: ARGOCD_APP_PARAMETERS is larger than "
     "65536 bytes"),
    ({"ARGOCD_APP_PARAMETERS": "[" * 10000 + "]" * 10000}, "argocd: ARGOCD_APP_PARAMETERS is nested too deeply"),
    ({"ARGOCD_APP_PARAMETERS": '[{"name": "environment", "string": {"deep": [1]}}]'},
     'argocd: ARGOCD_APP_PARAMETERS is not a list of parameters ({"name": ..., "string" | "array" | "map": ...})'),
    ({"ARGOCD_APP_PARAMETERS": '[{"name": 7}]'},
     'argocd: ARGOCD_APP_PARAMETERS is not a list of parameters ({"name": ..., "string" | "array" | "map": ...})'),
    ({"ARGOCD_APP_PARAMETERS": f'[{{"name": "environment", "string": "{SECRET}"}}]'},
     "apps/demo/apprafter/Application.cue:9:2: spec.environments: environment (not a DNS-1123 label) (from "
     "parameter 'environment') is not declared; declared: dev, prod"),
    ({"ARGOCD_ENV_APPRAFTER_MODE": "cr", "ARGOCD_ENV_apprafter_mode": "manifests"},
     "argocd: plugin env APPRAFTER_MODE and apprafter_mode set the same setting: keep one"),
    ({"APPRAFTER_CUE_TIMEOUT": "soon"}, "apprafter: APPRAFTER_CUE_TIMEOUT must be a number of seconds above 0 and "
     "at most 3600 (for example 20): fix it in the environment that runs apprafter"),
])
def test_a_bad_setting_is_one_line_naming_the_setting(repo: Path, env: dict[str, str], expected: str) -> None:
    app = repo / "apps" / "demo"
    code, out, err = generate(app, {"ARGOCD_APP_SOURCE_PATH": "apps/demo", **env})
    assert code in (1, 2) and out == "" and "Traceback" not in err
    assert err.splitlines() == [expected.replace("apps/demo/", "")]
    assert SECRET not in err


def test_a_lowercase_environment_setting_selects_the_environment(repo: Path) -> None:
    app = repo / "apps" / "demo"
    code, out, err = generate(app, {"ARGOCD_APP_SOURCE_PATH": "apps/demo", "ARGOCD_APP_NAME": "demo",
                                    "ARGOCD_ENV_apprafter_environment": "prod"})
    assert code == 0, err
    assert [doc["spec"]["environment"] for doc in yaml.safe_load_all(out)] == ["prod"]


def test_the_platform_file_of_the_sidecar_is_checked_and_named(repo: Path, tmp_path: Path) -> None:
    platform = tmp_path / "platform.yaml"
    platform.write_text("tier: solo\ngateway:\n  namespace: Bad_NS\n")
    app = repo / "apps" / "demo"
    code, out, err = generate(app, {"ARGOCD_APP_SOURCE_PATH": "apps/demo", "APPRAFTER_PLATFORM_FILE": str(platform),
                                    "ARGOCD_ENV_APPRAFTER_MODE": "manifests"})
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"{platform}:3:14: gateway.namespace: must be a DNS-1123 label (lowercase letters, "
                                "digits and '-', at most 63 characters)"]


def test_a_fifo_as_the_sidecar_platform_file_is_refused(repo: Path, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "platform.yaml")
    app = repo / "apps" / "demo"
    code, out, err = generate(app, {"ARGOCD_APP_SOURCE_PATH": "apps/demo",
                                    "APPRAFTER_PLATFORM_FILE": str(tmp_path / "platform.yaml")})
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"{tmp_path / 'platform.yaml'}:1:1: refused: the platform file is a FIFO, not a "
                                "regular file"]


# 4. The repository root comes from Argo CD's source path, never from a walk up a resolved path.

def test_a_source_path_deeper_than_the_tree_is_refused_and_nothing_outside_is_read(tmp_path: Path) -> None:
    """On main this walked up to / and quoted a file outside the repository in its error."""
    (tmp_path / "apprafter").mkdir()
    (tmp_path / "apprafter" / "Application.cue").write_text(f'"{SECRET}": [\n')  # outside the repository
    repo = tmp_path / "work" / "repo"
    write_app(repo / "a", MINIMAL)
    result = run_cli("cmp", "generate", cwd=repo / "a", env={
        "ARGOCD_APP_NAME": "demo-dev", "ARGOCD_APP_SOURCE_PATH": "x/y/z/a", "PWD": str(repo / "a")})
    assert assert_clean_failure(result, 1) == [
        "argocd: the working directory does not end with the source path (ARGOCD_APP_SOURCE_PATH): refusing to "
        "guess the repository root (is a directory on the source path a symlink?)"]
    assert SECRET not in result.stderr


def test_a_symlinked_app_directory_is_refused_without_the_unresolved_path(repo: Path) -> None:
    (repo / "links").mkdir()
    (repo / "links" / "demo").symlink_to(repo / "apps" / "demo")
    resolved = repo / "apps" / "demo"
    code, out, err = generate(resolved, {"ARGOCD_APP_SOURCE_PATH": "links/demo", "PWD": ""})
    assert (code, out) == (1, "") and "does not end with the source path" in err
    code, out, err = generate(resolved, {"ARGOCD_APP_SOURCE_PATH": "links/demo", "PWD": str(repo / "links" / "demo")})
    assert code == 0, err
    assert [doc["kind"] for doc in yaml.safe_load_all(out)] == ["Application"]
