"""Reads Argo CD's plugin contract from the environment: parameters, plugin env, app name, source path.

Everything here is the tenant's to set (an Application's parameters and `plugin.env`, which a repository can also set
through `.argocd-source.yaml`, which Argo CD's repo-server merges over the source), so it chooses only the
environment, and the renderer checks it; how the plugin renders is the sidecar's own configuration
(renderer.settings.mode, the platform file), which no `ARGOCD_ENV_*` or `PARAM_*` name can reach.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from renderer import patterns
from renderer.errors import Problem, UserError
from renderer.settings import Given, Origin
from toolchain.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any

__all__ = ["ContractError", "EnvironmentChoice", "choose_environment", "repo_root", "settings"]

ENV_PREFIX = "ARGOCD_ENV_"
SETTING_PREFIX = "APPRAFTER_"
TENANT_SETTINGS = ("ENVIRONMENT",)  # the one plugin env a repository or an Application may set
# Plugin env before issue 34, now the sidecar's alone: named in the refusal so an old Application gets told why.
PLATFORM_SETTINGS = ("MODE", "DOMAIN", "TIER", "GATEWAY_NAME", "GATEWAY_NAMESPACE")
PARAMETER = "environment"
MAX_PARAMETERS_BYTES = 64 << 10  # Argo CD's parameters for one app: a few names and values


class ContractError(UserError):
    """Argo CD handed us something we cannot use (a malformed parameter list, an unknown setting)."""

    def __init__(self, message: str) -> None:
        super().__init__([Problem("argocd", 0, 0, "", message)])


def _parameter_ok(param: Any) -> bool:
    """Argo CD's shape: {"name": str, and at most one of string | array of str | map of str to str}."""
    if not isinstance(param, dict) or not isinstance(param.get("name"), str):
        return False
    string, array, mapping = param.get("string", ""), param.get("array", []), param.get("map", {})
    return (isinstance(string, str) and isinstance(array, list) and all(isinstance(v, str) for v in array)
            and isinstance(mapping, dict) and all(isinstance(v, str) for v in mapping.values()))


