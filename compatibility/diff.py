"""The leaf diff both scopes classify from: where two JSON values differ, with both sides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["leaf_diff"]


def leaf_diff(before: Any, after: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted path, from, to) wherever two JSON values differ, in key order; mappings recurse, anything else
    (lists too) compares whole. An absent key reads as None, so a key set to null equals an absent one."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(before) | set(after), key=str):
            out += leaf_diff(before.get(key), after.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if before == after else [(path or ".", before, after)]
