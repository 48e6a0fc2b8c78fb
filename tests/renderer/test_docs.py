"""docs/application.md documents every field the CUE schema defines (the reference is checked against it)."""

from __future__ import annotations

from typing import Any

from renderer.crds import APPLICATION, spec_schema
from tests.renderer.helpers import REPO


def field_names(schema: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for name, sub in schema.get("properties", {}).items():
        names.add(name)
        names |= field_names(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            names |= field_names(schema[key])
    return names


def test_every_schema_field_is_in_the_reference() -> None:
    doc = (REPO / "docs" / "application.md").read_text()
    missing = sorted(n for n in field_names(spec_schema(APPLICATION)) if n not in doc)
    assert missing == []
