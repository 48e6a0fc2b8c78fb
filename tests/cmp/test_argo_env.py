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


def test_settings_keep_argo_cd_case() -> None:
    assert settings({"ARGOCD_ENV_APPRAFTER_MODE": "manifests", "ARGOCD_ENV_OTHER": "x", "APPRAFTER_MODE": "y"}) == {
        "MODE": "manifests"}


@pytest.mark.parametrize(("source_path", "up"), [("", 0), (".", 0), ("apps/shop", 2), ("apps/shop/", 2), ("a", 1)])
def test_repo_root_is_cwd_minus_source_path(tmp_path: Path, source_path: str, up: int) -> None:
    cwd = tmp_path / "r" / "apps" / "shop"
    expected = cwd
    for _ in range(up):
        expected = expected.parent
    assert repo_root(cwd, {"ARGOCD_APP_SOURCE_PATH": source_path}) == expected


def test_source_path_leaving_the_repo_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ContractError):
        repo_root(tmp_path, {"ARGOCD_APP_SOURCE_PATH": "../x"})
