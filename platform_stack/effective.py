"""The umbrella template's rule in Python: which components chart values enable, and their config."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from typing import Any

from platform_stack.errors import StackError
from toolchain.errors import USER_EXIT, AppRafterError

__all__ = ["ValuesError", "check_values", "deep_merge", "effective_components", "enabled", "retired_components",
           "with_overrides"]

ON_BY_DEFAULT = ("required", "default")
AVAILABILITY = ("required", "default", "opt-in", "unavailable")
_TYPES: dict[type, str] = {dict: "a mapping", str: "a string", int: "an integer", bool: "true or false"}
# What the umbrella template (and effective_components) reads of each component, and its type.
_COMPONENT = {"source": dict, "namespace": str, "syncWave": int, "enabled": bool, "selfManaged": bool,
              "syncPolicy": dict, "tiers": dict}


class ValuesError(AppRafterError):
    """Chart values effective_components cannot read; `path` says where (callers add the file and line)."""

    exit_code = USER_EXIT

    def __init__(self, path: tuple[str, ...], message: str) -> None:
        super().__init__(f"{'.'.join(path)}: {message}")
        self.path, self.message = path, message


def _need(value: Any, path: tuple[str, ...], kind: type, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValuesError(path, f"expected {_TYPES[kind]}")


def check_values(values: Any) -> None:
    """Every field effective_components reads has the type it expects (fail closed on anything else)."""
    _need(values, (), dict)
    _need(values.get("tier"), ("tier",), str)
    _need(values.get("domain"), ("domain",), str, optional=True)
    _need(values.get("components"), ("components",), dict)
    for name, component in values["components"].items():
        at = ("components", name)
        _need(component, at, dict)
        for key, kind in _COMPONENT.items():
            _need(component.get(key), (*at, key), kind)
        _need(component.get("values"), (*at, "values"), dict, optional=True)
        _need(component.get("passDomain"), (*at, "passDomain"), bool, optional=True)
        _need(component.get("passPlatform"), (*at, "passPlatform"), bool, optional=True)
        for key in ("repoURL", "chart", "targetRevision"):
            _need(component["source"].get(key), (*at, "source", key), str)
        for tier, entry in component["tiers"].items():
            _need(entry, (*at, "tiers", tier), dict)
            if entry.get("availability") not in AVAILABILITY:
                raise ValuesError((*at, "tiers", tier, "availability"), f"expected one of {', '.join(AVAILABILITY)}")
            _need(entry.get("values"), (*at, "tiers", tier, "values"), dict, optional=True)
    _need(values.get("overrides"), ("overrides",), dict, optional=True)
    for name, override in (values.get("overrides") or {}).items():
        at = ("overrides", name)
        _need(override, at, dict, optional=True)
        for key, kind in (("pin", str), ("enabled", bool), ("values", dict)):
            _need((override or {}).get(key), (*at, key), kind, optional=True)


def deep_merge(dst: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    """Merge `src` into a copy of `dst`: maps key by key, else replace, None deletes (as _helpers.tpl)."""
    out = copy.deepcopy(dst)
    for key, value in src.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def enabled(name: str, component: dict[str, Any], tier: str, override: dict[str, Any]) -> bool:
    """Tier availability, then the component's stack-wide switch, then overrides.<name>.enabled."""
    tier_entry = component["tiers"].get(tier)
    if tier_entry is None:
        raise StackError(f"tier: {tier} is not a tier of this chart")
    availability = tier_entry["availability"]
    on = bool(component["enabled"]) and availability in ON_BY_DEFAULT
    if "enabled" in override:
        wanted = bool(override["enabled"])
        if availability == "required" and not wanted:
            raise StackError(f"overrides.{name}.enabled: {name} is required on tier {tier} and cannot be "
                             "disabled")
        if availability == "unavailable" and wanted:
            raise StackError(f"overrides.{name}.enabled: {name} is not available on tier {tier}")
        on = wanted
    return on


def effective_components(values: dict[str, Any], retired: Collection[str] = ()) -> dict[str, dict[str, Any]]:
    """name -> {source (pin applied), namespace, syncWave, selfManaged, syncPolicy, values}, enabled only.
    `retired`: components the chart's release history names and it no longer has (`retired_components`), which an
    override may only turn off, a no-op (the chart's schema and template say the same)."""
    check_values(values)
    tier = values["tier"]
    overrides: dict[str, Any] = values.get("overrides") or {}
    for name, override in overrides.items():
        if name in values["components"]:
            continue
        if name not in retired:
            raise StackError(f"overrides.{name}: no such component in this chart")
        if override != {"enabled": False}:
            raise StackError(f"overrides.{name}: {name} is no longer in this stack: an override may only keep it "
                             "turned off (enabled: false); remove the rest")
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(values["components"]):
        component = values["components"][name]
        override = overrides.get(name) or {}
        if not enabled(name, component, tier, override):
            continue
        merged = deep_merge(component.get("values") or {}, component["tiers"][tier].get("values") or {})
        if component.get("passDomain") and values.get("domain"):
            merged["domain"] = values["domain"]
        if component.get("passPlatform"):
            merged = deep_merge(merged, {"platform": {"tier": tier, **({"domain": values["domain"]}
                                                                       if values.get("domain") else {})}})
        merged = deep_merge(merged, override.get("values") or {})
        source = dict(component["source"])
        if override.get("pin"):
            source["targetRevision"] = override["pin"]
        out[name] = {"source": source, "namespace": component["namespace"], "syncWave": component["syncWave"],
                     "selfManaged": component["selfManaged"], "syncPolicy": dict(component["syncPolicy"]),
                     "values": merged}
    return out


def retired_components(values: dict[str, Any], history: Mapping[str, Any]) -> frozenset[str]:
    """The components a chart's release history (compatibility.json) names that its values no longer have."""
    named = {str(name) for entry in history.values() if isinstance(entry, Mapping)
             for name in (entry.get("components") or {})}
    return frozenset(named - set(values.get("components") or {}))


def with_overrides(values: dict[str, Any], tier: str | None,
                   overrides: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of chart values with `tier` and PlatformStack-style `overrides` applied (as helm -f would)."""
    out = copy.deepcopy(values)
    if tier is not None:
        out["tier"] = tier
    if overrides:
        out["overrides"] = deep_merge(out.get("overrides") or {}, overrides)
    return out
