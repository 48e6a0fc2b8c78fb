"""Drift: the fields of a child that another field manager changed away from what the operator applies (`kubectl
scale`, `kubectl edit`), named by path and by the manager that holds them now (read from managedFields), and the
Event that says they were put back. Values are never named: a path and a manager say enough."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from controller_runtime.compare import PathStep, uncovered
from lifecycle.notes import Note

__all__ = ["Drift", "DriftedField", "drift", "drift_note", "field_path", "owns"]


class DriftedField(NamedTuple):
    """One field another manager changed: its path (as `kubectl explain` spells it) and who holds it now."""

    path: str
    managers: tuple[str, ...]


class Drift(NamedTuple):
    """A child that is not as applied because someone else changed it."""

    kind: str
    name: str
    resource_version: str
    fields: tuple[DriftedField, ...]

    @property
    def managers(self) -> tuple[str, ...]:
        return tuple(sorted({m for f in self.fields for m in f.managers}))


def field_path(steps: Sequence[PathStep]) -> str:
    """`spec.template.spec.containers[app].env[LOG_LEVEL].value`: map keys dotted, list items by their key."""
    out = ""
    for step in steps:
        if isinstance(step, Mapping):
            out += "[" + ",".join(str(v) for v in step.values()) + "]"
        else:
            out += ("." if out else "") + str(step)
    return out


def owns(fields: Mapping[str, Any], steps: Sequence[PathStep]) -> bool:
    """Whether a managedFields set (fieldsV1) holds the field at `steps` (or the whole of a list or map above it)."""
    if not fields:
        return False
    node: Mapping[str, Any] = fields
    for step in steps:
        if not node:  # an atomic field above: it holds everything below
            return True
        if isinstance(step, Mapping):
            found = None
            for key, sub in node.items():
                if not key.startswith("k:"):
                    continue
                item = json.loads(key[2:])
                if all(item.get(k) == v for k, v in step.items()):
                    found = sub
                    break
            if found is None:
                return False
            node = found
        else:
            if f"f:{step}" not in node:
                return False
            node = node[f"f:{step}"]
    return True


def _manager(entry: Mapping[str, Any]) -> str:
    """`kubectl`, or `kubectl (scale)` when it wrote through a subresource."""
    sub = entry.get("subresource")
    return f"{entry.get('manager')} ({sub})" if sub else str(entry.get("manager"))


def drift(live: Mapping[str, Any] | None, desired: Mapping[str, Any], manager: str) -> Drift | None:
    """The fields of `desired` that `live` no longer has as applied and that another field manager now holds;
    None when there are none (a first apply, a change of our own, or fields nobody holds: a field someone removed
    is put back too, but the object does not say who removed it)."""
    if live is None:
        return None
    entries = [e for e in live.get("metadata", {}).get("managedFields") or []
               if e.get("manager") != manager and isinstance(e.get("fieldsV1"), Mapping)]
    found = []
    for steps in uncovered(live, desired):
        holders = tuple(sorted({_manager(e) for e in entries if owns(e["fieldsV1"], steps)}))
        if holders:
            found.append(DriftedField(field_path(steps), holders))
    if not found:
        return None
    meta = live.get("metadata", {})
    return Drift(str(live.get("kind")), str(meta.get("name")), str(meta.get("resourceVersion", "")), tuple(found))


def drift_note(found: Drift) -> Note:
    """The DriftCorrected Warning Event: the child, each field with its manager; once per drifted version."""
    changes = "; ".join(f"{f.path} by {', '.join(f.managers)}" for f in found.fields)
    occurrence = hashlib.sha256(f"{found.kind}\0{found.name}\0{found.resource_version}".encode()).hexdigest()
    return Note("DriftCorrected", f"{found.kind} {found.name} was changed outside git ({changes}); put back as "
                "declared", occurrence, "Warning")
