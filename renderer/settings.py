"""Every setting the toolchain reads, checked in one place: type and pattern, one problem naming the setting.

Settings come from the platform file (`--platform`, the sidecar's APPRAFTER_PLATFORM_FILE), flags, the
plugin env (ARGOCD_ENV_APPRAFTER_ENVIRONMENT only: cmp.argo_env), Argo CD (ARGOCD_APP_NAMESPACE) and the process
environment (the limits APPRAFTER_CUE_TIMEOUT, APPRAFTER_CUE_MEMORY_MB and the plugin's APPRAFTER_MODE: the
sidecar's own, which no Application or repository reaches). Each is read when it is used, never at import.
A problem names the setting the way its user writes it (a platform-file key at its line, `--domain`,
`plugin env APPRAFTER_TIER`) and the rule it breaks; a value is never echoed (it may come from an
environment variable).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from renderer import patterns, userfile
from renderer.context import DEFAULTS, TIERS, PlatformContext
from renderer.errors import Problem, ToolFailure, UserError
from toolchain.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any

__all__ = ["Given", "Limits", "Origin", "SettingsError", "limits", "mode", "namespace", "platform_context",
           "read_platform_file"]

_INVALID = object()


class Origin(Record):  # Records, not dataclasses or typing.NamedTuples, here: start-up (toolchain.record)
    """Where a value came from, named the way its user sets it."""

    setting: str
    file: str = ""
    line: int = 0
    col: int = 0

    def problem(self, message: str) -> Problem:
        if self.file:
            return Problem(self.file, self.line or 1, self.col or 1, self.setting, message)
        return Problem(self.setting, 0, 0, "", message)


class Given(Record):
    """A value for a setting and where it came from."""

    value: Any
    origin: Origin


class Rule(Record):
    """What a setting must be (said as `must be <want>`) and how a valid value is taken."""

    want: str
    accept: Callable[[Any], Any]  # the value as used, or _INVALID

    def take(self, given: Given, problems: list[Problem]) -> Any:
        value = self.accept(given.value)
        if value is _INVALID:
            problems.append(given.origin.problem(f"must be {self.want}"))
        return value


def _when(check: Callable[[Any], bool]) -> Callable[[Any], Any]:
    return lambda value: value if check(value) else _INVALID


def one_of(values: tuple[str, ...]) -> Rule:
    return Rule(f"one of {', '.join(values)}", _when(lambda v: isinstance(v, str) and v in values))


def _families(value: Any) -> Any:
    if isinstance(value, str):
        value = [value]
    ok = isinstance(value, list) and 1 <= len(value) <= 2 and len(set(map(str, value))) == len(value) and all(
        v in ("ipv6", "ipv4") for v in value)
    return tuple(value) if ok else _INVALID


DNS_LABEL = Rule(patterns.RULES["_dnsLabel"], _when(patterns.dns_label))
DNS_NAME = Rule(patterns.RULES["_dnsName"], _when(patterns.dns_name))
IP_FAMILIES = Rule("ipv6 and/or ipv4, a list with each at most once", _families)
TIER = one_of(TIERS)
MAX_DRAIN_SECONDS = 300
# An int, not a bool (YAML's true is one to Python) nor a float or a string such as "5s".
DRAIN_SECONDS = Rule(f"a whole number of seconds from 0 to {MAX_DRAIN_SECONDS}",
                     _when(lambda v: type(v) is int and 0 <= v <= MAX_DRAIN_SECONDS))


class PlatformSetting(Record):
    """One PlatformContext field: its key in the platform file and its rule."""

    attr: str
    key: tuple[str, ...]
    rule: Rule


PLATFORM_SETTINGS = (
    PlatformSetting("domain", ("domain",), DNS_NAME),
    PlatformSetting("tier", ("tier",), TIER),
    PlatformSetting("ip_families", ("ipFamilies",), IP_FAMILIES),
    PlatformSetting("gateway_name", ("gateway", "name"), DNS_NAME),
    PlatformSetting("gateway_namespace", ("gateway", "namespace"), DNS_LABEL),
    PlatformSetting("gateway_drain_seconds", ("gateway", "drainSeconds"), DRAIN_SECONDS),
    PlatformSetting("cluster_issuer", ("clusterIssuer",), DNS_NAME),
    PlatformSetting("confidential_runtime_class", ("confidentialRuntimeClass",), DNS_NAME),
)
_BY_ATTR = {s.attr: s for s in PLATFORM_SETTINGS}
_PROVIDERS_KEY = "providerNamespaces"
_PROVIDER_PREFIX = "provider_namespace."
_SECTIONS = {"gateway": ("name", "namespace", "drainSeconds")}


def read_platform_file(path: Path) -> dict[str, Given]:
    """The settings a platform file gives (docs/application.md), each with its position; UserError on the shape."""
    from renderer import yaml_input

    display = userfile.shown(path)
    doc = yaml_input.parse(userfile.read_text(path, root=path.parent, what="the platform file"), display)
    if doc.data is None:
        return {}
    if not isinstance(doc.data, dict):
        raise doc.error((), "a platform file is a mapping of settings (domain, tier, gateway, ...)")
    known = sorted({s.key[0] for s in PLATFORM_SETTINGS} | {_PROVIDERS_KEY})
    problems: list[Problem] = []
    given: dict[str, Given] = {}

    def origin(path: tuple[str, ...]) -> Origin:
        return Origin(".".join(path), display, *doc.position(path))

    for key, value in doc.data.items():
        if key not in known:
            problems.append(doc.problem((key,), f"unknown platform setting; known: {', '.join(known)}", at_key=True))
        elif key in _SECTIONS or key == _PROVIDERS_KEY:
            if not isinstance(value, dict):
                problems.append(doc.problem((key,), "must be a mapping"))
                continue
            allowed = _SECTIONS.get(key) or tuple(dict(DEFAULTS.provider_namespaces))
            for sub in value:
                if sub not in allowed:
                    problems.append(doc.problem((key, sub), f"unknown key; known: {', '.join(allowed)}", at_key=True))
                elif key == _PROVIDERS_KEY:
                    given[_PROVIDER_PREFIX + sub] = Given(value[sub], origin((key, sub)))
    for setting in PLATFORM_SETTINGS:
        found: Any = doc.data
        for part in setting.key:
            found = found.get(part, _INVALID) if isinstance(found, dict) else _INVALID
        if found is not _INVALID:
            given[setting.attr] = Given(found, origin(setting.key))
    if problems:
        raise UserError(problems)
    return given


def platform_context(file: Path | None = None, given: Mapping[str, Given | None] | None = None) -> PlatformContext:
    """Defaults, then the platform file, then `given` (flags, plugin env; None entries ignored); all checked."""
    layered = read_platform_file(file) if file is not None else {}
    layered.update({k: v for k, v in (given or {}).items() if v is not None})
    problems: list[Problem] = []
    kwargs: dict[str, Any] = {}
    providers = dict(DEFAULTS.provider_namespaces)
    for name, value in layered.items():
        if name.startswith(_PROVIDER_PREFIX):
            providers[name[len(_PROVIDER_PREFIX):]] = DNS_LABEL.take(value, problems)
        else:
            kwargs[name] = _BY_ATTR[name].rule.take(value, problems)
    if problems:
        raise UserError(problems)
    kwargs["provider_namespaces"] = tuple(sorted(providers.items()))
    return PlatformContext(**kwargs)


def flags_context(file: Path | None, *, domain: str | None = None, tier: str | None = None) -> PlatformContext:
    """The context of a command's `--platform FILE`, `--domain` and `--tier` (render, operator and webhook alike)."""
    given = {"domain": None if domain is None else Given(domain, Origin("--domain")),
             "tier": None if tier is None else Given(tier, Origin("--tier"))}
    return platform_context(file, given)


