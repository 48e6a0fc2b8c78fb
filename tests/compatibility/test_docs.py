"""docs/plan.md documents every rule id with its class, and the CLI help points at it."""

from __future__ import annotations

import re

from compatibility.rules import RULES
from tests.renderer.helpers import REPO, run_cli

DOC = (REPO / "docs" / "plan.md").read_text()


def test_every_rule_is_documented_with_its_class() -> None:
    rows = {m[1]: m[2] for m in re.finditer(r"^\| (AR-[A-Z]+\d{3}) \| ([a-z-]+) \|", DOC, re.MULTILINE)}
    soft = {m[1] for m in re.finditer(r"^\| (AR-S\d{3}) \|", DOC, re.MULTILINE)}
    for rule in RULES.values():
        if rule.id in soft:
            assert rule.classification == "safe"
        else:
            assert rows.get(rule.id) == rule.classification, rule.id
    assert set(rows) | soft == set(RULES)


def test_plan_is_a_command() -> None:
    result = run_cli("plan", "--help")
    assert result.returncode == 0 and "--detailed-exitcode" in result.stdout
