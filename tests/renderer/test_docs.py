"""Docs checked against the code: each schema field in application.md, each test threat-model.md names."""

from __future__ import annotations

import re
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


def test_every_test_the_threat_model_names_exists() -> None:
    """docs/threat-model.md says which test proves each defence: each test (or test file) it names exists."""
    doc = (REPO / "docs" / "threat-model.md").read_text()
    files = list((REPO / "tests").rglob("test_*.py"))
    defined = {p.stem for p in files} | set(re.findall(r"^def (test_\w+)", "\n".join(p.read_text() for p in files),
                                                       re.MULTILINE))
    named = set(re.findall(r"\b(test_\w+?)(?:\.py)?\b", doc))
    assert len(named) > 20 and sorted(named - defined) == []
