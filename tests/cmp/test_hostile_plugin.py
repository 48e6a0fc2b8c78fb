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


PLATFORMS = ("how the plugin renders is the platform's setting, made in the sidecar's own configuration; an "
             "Application's plugin.env or a repository's .argocd-source*.yaml cannot set it: remove it")


@pytest.mark.parametrize(("env", "expected"), [
    # Every setting that changes what the plugin emits is the sidecar's (issue 34): as plugin env it is refused by
    # name, whatever its value (never echoed), rather than used or ignored.
    ({"ARGOCD_ENV_APPRAFTER_DOMAIN": f"{SECRET} x"}, f"argocd: plugin env APPRAFTER_DOMAIN: {PLATFORMS}"),
    ({"ARGOCD_ENV_APPRAFTER_GATEWAY_NAMESPACE": ".."}, f"argocd: plugin env APPRAFTER_GATEWAY_NAMESPACE: {PLATFORMS}"),
    ({"ARGOCD_ENV_APPRAFTER_TIER": "team"}, f"argocd: plugin env APPRAFTER_TIER: {PLATFORMS}"),
    ({"ARGOCD_ENV_APPRAFTER_MODE": "manifests"}, f"argocd: plugin env APPRAFTER_MODE: {PLATFORMS}"),
    ({"ARGOCD_ENV_apprafter_mode": "manifests", "ARGOCD_ENV_APPRAFTER_GATEWAY_NAME": "x"},
     f"argocd: plugin env APPRAFTER_GATEWAY_NAME, apprafter_mode: {PLATFORMS}"),
    ({"APPRAFTER_MODE": "yaml"}, "apprafter: APPRAFTER_MODE must be one of cr, manifests: fix it in the sidecar's "
     "environment (the platform's setting)"),
    ({"ARGOCD_APP_NAMESPACE": "shop\nprod"}, "ARGOCD_APP_NAMESPACE: must be a DNS-1123 label (lowercase letters, "
     "digits and '-', at most 63 characters)"),
    ({"ARGOCD_ENV_APPRAFTER_ENVIRONMNET": "dev"}, "argocd: unknown plugin env APPRAFTER_ENVIRONMNET; known: "
     "APPRAFTER_ENVIRONMENT"),
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
    ({"ARGOCD_ENV_APPRAFTER_ENVIRONMENT": "dev", "ARGOCD_ENV_apprafter_environment": "prod"},
     "argocd: plugin env APPRAFTER_ENVIRONMENT and apprafter_environment set the same setting: keep one"),
    ({"APPRAFTER_CUE_TIMEOUT": "soon"}, "apprafter: APPRAFTER_CUE_TIMEOUT must be a number of seconds above 0 and "
     "at most 3600 (for example 20): fix it in the environment that runs apprafter"),
])
def test_a_bad_setting_is_one_line_naming_the_setting(repo: Path, env: dict[str, str], expected: str) -> None:
    app = repo / "apps" / "demo"
    code, out, err = generate(app, {"ARGOCD_APP_SOURCE_PATH": "apps/demo", **env})
    assert code in (1, 2) and out == "" and "Traceback" not in err
    assert err.splitlines() == [expected.replace("apps/demo/", "")]
    assert SECRET not in err


def test_the_mode_is_the_sidecars_and_nothing_an_application_sets_reaches_it(repo: Path) -> None:
    app, base = repo / "apps" / "demo", {"ARGOCD_APP_SOURCE_PATH": "apps/demo"}
    code, out, err = generate(app, {**base, "APPRAFTER_MODE": "manifests"})  # the sidecar container's own env
    assert code == 0, err
    assert [d["kind"] for d in yaml.safe_load_all(out)][:2] == ["ServiceAccount", "Deployment"]
    # A parameter arrives as ARGOCD_APP_PARAMETERS and PARAM_<NAME> (Argo CD's Environ): neither is a setting.
    code, out, err = generate(app, {**base, "PARAM_APPRAFTER_MODE": "manifests",
                                    "ARGOCD_APP_PARAMETERS": '[{"name": "apprafter_mode", "string": "manifests"}]'})
    assert code == 0, err
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["Application"]


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
                                    "APPRAFTER_MODE": "manifests"})
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
