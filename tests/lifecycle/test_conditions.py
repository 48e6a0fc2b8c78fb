"""meta/v1 conditions as the controllers write and read them (lifecycle.conditions): transition times kept while a
status holds, a message bounded, a condition found by type in whatever a status holds."""

from __future__ import annotations

from lifecycle.conditions import Condition, by_type, find_condition, render


def test_conditions_keep_their_transition_time_while_the_status_holds() -> None:
    first = render([Condition("Ready", "False", "WaitingForClaims", "w")], [], 1, "T1")
    assert first[0]["lastTransitionTime"] == "T1" and first[0]["observedGeneration"] == 1
    same = render([Condition("Ready", "False", "AwaitingMigrationApproval", "p")], first, 2, "T2")
    assert same[0]["lastTransitionTime"] == "T1" and same[0]["reason"] == "AwaitingMigrationApproval"
    flipped = render([Condition("Ready", "True", "Applied", "ok")], same, 2, "T3")
    assert flipped[0]["lastTransitionTime"] == "T3"
    long = render([Condition("Ready", "True", "Applied", "x" * 5000)], [], 1, "T")
    assert len(long[0]["message"]) == 1024


def test_a_condition_is_found_by_type_in_whatever_a_status_holds() -> None:
    listed = [{"type": "Ready", "status": "True"}, "junk", {"type": "Synced", "status": "False", "message": "m"}]
    assert find_condition(listed, "Synced") == {"type": "Synced", "status": "False", "message": "m"}
    assert list(by_type(listed)) == ["Ready", "Synced"]
    for hostile in (None, "Ready", {"type": "Ready"}, 3, [None, 1]):  # a status no API server would keep
        assert find_condition(hostile, "Ready") == {} and by_type(hostile) == {}
