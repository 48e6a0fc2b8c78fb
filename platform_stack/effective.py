"""The umbrella template's rule in Python: which components chart values enable, and their config."""

from __future__ import annotations

import copy
from typing import Any

from platform_stack.errors import StackError

ON_BY_DEFAULT = ("required", "default")


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


def effective_components(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {source (pin applied), namespace, syncWave, selfManaged, syncPolicy, values}, enabled only."""
    tier = values["tier"]
    overrides: dict[str, Any] = values.get("overrides") or {}
    for name in overrides:
        if name not in values["components"]:
            raise StackError(f"overrides.{name}: no such component in this chart")
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(values["components"]):
        component = values["components"][name]
        override = overrides.get(name) or {}
        if not enabled(name, component, tier, override):
            continue
        merged = deep_merge(component.get("values") or {}, component["tiers"][tier].get("values") or {})
        merged = deep_merge(merged, override.get("values") or {})
        source = dict(component["source"])
        if override.get("pin"):
            source["targetRevision"] = override["pin"]
        out[name] = {"source": source, "namespace": component["namespace"], "syncWave": component["syncWave"],
                     "selfManaged": component["selfManaged"], "syncPolicy": dict(component["syncPolicy"]),
                     "values": merged}
    return out


def with_overrides(values: dict[str, Any], tier: str | None,
                   overrides: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of chart values with `tier` and PlatformStack-style `overrides` applied (as helm -f would)."""
    out = copy.deepcopy(values)
    if tier is not None:
        out["tier"] = tier
    if overrides:
        out["overrides"] = deep_merge(out.get("overrides") or {}, overrides)
    return out