def namespace(given: Given | None) -> str | None:
    """A namespace to stamp on output (--namespace, ARGOCD_APP_NAMESPACE): a DNS-1123 label, or None when unset."""
    if given is None or given.value in (None, ""):
        return None
    problems: list[Problem] = []
    value = DNS_LABEL.take(given, problems)
    if problems:
        raise UserError(problems)
    return str(value)


class SettingsError(ToolFailure):
    """A setting of the process environment (APPRAFTER_CUE_*) is unusable: the environment's fault (exit 2)."""


class Limits(Record):
    """The budget of one evaluation: wall time and data memory, for cue and the Python work around it."""

    timeout_s: float = 20.0
    memory_mb: int = 1024

    @property
    def output_bytes(self) -> int:
        """How much of cue's output is read (stdout and stderr each): 1/32 of the memory budget, at least 1 MiB."""
        return max(1 << 20, (self.memory_mb << 20) // 32)


DEFAULT_LIMITS = Limits()
TIMEOUT_ENV, MEMORY_ENV = "APPRAFTER_CUE_TIMEOUT", "APPRAFTER_CUE_MEMORY_MB"
MAX_TIMEOUT_S, MIN_MEMORY_MB, MAX_MEMORY_MB = 3600.0, 64, 1 << 20


MODE_ENV = "APPRAFTER_MODE"


def mode(env: Mapping[str, str] | None = None) -> str:
    """How the plugin renders: `cr` (the default) or `manifests`, set in the sidecar's own environment by the platform
    (never plugin env: cmp.argo_env refuses that); SettingsError naming the variable."""
    from renderer.names import MODES

    env = os.environ if env is None else env
    raw = env.get(MODE_ENV, "").strip() or "cr"
    if raw not in MODES:
        raise SettingsError(f"{MODE_ENV} must be one of {', '.join(MODES)}: fix it in the sidecar's environment (the "
                            "platform's setting)")
    return raw


def limits(env: Mapping[str, str] | None = None) -> Limits:
    """The limits the environment sets (read now, not at import); SettingsError naming the variable."""
    env = os.environ if env is None else env
    timeout, memory = DEFAULT_LIMITS.timeout_s, DEFAULT_LIMITS.memory_mb
    raw = env.get(TIMEOUT_ENV, "").strip()
    if raw:
        try:
            timeout = float(raw)
        except ValueError:
            timeout = float("nan")
        if not 0 < timeout <= MAX_TIMEOUT_S:
            raise SettingsError(f"{TIMEOUT_ENV} must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g} "
                                "(for example 20): fix it in the environment that runs apprafter")
    raw = env.get(MEMORY_ENV, "").strip()
    if raw:
        memory = int(raw) if raw.isdigit() and len(raw) < 10 else -1
        if not MIN_MEMORY_MB <= memory <= MAX_MEMORY_MB:
            raise SettingsError(f"{MEMORY_ENV} must be a whole number of MiB from {MIN_MEMORY_MB} to {MAX_MEMORY_MB} "
                                "(for example 1024): fix it in the environment that runs apprafter")
    return Limits(timeout, memory)
