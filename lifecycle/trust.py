"""Whether a baseline an object carries (in its status, or an ApplicationBaseline's spec) was written by the operator
alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["foreign_writers", "untrusted"]


def foreign_writers(obj: Mapping[str, Any], field: str, manager: str, part: str = "status") -> list[str]:
    """Field managers other than `manager` that wrote <part>.<field> (read from managedFields)."""
    out = []
    for entry in obj.get("metadata", {}).get("managedFields") or []:
        fields = (entry.get("fieldsV1") or {}).get(f"f:{part}") or {}
        if f"f:{field}" in fields and entry.get("manager") != manager:
            out.append(str(entry.get("manager") or "(unnamed)"))
    return sorted(set(out))


def untrusted(obj: Mapping[str, Any], field: str, manager: str) -> str | None:
    """Why status.<field> is not trusted as the gate's baseline (None when it is, or absent): not a mapping, or
    written by someone other than the operator's status field manager. Fail closed: nothing is applied on it."""
    status = obj.get("status") or {}
    value = status.get(field) if isinstance(status, Mapping) else None
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return f"status.{field}: not a mapping"
    foreign = foreign_writers(obj, field, manager)
    if foreign:
        return f"status.{field} was written by {', '.join(foreign)}, not by the operator"
    return None
