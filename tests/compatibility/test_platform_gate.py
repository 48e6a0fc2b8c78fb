"""The platform gate without a cluster (compatibility.gate.decide_platform): apply, hold for a plan, apply an
approved plan bound to its digests, and a rejection that reverts the pin once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compatibility.gate import (
    APPLIED,
    APPROVED,
    PENDING,
    REJECTED,
    SUPERSEDED,
    PlanPhase,
    PlatformPlan,
    Rejection,
    decide_platform,
)
from compatibility.migrationplan import (
    PREVIOUS_SPEC_ANNOTATION,
    migration_plan,
    name,
    platform_migration_plan,
    previous_pin,
)
from compatibility.plan import Plan
from compatibility.platform import PlatformChange, roll_up_platform

UID = "stack-uid"
FROM, TO, OTHER = "sha256:" + "1" * 64, "sha256:" + "2" * 64, "sha256:" + "3" * 64


def gated() -> Plan:
    return roll_up_platform([PlatformChange("cloudnative-pg", "source.targetRevision", "0.25.0", "0.26.0",
                                            "data-migration", "2.0.0: data-migration")], "1.1.0", "2.0.0")


def safe() -> Plan:
    return roll_up_platform([PlatformChange("keda", "source.targetRevision", "2.17.2", "2.18.0", "safe",
                                            "1.1.0: safe")], "1.0.0", "1.1.0")


def existing(phase: str, *, plan: Plan | None = None, owner: str | None = UID, to: str = TO,
             previous: tuple[bool, str | None] = (True, None), approved_hash: str | None = None) -> PlatformPlan:
    result = plan or gated()
    return PlatformPlan(name(result), approved_hash or result.approved_spec_hash, phase, owner, FROM, to, previous)


def decide(result: Plan | None, plans: list[PlatformPlan], *, pin: str | None = "2.0.0",
           rejection: Rejection | None = None, generation: int = 5, applied_plan: str | None = None) -> Any:
    return decide_platform(result, plans, owner_uid=UID, applied_plan=applied_plan, from_digest=FROM, to_digest=TO,
                           previous_pin=None, pin=pin, rejection=rejection, generation=generation)


def test_a_safe_change_applies_and_supersedes_plans_still_in_play() -> None:
    d = decide(safe(), [existing(PENDING), existing(APPLIED, plan=roll_up_platform([PlatformChange(
        "cilium", "", None, "enabled", "breaking", "x")], "0.1.0", "0.2.0"))])
    assert d.outcome == "apply" and d.allowed and d.migration_plan is None
    assert d.phases == (PlanPhase(name(gated()), SUPERSEDED, "superseded: the PlatformStack no longer asks for this "
                                  "change"),)


def test_a_first_install_or_no_change_applies() -> None:
    assert decide(None, []).outcome == "apply"


def test_a_gated_change_holds_with_stack_plans_name_and_hash_bound_to_both_digests() -> None:
    d = decide(gated(), [])
    assert d.outcome == "hold" and not d.allowed
    cli = migration_plan(gated())  # what `apprafter stack plan` prints for the same two charts
    plan = d.migration_plan
    assert plan["metadata"]["name"] == cli["metadata"]["name"] == d.waiting_for
    assert plan["spec"]["trigger"] == cli["spec"]["trigger"] and plan["spec"]["changes"] == cli["spec"]["changes"]
    assert plan["spec"]["scope"]["platform"] == {**cli["spec"]["scope"]["platform"], "fromDigest": FROM,
                                                 "toDigest": TO}
    assert plan["metadata"]["ownerReferences"] == [{"apiVersion": "apprafter.io/v1alpha1", "kind": "PlatformStack",
                                                    "name": "default", "uid": UID, "controller": True,
                                                    "blockOwnerDeletion": True}]
    assert json.loads(plan["metadata"]["annotations"][PREVIOUS_SPEC_ANNOTATION]) == {"pin": None}
    assert d.phases == (PlanPhase(name(gated()), PENDING, "awaiting approval"),)


def test_an_approved_plan_for_these_digests_applies() -> None:
    d = decide(gated(), [existing(APPROVED)])
    assert (d.outcome, d.consumed, d.phases) == ("apply-approved", name(gated()), ())


@pytest.mark.parametrize("stale", [
    {"to": OTHER},  # the tag now names other content: the approval was for what it named before
    {"owner": "someone-else"},
    {"approved_hash": "sha256:" + "9" * 64},
])
def test_an_approval_for_other_content_or_another_owner_never_applies(stale: dict[str, Any]) -> None:
    d = decide(gated(), [existing(APPROVED, **stale)])
    assert d.outcome == "hold"
    [phase] = d.phases
    assert phase.phase == PENDING and phase.recreate


@pytest.mark.parametrize("finished", [APPLIED, SUPERSEDED])
def test_the_same_change_proposed_again_gets_a_fresh_plan(finished: str) -> None:
    [phase] = decide(gated(), [existing(finished)]).phases
    assert (phase.phase, phase.recreate) == (PENDING, True)
    assert "proposed again" in phase.message


def test_a_plan_without_a_phase_is_set_pending() -> None:
    assert decide(gated(), [existing("")]).phases == (PlanPhase(name(gated()), PENDING, "awaiting approval"),)


def test_a_pending_plan_keeps_waiting() -> None:
    d = decide(gated(), [existing(PENDING)])
    assert (d.outcome, d.phases) == ("hold", ())


def test_rejection_reverts_the_pin_once_to_the_previous_spec() -> None:
    d = decide(gated(), [existing(REJECTED, previous=(True, "1.1.0"))], pin="2.0.0")
    assert (d.outcome, d.rejected, d.revert_pin) == ("revert", name(gated()), "1.1.0")
    assert not d.allowed and d.migration_plan is None
    unpin = decide(gated(), [existing(REJECTED, previous=(True, None))], pin="2.0.0")
    assert (unpin.outcome, unpin.revert_pin) == ("revert", None)


def test_a_rejection_with_nothing_to_revert_or_an_unreadable_annotation_only_stands() -> None:
    same = decide(gated(), [existing(REJECTED, previous=(True, None))], pin=None)  # autoUpgrade proposed it
    assert (same.outcome, same.rejected) == ("rejected", name(gated()))
    unreadable = decide(gated(), [existing(REJECTED, previous=(False, None))])
    assert unreadable.outcome == "rejected"


def test_a_rejected_change_is_proposed_again_only_after_the_spec_changes() -> None:
    record = Rejection(name(gated()), 6)
    assert decide(gated(), [existing(REJECTED)], rejection=record, generation=6).outcome == "rejected"
    again = decide(gated(), [existing(REJECTED)], rejection=record, generation=7)
    assert again.outcome == "hold"
    [phase] = again.phases
    assert (phase.phase, phase.recreate) == (PENDING, True) and "after it was rejected" in phase.message


def test_after_a_crash_the_plan_the_last_apply_consumed_is_marked_applied() -> None:
    d = decide(None, [existing(APPROVED)], applied_plan=name(gated()))
    assert d.outcome == "apply"
    assert d.phases == (PlanPhase(name(gated()), APPLIED, "applied: the approved change is the applied spec"),)


def test_previous_pin_reads_only_its_own_shape() -> None:
    obj = platform_migration_plan(gated(), owner_uid=UID, from_digest=FROM, to_digest=TO, previous_pin="1.1.0")
    assert previous_pin(obj) == (True, "1.1.0")
    for text in ("not json", '{"pin": 3}', '{"other": 1}', "[]", '{"pin": "latest"}'):
        obj["metadata"]["annotations"][PREVIOUS_SPEC_ANNOTATION] = text
        assert previous_pin(obj) == (False, None)
    del obj["metadata"]["annotations"]
    assert previous_pin(obj) == (False, None)
