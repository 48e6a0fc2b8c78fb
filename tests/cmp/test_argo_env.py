"""How the plugin reads Argo CD's contract: the environment choice, parameters, settings, repo root."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmp.argo_env import ContractError, choose_environment, parameters, repo_root, settings

DECLARED = ["dev", "prod", "pre-prod"]


@pytest.mark.parametrize(("env", "expected"), [
    ({"ARGOCD_APP_PARAMETERS": '[{"name": "environment", "string": "dev"}]', "ARGOCD_APP_NAME": "x-prod"}, "dev"),
    ({"ARGOCD_APP_PARAMETERS": "null", "ARGOCD_ENV_APPRAFTER_ENVIRONMENT": "prod"}, "prod"),
    ({"ARGOCD_APP_PARAMETERS": "[]", "ARGOCD_APP_NAME": "shop-prod"}, "prod"),
    ({"ARGOCD_APP_NAME": "shop-pre-prod"}, "pre-prod"),
    ({"ARGOCD_APP_PARAMETERS": '[{"name": "other", "string": "x"}]', "ARGOCD_APP_NAME": "shop-dev"}, "dev"),
    ({"ARGOCD_APP_PARAMETERS": '[{"name": "environment", "string": " "}]', "ARGOCD_APP_NAME": "a-dev"}, "dev"),
    ({"ARGOCD_APP_NAME": "shop"}, None),
    ({"ARGOCD_APP_NAME": "prod"}, None),
    ({}, None),
])
def test_environment_choice_order(env: dict[str, str], expected: str | None) -> None:
    choice = choose_environment(env, DECLARED)
    assert (choice.name if choice else None) == expected


def test_parameter_outside_the_declared_set_is_returned_for_a_clear_error() -> None:
    choice = choose_environment({"ARGOCD_APP_PARAMETERS": '[{"name": "environment", "string": "qa"}]'}, DECLARED)
    assert choice is not None and (choice.name, choice.source) == ("qa", "parameter 'environment'")


@pytest.mark.parametrize("raw", ["{", '{"name": "environment"}', '["x"]'])
def test_malformed_parameters_are_a_contract_error(raw: str) -> None:
    with pytest.raises(ContractError):
        parameters({"ARGOCD_APP_PARAMETERS": raw})


def test_absent_and_null_parameters_mean_none() -> None:
    assert parameters({}) == [] and parameters({"ARGOCD_APP_PARAMETERS": "null"}) == []


def test_settings_are_the_apprafter_plugin_env_entries() -> None:
    found = settings({"ARGOCD_ENV_APPRAFTER_ENVIRONMENT": "prod", "ARGOCD_ENV_OTHER": "x", "APPRAFTER_MODE": "y"})
    assert {k: (g.value, g.origin.setting) for k, g in found.items()} == {
        "ENVIRONMENT": ("prod", "plugin env APPRAFTER_ENVIRONMENT")}


@pytest.mark.parametrize("name", ["APPRAFTER_MODE", "apprafter_mode", "APPRAFTER_DOMAIN", "APPRAFTER_TIER",
                                  "APPRAFTER_GATEWAY_NAME", "Apprafter_Gateway_Namespace"])
def test_a_setting_of_the_platforms_is_refused_as_plugin_env_naming_it(name: str) -> None:
    # A repository's .argocd-source.yaml or an Application's plugin.env arrives as ARGOCD_ENV_<name>: refused,
    # never ignored and never used (issue 34: the mode switched the plugin out of the operator's gate).
    with pytest.raises(ContractError) as err:
        settings({f"ARGOCD_ENV_{name}": "manifests", "ARGOCD_ENV_APPRAFTER_ENVIRONMENT": "prod"})
    assert err.value.lines() == [f"argocd: plugin env {name}: how the plugin renders is the platform's setting, made "
                                 "in the sidecar's own configuration; an Application's plugin.env or a repository's "
                                 ".argocd-source*.yaml cannot set it: remove it"]


def test_a_lowercase_plugin_env_name_is_the_same_setting() -> None:
    # Argo CD passes plugin.env names as written: `apprafter_environment` means APPRAFTER_ENVIRONMENT.
    env = {"ARGOCD_ENV_apprafter_environment": "prod", "ARGOCD_APP_NAME": "shop-dev"}
    choice = choose_environment(env, DECLARED)
    assert choice is not None and (choice.name, choice.source) == ("prod", "plugin env apprafter_environment")


def test_two_spellings_of_one_setting_are_refused() -> None:
    with pytest.raises(ContractError, match="APPRAFTER_ENVIRONMENT and apprafter_environment set the same setting"):
        settings({"ARGOCD_ENV_APPRAFTER_ENVIRONMENT": "dev", "ARGOCD_ENV_apprafter_environment": "prod"})


@pytest.mark.parametrize(("source_path", "up"), [("", 0), (".", 0), ("apps/shop", 2), ("apps/shop/", 2),
                                                 ("./apps//shop", 2), ("shop", 1)])
def test_repo_root_is_cwd_minus_source_path(tmp_path: Path, source_path: str, up: int) -> None:
    cwd = tmp_path / "r" / "apps" / "shop"
    cwd.mkdir(parents=True)
    expected = cwd
    for _ in range(up):
        expected = expected.parent
    assert repo_root(cwd, {"ARGOCD_APP_SOURCE_PATH": source_path}) == expected


@pytest.mark.parametrize("source_path", ["../x", "a", "x/r/apps/shop/deeper", "other/shop", "/" * 3 + "..", "shop/.."])
def test_a_source_path_that_is_not_the_tail_of_the_working_directory_is_refused(tmp_path: Path,
                                                                               source_path: str) -> None:
    cwd = tmp_path / "r" / "apps" / "shop"
    cwd.mkdir(parents=True)
    with pytest.raises(ContractError):
        repo_root(cwd, {"ARGOCD_APP_SOURCE_PATH": source_path})


def test_the_root_is_never_the_filesystem_root(tmp_path: Path) -> None:
    with pytest.raises(ContractError):
        repo_root(Path("/tmp"), {"ARGOCD_APP_SOURCE_PATH": "tmp"})


def test_a_symlinked_directory_on_the_source_path(tmp_path: Path) -> None:
    """The resolved working directory does not end with the source path: refused, unless PWD names the
    directory the way Argo CD joined it (then that unresolved form gives the root)."""
    repo = tmp_path / "repo"
    (repo / "real" / "shop").mkdir(parents=True)
    (repo / "apps").mkdir()
    (repo / "apps" / "shop").symlink_to(repo / "real" / "shop")
    env = {"ARGOCD_APP_SOURCE_PATH": "apps/shop"}
    with pytest.raises(ContractError, match="does not end with the source path"):
        repo_root(repo / "real" / "shop", env)
    assert repo_root(repo / "real" / "shop", {**env, "PWD": str(repo / "apps" / "shop")}) == repo
    # A PWD naming another directory is ignored.
    with pytest.raises(ContractError):
        repo_root(repo / "real" / "shop", {**env, "PWD": str(tmp_path / "apps" / "shop")})
