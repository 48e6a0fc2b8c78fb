"""lifecycle.ownership.instance_holder without a cluster: who keeps an instance name two Applications share."""

from __future__ import annotations

from typing import Any

from lifecycle.ownership import instance_holder


def app(name: str, env: str, created: str, uid: str, deployed: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team", "creationTimestamp": created, "uid": uid},
            "spec": {"environment": env}, "status": {"lastAppliedSpec": {"image": "x"}} if deployed else {}}


def test_the_one_already_deployed_keeps_the_name_even_made_in_the_same_second() -> None:
    first = app("a-b", "c", "2026-01-01T00:00:00Z", "ffff", deployed=True)
    second = app("a", "b-c", "2026-01-01T00:00:00Z", "0000")  # a smaller uid: would win a tie on age alone
    assert instance_holder(second, [first, second]) == first
    assert instance_holder(first, [first, second]) is None


def test_between_two_not_yet_deployed_the_oldest_keeps_it() -> None:
    old = app("a-b", "c", "2026-01-01T00:00:00Z", "ffff")
    new = app("a", "b-c", "2026-01-01T00:00:05Z", "0000")
    assert instance_holder(new, [old, new]) == old
    assert instance_holder(old, [old, new]) is None
    assert instance_holder(app("other", "c", "2026-01-01T00:00:09Z", "1"), [old, new]) is None  # no shared name
