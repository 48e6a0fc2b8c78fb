"""Reads Argo CD's plugin contract from the environment: parameters, plugin env, app name, source path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from renderer.errors import Problem, UserError

__all__ = ["ContractError", "EnvironmentChoice", "choose_environment", "repo_root", "settings"]

ENV_PREFIX = "ARGOCD_ENV_"
SETTING_PREFIX = ENV_PREFIX + "APPRAFTER_"
PARAMETER = "environment"


class ContractError(UserError):
    """Argo CD handed us something we cannot use (a malformed parameter list, an unknown setting)."""

    def __init__(self, message: str) -> None:
        super().__init__([Problem("argocd", 0, 0, "", message)])


def parameters(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """ARGOCD_APP_PARAMETERS: absent (no plugin block), the literal null (no parameters), or a JSON list."""
    raw = env.get("ARGOCD_APP_PARAMETERS")
    if raw is None or raw.strip() in ("", "null"):
        return []
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ContractError("ARGOCD_APP_PARAMETERS is not JSON") from None
    if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
        raise ContractError("ARGOCD_APP_PARAMETERS is not a list of parameters")
    return value


def environment_parameter(env: Mapping[str, str]) -> str | None:
    for param in parameters(env):
        if param.get("name") == PARAMETER:
            value = param.get("string")
            if not isinstance(value, str):
                raise ContractError("parameter 'environment' must be a string")
            return value.strip() or None
    return None


class EnvironmentChoice(NamedTuple):
    """The environment to render and where the choice came from (for error messages)."""

    name: str
    source: str


def choose_environment(env: Mapping[str, str], declared: list[str]) -> EnvironmentChoice | None:
    """Parameter, else ARGOCD_ENV_APPRAFTER_ENVIRONMENT, else the suffix of an `<app>-<env>` app name."""
    chosen = environment_parameter(env)
    if chosen:
        return EnvironmentChoice(chosen, "parameter 'environment'")
    setting = env.get(SETTING_PREFIX + "ENVIRONMENT", "").strip()
    if setting:
        return EnvironmentChoice(setting, "plugin env APPRAFTER_ENVIRONMENT")
    app_name = env.get("ARGOCD_APP_NAME", "")
    # Longest match first, so `shop-pre-prod` picks `pre-prod` over `prod`.
    for name in sorted(declared, key=len, reverse=True):
        if app_name.endswith("-" + name) and len(app_name) > len(name) + 1:
            return EnvironmentChoice(name, f"Application name {app_name!r}")
    return None


def settings(env: Mapping[str, str]) -> dict[str, str]:
    """ARGOCD_ENV_APPRAFTER_<X> plugin env entries, keyed by X (Argo CD does not upper-case names)."""
    return {k[len(SETTING_PREFIX):]: v for k, v in env.items() if k.startswith(SETTING_PREFIX)}


def repo_root(cwd: Path, env: Mapping[str, str]) -> Path:
    """The unpacked repository root: the working directory minus ARGOCD_APP_SOURCE_PATH."""
    source_path = env.get("ARGOCD_APP_SOURCE_PATH", "").strip().strip("/")
    root = cwd
    for part in Path(source_path).parts if source_path not in ("", ".") else ():
        if part == "..":
            raise ContractError("ARGOCD_APP_SOURCE_PATH leaves the repository")
        if part != ".":
            root = root.parent
    return root
