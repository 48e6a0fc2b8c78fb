"""Fail-closed reading of an effective spec: every field the classifier reads has the type it expects."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from toolchain.errors import USER_EXIT, AppRafterError

__all__ = ["Unreadable", "check_spec", "env_value", "json_value"]


class Unreadable(AppRafterError):
    """Input the classifier cannot read; never classified (an error, not "safe")."""

    exit_code = USER_EXIT

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


# Every top-level field of an effective spec (the schema's #Workload plus the resolved budget).
KNOWN_FIELDS = frozenset({
    "image", "replicas", "expose", "needs", "env", "connects", "autoscale", "resources", "imagePolicy",
    "confidential", "network", "command", "args", "budget", "health",
})
HEALTH_FIELDS = frozenset({"readiness", "liveness", "startup", "progressDeadlineSeconds"})
PROBE_FIELDS = frozenset({"path", "port", "initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold"})
NETWORKS = ("public", "internal", "vpn")
RESOLVE = ("off", "digest")


def json_value(value: Any, field: str) -> None:
    """Plain JSON only: string keys, finite numbers, no other Python types."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Unreadable(field, "not a finite number")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            json_value(item, f"{field}[{i}]")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise Unreadable(field, f"key {key!r} is not a string")
            json_value(item, f"{field}.{key}" if field else key)
        return
    raise Unreadable(field, f"{type(value).__name__} is not a JSON value")


def mapping(spec: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = spec.get(key, {})
    if not isinstance(value, Mapping):
        raise Unreadable(key, "expected a mapping")
    return value


def optional_str(value: Any, field: str, allowed: tuple[str, ...] | None = None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or (allowed is not None and value not in allowed):
        want = f"one of {', '.join(allowed)}" if allowed else "a string"
        raise Unreadable(field, f"expected {want}, got {value!r}"[:200])
    return value


def optional_int(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Unreadable(field, f"expected a non-negative integer, got {value!r}"[:200])
    return value


def check_spec(spec: Any) -> Mapping[str, Any]:
    """The effective spec if every field the rules read is well-formed; Unreadable otherwise."""
    if not isinstance(spec, Mapping):
        raise Unreadable("", "the effective spec is not a mapping")
    json_value(spec, "")
    unknown = sorted(set(spec) - KNOWN_FIELDS)
    if unknown:
        raise Unreadable(unknown[0], "field the classifier does not know (fail closed: update the classifier)")
    optional_str(spec.get("image"), "image")
    optional_int(spec.get("replicas"), "replicas")
    expose = mapping(spec, "expose")
    optional_str(expose.get("network"), "expose.network", NETWORKS)
    optional_str(expose.get("hostname"), "expose.hostname")
    optional_int(expose.get("port"), "expose.port")
    for name, need in mapping(spec, "needs").items():
        if not isinstance(need, Mapping):
            raise Unreadable(f"needs.{name}", "expected a mapping")
        optional_str(need.get("version"), f"needs.{name}.version")
    for key, value in mapping(spec, "env").items():
        env_value(value, f"env.{key}")
    optional_str(mapping(spec, "imagePolicy").get("resolve"), "imagePolicy.resolve", RESOLVE)
    for key in ("autoscale", "resources", "connects", "network"):
        mapping(spec, key)
    _check_health(spec.get("health"))
    return spec


def _check_health(health: Any) -> None:
    """health is absent, false, or a struct of known probes whose fields have their types."""
    if health is None or health is False:
        return
    if not isinstance(health, Mapping):
        raise Unreadable("health", "expected false or a mapping")
    for key, value in health.items():
        field = f"health.{key}"
        if key not in HEALTH_FIELDS:
            raise Unreadable(field, "field the classifier does not know (fail closed: update the classifier)")
        if key == "progressDeadlineSeconds":
            optional_int(value, field)
            continue
        if not isinstance(value, Mapping):
            raise Unreadable(field, "expected a mapping")
        for name, setting in value.items():
            if name not in PROBE_FIELDS:
                raise Unreadable(f"{field}.{name}", "field the classifier does not know (fail closed)")
            if name == "path":
                optional_str(setting, f"{field}.path")
            else:
                optional_int(setting, f"{field}.{name}")


def env_value(value: Any, field: str) -> tuple[str, str]:
    """(kind, target) of an env value: ("literal", text), ("claim", "<need>/<field>"), ("secret", "<name>/<key>")."""
    if isinstance(value, str):
        return "literal", value
    if isinstance(value, Mapping) and len(value) == 1:
        (kind, target), = value.items()
        if kind in ("claim", "secret") and isinstance(target, str):
            return kind, target
    raise Unreadable(field, "an env value is a string, {claim: \"<need>/<field>\"} or {secret: \"<name>/<key>\"}")
