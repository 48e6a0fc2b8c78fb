"""Who changed what in a child: the rendered fields the live object no longer has as rendered, and the field managers
other than ours that own them now (its managedFields) — what a DriftCorrected Event names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from controller_runtime.compare import covers
from lifecycle.notes import Note

__all__ = ["Drift", "changed_by", "drift_note", "drifted_fields"]

MAX_FIELDS = 8  # named in one Event (the rest are counted)


class Drift(NamedTuple):
    """A rendered field someone else changed: its dotted path and the managers that own it now."""

    field: str
    managers: tuple[str, ...]


def drifted_fields(live: Mapping[str, Any], desired: Mapping[str, Any], path: tuple[str, ...] = ()) -> list[
        tuple[str, ...]]:
    """The paths (down to the first list or scalar) where `live` does not cover `desired`; metadata's own
    bookkeeping (managedFields, resourceVersion, ...) is the API server's, not drift."""
    out: list[tuple[str, ...]] = []
    for key, want in desired.items():
        here = (*path, key)
        have = live.get(key) if isinstance(live, Mapping) else None
        if covers(have, want):
            continue
        if isinstance(want, Mapping) and isinstance(have, Mapping) and want:
            out += drifted_fields(have, want, here)
        else:
            out.append(here)
    return out


def _owns(fields: Mapping[str, Any], path: Sequence[str]) -> bool:
    """A managedFields set (fieldsV1) names `path` or something under it."""
    node: Any = fields
    for key in path:
        if not isinstance(node, Mapping) or f"f:{key}" not in node:
            return False
        node = node[f"f:{key}"]
    return True


def changed_by(live: Mapping[str, Any], desired: Mapping[str, Any], ours: str) -> list[Drift]:
    """The drifted fields that a manager other than `ours` owns now (a field only we own differs because the render
    changed: that is an update, not drift)."""
    entries = [e for e in live.get("metadata", {}).get("managedFields") or [] if isinstance(e, Mapping)]
    out = []
    for path in drifted_fields(live, desired):
        if path[:1] == ("metadata",) and path[1:2] not in (("labels",), ("annotations",)):
            continue
        managers = sorted({str(e.get("manager")) for e in entries if e.get("manager") != ours
                           and _owns(e.get("fieldsV1") or {}, path)})
        if managers:
            out.append(Drift(".".join(path), tuple(managers)))
    return out


def drift_note(child: Mapping[str, Any], drifts: Sequence[Drift]) -> Note:
    """The Warning Event on the Application: the child, the fields and who changed them; one per live version of the
    child (a resync that finds nothing records nothing, a second drift is a second Event)."""
    meta = child["metadata"]
    named = "; ".join(f"{d.field} (changed by {', '.join(d.managers)})" for d in drifts[:MAX_FIELDS])
    more = f"; and {len(drifts) - MAX_FIELDS} more" if len(drifts) > MAX_FIELDS else ""
    return Note("DriftCorrected", f"{child['kind']} {meta['name']}: put back {named}{more}",
                f"{child['kind']}/{meta['name']}/{meta.get('resourceVersion', '')}", "Warning")