def parameters(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """ARGOCD_APP_PARAMETERS: absent (no plugin block), the literal null (no parameters), or a JSON list."""
    raw = env.get("ARGOCD_APP_PARAMETERS")
    if raw is None or raw.strip() in ("", "null"):
        return []
    if len(raw) > MAX_PARAMETERS_BYTES:
        raise ContractError(f"ARGOCD_APP_PARAMETERS is larger than {MAX_PARAMETERS_BYTES} bytes")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise ContractError("ARGOCD_APP_PARAMETERS is not JSON") from None
    except RecursionError:
        raise ContractError("ARGOCD_APP_PARAMETERS is nested too deeply") from None
    if not isinstance(value, list) or not all(_parameter_ok(p) for p in value):
        raise ContractError('ARGOCD_APP_PARAMETERS is not a list of parameters ({"name": ..., "string" | "array" '
                            '| "map": ...})')
    return value


def environment_parameter(env: Mapping[str, str]) -> str | None:
    for param in parameters(env):
        if param["name"] == PARAMETER:
            if "string" not in param:
                raise ContractError("parameter 'environment' must be a string")
            return str(param["string"]).strip() or None
    return None


class EnvironmentChoice(Record):
    """The environment to render and where the choice came from (for error messages)."""

    name: str
    source: str

    @property
    def shown(self) -> str:
        """The name for a message: only when it could be one (it comes from an environment variable)."""
        return repr(self.name) if patterns.dns_label(self.name) else "(not a DNS-1123 label)"


def choose_environment(env: Mapping[str, str], declared: list[str]) -> EnvironmentChoice | None:
    """Parameter, else plugin env APPRAFTER_ENVIRONMENT, else the suffix of an `<app>-<env>` app name."""
    chosen = environment_parameter(env)
    if chosen:
        return EnvironmentChoice(chosen, "parameter 'environment'")
    setting = settings(env).get("ENVIRONMENT")
    if setting is not None and str(setting.value).strip():
        return EnvironmentChoice(str(setting.value).strip(), setting.origin.setting)
    app_name = env.get("ARGOCD_APP_NAME", "")
    # Longest match first, so `shop-pre-prod` picks `pre-prod` over `prod`.
    for name in sorted(declared, key=len, reverse=True):
        if app_name.endswith("-" + name) and len(app_name) > len(name) + 1:
            return EnvironmentChoice(name, f"Application name {app_name!r}")
    return None


def settings(env: Mapping[str, str]) -> dict[str, Given]:
    """Plugin env APPRAFTER_<X> entries (ARGOCD_ENV_APPRAFTER_<X>), keyed by X upper-cased: only TENANT_SETTINGS.

    Argo CD passes plugin env names as written, so `apprafter_environment` is the same setting as
    `APPRAFTER_ENVIRONMENT` (a user means it); two spellings of one setting are refused, not ranked. A setting of the
    platform's (the mode, the platform context) is refused, naming it, rather than ignored: a render it would have
    changed must not pass for one it did not.
    """
    out: dict[str, Given] = {}
    written: dict[str, str] = {}
    for key in sorted(env):
        name = key[len(ENV_PREFIX):] if key.startswith(ENV_PREFIX) else ""
        if not name.upper().startswith(SETTING_PREFIX):
            continue
        setting = name.upper()[len(SETTING_PREFIX):]
        if setting in written:
            raise ContractError(f"plugin env {written[setting]} and {name} set the same setting: keep one")
        written[setting] = name
        out[setting] = Given(env[key], Origin(f"plugin env {name}"))
    platform = sorted(written[s] for s in out if s in PLATFORM_SETTINGS)
    if platform:
        raise ContractError(f"plugin env {', '.join(platform)}: how the plugin renders is the platform's setting, made "
                            "in the sidecar's own configuration; an Application's plugin.env or a repository's "
                            ".argocd-source*.yaml cannot set it: remove it")
    unknown = sorted(written[s] for s in out if s not in TENANT_SETTINGS)
    if unknown:
        raise ContractError(f"unknown plugin env {', '.join(unknown)}; known: "
                            f"{', '.join(SETTING_PREFIX + s for s in TENANT_SETTINGS)}")
    return out


def repo_root(cwd: Path, env: Mapping[str, str]) -> Path:
    """The repository root Argo CD unpacked: the working directory minus ARGOCD_APP_SOURCE_PATH.

    The working directory is taken as named (PWD when it names this directory, else the resolved one), and
    the source path must be its suffix, component by component. Anything else (a source path through a
    symlinked directory, or deeper than the tree) is refused rather than guessed: a guess could land on a
    parent of the repository.
    """
    parts = [p for p in env.get("ARGOCD_APP_SOURCE_PATH", "").strip().split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ContractError("ARGOCD_APP_SOURCE_PATH leaves the repository ('..')")
    named: list[Path] = []
    pwd = env.get("PWD", "")
    if os.path.isabs(pwd) and _same_directory(pwd, cwd):
        named.append(Path(os.path.normpath(pwd)))
    named.append(Path(os.path.realpath(cwd)))
    for directory in named:
        keep = len(directory.parts) - len(parts)
        if keep >= 2 and list(directory.parts[keep:]) == parts:
            return Path(*directory.parts[:keep])
    raise ContractError("the working directory does not end with the source path (ARGOCD_APP_SOURCE_PATH): "
                        "refusing to guess the repository root (is a directory on the source path a symlink?)")


def app_directory(root: Path, env: Mapping[str, str]) -> Path:
    """The app's directory, resolved against the repository root (never against the working directory)."""
    parts = [p for p in env.get("ARGOCD_APP_SOURCE_PATH", "").strip().split("/") if p not in ("", ".")]
    return root.joinpath(*parts)


def _same_directory(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
