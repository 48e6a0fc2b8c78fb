"""Platform-scope roll-up: the stack classifier's per-component results make the same Plan shape."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compatibility.classes import RANKS, UnknownClass, rank
from compatibility.plan import plan_json
from compatibility.platform import PlatformChange, roll_up_platform

CLASSES = list(RANKS["platform"])
items = st.builds(PlatformChange, st.sampled_from(["cnpg", "cilium", "argocd"]), st.sampled_from(["", "version"]),
                  st.none() | st.text(max_size=4), st.none() | st.text(max_size=4), st.sampled_from(CLASSES),
                  st.text(max_size=10))


@given(st.lists(items, max_size=8))
def test_primary_is_the_highest_platform_class(results: list[PlatformChange]) -> None:
    plan = roll_up_platform(results, "1.0.0", "1.1.0")
    present = {r.classification for r in results}
    assert plan.primary == max(present, key=lambda c: rank(c, "platform"), default="safe")
    assert set(plan.classifications) == present
    assert plan.gated == bool(present - {"safe"})
    assert len(plan.changes) == len(results)


def test_fields_and_rules() -> None:
    plan = roll_up_platform([PlatformChange("cnpg", "version", "1", "2", "breaking", "no metadata"),
                             PlatformChange("cilium", "", None, {}, "safe", "added")], "1.0.0", "2.0.0")
    assert [(c.rule, c.field) for c in plan.changes] == [("AR-PS003", "components.cnpg.version"),
                                                         ("AR-PS000", "components.cilium")]
    assert plan_json(plan, None)["primary"] == "breaking"


def test_a_class_the_platform_scope_does_not_rank_fails_closed() -> None:
    for bad in ("security-boundary", "unknown", ""):
        with pytest.raises(UnknownClass):
            roll_up_platform([PlatformChange("cnpg", "", 1, 2, bad, "?")], "1", "2")
