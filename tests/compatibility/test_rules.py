"""Every rule, positive and negative, over effective per-environment specs (incl. environment scoping)."""

from __future__ import annotations

import pytest

from compatibility.application import classify, deployment
from compatibility.rules import RULES
from tests.compatibility.cases import CASES, Case

# The class each rule family stands for, as docs/plan.md and the spec name them (independent of RULES).
CLASS_OF_FAMILY = {"DM": "data-migration", "RR": "requires-restart", "SB": "security-boundary", "RV": "review",
                   "S": "safe"}


def expected_class(rule: str) -> str:
    return CLASS_OF_FAMILY[rule.removeprefix("AR-").rstrip("0123456789")]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule(case: Case) -> None:
    changes = classify(deployment(case.before, case.env), deployment(case.after, case.env))
    fired = [c for c in changes if c.rule == case.rule]
    if not case.fires:
        assert fired == [], f"{case.rule} fired: {fired}"
        return
    assert [c.field for c in fired] == [case.field]
    assert fired[0].classification == expected_class(case.rule)
    assert fired[0].reason


def test_every_application_rule_has_a_positive_and_a_negative_case() -> None:
    app_rules = {r for r in RULES if not r.startswith(("AR-PS", "AR-SC"))}
    assert {c.rule for c in CASES if c.fires} == app_rules
    assert {c.rule for c in CASES if not c.fires} == app_rules


@pytest.mark.parametrize("case", [c for c in CASES if c.fires], ids=[c.id for c in CASES if c.fires])
def test_the_change_is_detected_once_per_field(case: Case) -> None:
    changes = classify(deployment(case.before, case.env), deployment(case.after, case.env))
    fields = [c.field for c in changes]
    assert len(fields) == len(set(fields))


def test_identical_sides_have_no_changes() -> None:
    for case in CASES:
        assert classify(deployment(case.after, case.env), deployment(case.after, case.env)) == []
