"""Spec §4.5 (ADR 0053) on the stack: no platform pod is BestEffort. Every container a component declares in
`resourcePaths` gets a CPU and memory request and a memory limit on every tier the component can run on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from platform_stack.effective import deep_merge

__all__ = ["REQUIRED", "resource_gaps"]

# Burstable, as the spec's governance rule says: requests for both, a memory limit (no CPU limit required).
REQUIRED = (("requests", "cpu"), ("requests", "memory"), ("limits", "memory"))


def _at(values: Any, path: Sequence[str | int]) -> Any:
    for key in path:
        if isinstance(key, int):
            values = values[key] if isinstance(values, list) and key < len(values) else None
        else:
            values = values.get(key) if isinstance(values, dict) else None
    return values


def resource_gaps(evaluated: dict[str, Any]) -> list[tuple[str, str]]:
    """(component, `components.<name>.tiers.<tier>: values.<path>: no <field>`) for each declared container short
    of REQUIRED."""
    gaps: list[tuple[str, str]] = []
    for name, component in sorted(evaluated["values"]["components"].items()):
        for tier, entry in sorted(component["tiers"].items()):
            if entry["availability"] == "unavailable":
                continue
            values = deep_merge(component.get("values") or {}, entry.get("values") or {})
            for path in evaluated["resourcePaths"].get(name, []):
                resources = _at(values, path)
                where = ".".join(str(key) for key in path)
                missing = [".".join(field) for field in REQUIRED if not isinstance(_at(resources, field), str | int)]
                gaps += [(name, f"components.{name}.tiers.{tier}: values.{where}: no {field}") for field in missing]
    return gaps
