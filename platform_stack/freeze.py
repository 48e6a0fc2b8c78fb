"""A component's version freeze (spec §3.11, §4.12): `spec.overrides.<component>.pin` set to the version it runs, so
a stack upgrade moves the others and not it. Pure: the PlatformStack in, the spec merge patch (or why not) out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from platform_stack.resource import NAME
from toolchain.errors import Problem, UserError

__all__ = ["FreezeRefused", "freeze_component", "frozen", "unfreeze_component"]


class FreezeRefused(UserError):
    """Why the freeze or unfreeze cannot be made (`reason`: one line, about the PlatformStack singleton)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__([Problem(f"platformstack/{NAME}", 0, 0, "", reason)])


def _overrides(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    overrides = (obj.get("spec") or {}).get("overrides") or {}
    return overrides if isinstance(overrides, Mapping) else {}


def frozen(obj: Mapping[str, Any]) -> dict[str, str]:
    """component -> the chart version spec.overrides pins it to."""
    return {name: str(o["pin"]) for name, o in sorted(_overrides(obj).items())
            if isinstance(o, Mapping) and isinstance(o.get("pin"), str) and o["pin"]}


def freeze_component(obj: Mapping[str, Any], component: str) -> tuple[dict[str, Any] | None, str]:
    """(the spec merge patch, or None when it is frozen there already; the version): pin `component` at the chart
    version status.components says runs."""
    running = {c.get("name"): c for c in (obj.get("status") or {}).get("components") or [] if isinstance(c, Mapping)}
    entry = running.get(component)
    if entry is None:
        known = ", ".join(sorted(str(n) for n in running if n)) or "none yet: nothing is applied"
        raise FreezeRefused(f"{component}: no such component in the running stack (components: {known})")
    version = entry.get("version")
    if not entry.get("enabled") or not isinstance(version, str) or not version:
        raise FreezeRefused(f"{component}: not enabled in the running stack: it has no version to freeze")
    if frozen(obj).get(component) == version:
        return None, version
    return {"overrides": {component: {"pin": version}}}, version


def unfreeze_component(obj: Mapping[str, Any], component: str) -> dict[str, Any] | None:
    """The spec merge patch that lets `component` follow the stack again (None: it is not frozen). An override that
    held only the pin is removed whole, so the spec reads as it did before the freeze."""
    override = _overrides(obj).get(component)
    if component not in frozen(obj) or not isinstance(override, Mapping):
        return None
    if any(k != "pin" for k in override):
        return {"overrides": {component: {"pin": None}}}
    if set(_overrides(obj)) == {component}:
        return {"overrides": None}
    return {"overrides": {component: None}}
