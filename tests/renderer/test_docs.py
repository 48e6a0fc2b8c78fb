"""The docs are checked against the code: docs/application.md documents every field the CUE schema defines, each
in the table row of the field it belongs to (a name that merely occurs somewhere in the page does not count),
and every test docs/threat-model.md names exists."""

from __future__ import annotations

import re
from typing import Any

from renderer.crds import APPLICATION, spec_schema
from tests.renderer.helpers import REPO

DOC = (REPO / "docs" / "application.md").read_text()
NEEDS = ("pg", "redis", "jetstream", "clickhouse", "s3", "disk")


def leaf_paths(schema: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every field path of a schema; a map's values (additionalProperties) add no name of their own."""
    out: list[tuple[str, ...]] = []
    for name, sub in schema.get("properties", {}).items():
        out.append((*prefix, name))
        out += leaf_paths(sub, (*prefix, name))
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out += leaf_paths(schema[key], prefix)
    return out


def rows() -> dict[str, str]:
    """First-cell field names (each backticked name, `<type>` expanded to every need) -> the row's text."""
    out: dict[str, str] = {}
    for line in DOC.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first):
            for expanded in ([name.replace("<type>", n) for n in NEEDS] if "<type>" in name else [name]):
                out[expanded] = out.get(expanded, "") + line
    return out


def documented(path: tuple[str, ...], table: dict[str, str]) -> bool:
    """The field has a row of its own (or a row of a field below it), or its name is a word in the row of the
    nearest field above it."""
    dotted = ".".join(path)
    if any(name == dotted or name.startswith(dotted + ".") for name in table):
        return True
    for n in range(len(path), 0, -1):
        row = table.get(".".join(path[:n]))
        if row is not None:
            return n == len(path) or re.search(rf"(?<![\w.]){re.escape(path[-1])}(?![\w])", row) is not None
    return False


def test_every_schema_field_is_in_the_row_of_its_field() -> None:
    spec = spec_schema(APPLICATION)
    table = rows()
    base_fields = leaf_paths(spec["properties"]["base"])
    missing = [".".join(p) for p in base_fields if not documented(p, table)]
    missing += [f"spec.{name}" for name in spec["properties"] if f"spec.{name}" not in table]
    assert missing == []


def test_every_test_the_threat_model_names_exists() -> None:
    """docs/threat-model.md says which test proves each defence: each test (or test file) it names exists."""
    doc = (REPO / "docs" / "threat-model.md").read_text()
    files = list((REPO / "tests").rglob("test_*.py"))
    suites = list((REPO / "tests").rglob("suite.py"))  # tests a family of modules imports (the backend contract)
    defined = {p.stem for p in files} | set(re.findall(r"^def (test_\w+)", "\n".join(
        p.read_text() for p in files + suites), re.MULTILINE))
    named = set(re.findall(r"\b(test_\w+?)(?:\.py)?\b", doc))
    assert len(named) > 20 and sorted(named - defined) == []


def test_the_oracle_rejects_a_field_documented_only_elsewhere() -> None:
    table = {"expose": "| `expose` | struct | | Service |", "env": "| `env` | port |"}
    assert not documented(("expose", "port"), table)  # "port" is in another row only
    assert documented(("expose", "port"), {**table, "expose.port": "| `expose.port` | 1-65535 |"})
    assert documented(("expose",), {"expose.port": "| `expose.port` | 1-65535 |"})
