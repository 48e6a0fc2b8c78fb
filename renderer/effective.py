"""The effective spec of one environment: environments[E] merged onto base with the spec's override-wins rules."""

from __future__ import annotations

from collections.abc import Mapping

from toolchain.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

__all__ = ["copied", "effective_spec", "merge"]

# How each field of an environment override combines with base (architecture.md, spec §3.1).
# Deep-merge by subfield, override wins. A value that is not a struct on either side (`health: false`) replaces.
SUBFIELD_MERGE = frozenset({"expose", "imagePolicy", "health"})
KEY_MERGE = frozenset({"env", "needs"})  # env: key by key; needs: an override replaces the whole entry per key
MAP_OF_MAP_MERGE = frozenset({"resources"})  # requests/limits merge key by key, independently


def copied(value: Any) -> Any:
    """A deep copy of a JSON-shaped value (mappings, lists, scalars), what copy.deepcopy makes of it, without `copy`
    and `weakref` on the render's path."""
    if isinstance(value, Mapping):
        return {key: copied(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(copied(item) for item in value)
    return value


def _copied_map(value: Mapping[str, Any]) -> dict[str, Any]:
    return {key: copied(item) for key, item in value.items()}


def _merge_subfields(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = _copied_map(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge_subfields(out[key], value)
        else:
            out[key] = copied(value)
    return out


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge one override onto base; neither argument is modified."""
    out = _copied_map(base)
    for key, value in override.items():
        if key in SUBFIELD_MERGE and isinstance(value, Mapping) and isinstance(base.get(key, {}), Mapping):
            out[key] = _merge_subfields(base.get(key, {}), value)
        elif key in KEY_MERGE:
            out[key] = {**copied(base.get(key, {})), **copied(value)}
        elif key in MAP_OF_MAP_MERGE:
            merged = _copied_map(base.get(key, {}))
            for group, entries in value.items():
                merged[group] = {**merged.get(group, {}), **entries}
            out[key] = merged
        else:
            out[key] = copied(value)
    return out


def effective_spec(spec: Mapping[str, Any], environment: str) -> dict[str, Any]:
    """Base merged with environments[environment]; `budget` is resolved to this environment's size.

    Raises KeyError when the environment is not declared (callers report it with the declared list).
    """
    override = spec.get("environments", {})[environment]
    out = merge(spec.get("base", {}), override)
    budget = spec.get("budget", {}).get(environment)
    if budget is not None:
        out["budget"] = budget
    return out


def spec_for(environment: str, effective: Mapping[str, Any]) -> dict[str, Any]:
    """An Application spec whose effective spec in `environment` is `effective` (effective_spec's inverse).

    The reconciler renders the last applied spec (status.lastAppliedSpec) through it while a change waits.
    """
    base = {k: copied(v) for k, v in effective.items() if k != "budget"}
    spec: dict[str, Any] = {"environment": environment, "base": base, "environments": {environment: {}}}
    if "budget" in effective:
        spec["budget"] = {environment: effective["budget"]}
    return spec
