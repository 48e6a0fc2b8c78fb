"""lifecycle.retention: a deleted claim's data is dropped only for an administrator's act or an approved
data-migration plan of its own Application that removes its need; anything else retains it (fail closed)."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.retention import DROP_ANNOTATION, FINALIZER, claims_to_drop, drop_mark, verdict

APP_UID = "uid-app"


def claim(mark: str | None = None, kind: str = "redis", owner: str | None = APP_UID) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"shop-{kind}", "namespace": "team", "finalizers": [FINALIZER]}
    if mark is not None:
        meta["annotations"] = {DROP_ANNOTATION: mark}
    if owner:
        meta["ownerReferences"] = [{"kind": "Application", "name": "shop", "uid": owner, "controller": True}]
    return {"metadata": meta, "spec": {"type": kind}}


def plan(phase: str = "approved", field: str = "needs.redis", owner: str = APP_UID,
         change: str = "need-removed") -> dict[str, Any]:
    return {"metadata": {"name": "shop-prod-1", "ownerReferences": [{"uid": owner, "controller": True}]},
            "spec": {"changes": [{"rule": "AR-RR004", "type": "env-reference-removed", "field": "env.X"},
                                 {"rule": "AR-DM001", "type": change, "field": field}]},
            "status": {"phase": phase, "approvedBy": "alice"}}


def test_without_a_mark_the_data_stays() -> None:
    said = verdict(claim(), None)
    assert not said.drop and "no approved data-migration plan removes needs.redis" in said.why


def test_an_approved_plan_of_its_own_application_that_removes_its_need_drops_it() -> None:
    for phase in ("approved", "applied"):
        said = verdict(claim(drop_mark("shop-prod-1")), plan(phase))
        assert said.drop and said.why == "MigrationPlan shop-prod-1, approved by alice, removes needs.redis"


@pytest.mark.parametrize(("given", "why"), [
    (None, "does not exist"),
    (plan("pending-approval"), "is pending-approval, not approved"),
    (plan("superseded"), "not approved"),
    (plan(owner="uid-other"), "not about this claim's Application"),
    (plan(field="needs.pg"), "does not remove needs.redis"),
    (plan(change="need-major-version"), "does not remove needs.redis"),
])
def test_any_other_plan_retains(given: dict[str, Any] | None, why: str) -> None:
    said = verdict(claim(drop_mark("shop-prod-1")), given)
    assert not said.drop and why in said.why and "the data stays" in said.why


def test_a_plan_named_otherwise_or_a_claim_without_owner_retains() -> None:
    other = {**plan(), "metadata": {**plan()["metadata"], "name": "other"}}
    assert not verdict(claim(drop_mark("shop-prod-1")), other).drop
    assert not verdict(claim(drop_mark("shop-prod-1"), owner=None), plan()).drop
    assert not verdict(claim("please"), None).drop


def test_an_administrator_drops_by_the_annotation() -> None:
    said = verdict(claim("admin", owner=None), None)
    assert said.drop and "administrator" in said.why


def test_only_the_claims_whose_need_the_consumed_plan_removes_are_marked() -> None:
    pruned = [claim(kind="redis"), claim(kind="pg")]
    assert [c["spec"]["type"] for c in claims_to_drop(plan(), pruned)] == ["redis"]
    assert claims_to_drop(None, pruned) == [] and claims_to_drop(plan("pending-approval"), pruned) == []
    assert claims_to_drop(plan(), [claim("admin")]) == []  # marked already: left as it is
