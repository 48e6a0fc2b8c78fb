"""The in-cluster gate without a cluster: what applies, what waits, which plans move to which phase."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compatibility.application import Deployment, deployment, plan, soft_destructive
from compatibility.authority import REACHABLE_FROM
from compatibility.gate import (
    ACTIVE,
    APPLIED,
    APPROVED,
    PENDING,
    REJECTED,
    SUPERSEDED,
    ExistingPlan,
    PlanPhase,
    decide,
)
from compatibility.migrationplan import migration_plan, name
from compatibility.shape import Unreadable
from tests.compatibility.cases import BASE, app, with_base
from tests.compatibility.test_properties import apps

UID = "0b6d7e1c-uid"
NS = "shop"


def side(doc: dict[str, Any], env: str = "prod") -> Deployment:
    d = deployment(doc, env)
    return Deployment(d.app, d.environment, d.spec, NS)


def baseline(doc: dict[str, Any]) -> dict[str, Any]:
    return dict(side(doc).spec)


GATED = app(with_base(needs={"pg": BASE["needs"]["pg"]}))  # redis removed: AR-DM001


def gated_plan() -> tuple[str, str]:
    result = plan(side(app()), side(GATED))
    assert result.approved_spec_hash is not None
    return name(result), result.approved_spec_hash


def test_first_deployment_applies_and_supersedes_leftover_plans() -> None:
    d = decide(side(app()), None, [ExistingPlan("old", "sha256:" + "1" * 64, PENDING, UID)], owner_uid=UID)
    assert d.outcome == "apply" and d.plan is None and d.migration_plan is None
    assert d.target == side(app()).spec
    assert d.phases == (PlanPhase("old", SUPERSEDED, "superseded: the Application has no applied spec to compare "
                                  "with"),)


def test_a_gated_change_holds_on_the_baseline_with_the_clis_plan() -> None:
    d = decide(side(GATED), baseline(app()), [], owner_uid=UID)
    expected = migration_plan(plan(side(app()), side(GATED)), owner_uid=UID)
    assert d.outcome == "hold" and not d.allowed
    assert d.target == baseline(app())
    assert d.migration_plan == expected
    assert d.waiting_for == expected["metadata"]["name"]
    assert expected["metadata"]["namespace"] == NS
    assert expected["metadata"]["ownerReferences"][0]["uid"] == UID
    assert d.phases == (PlanPhase(d.waiting_for, PENDING, "awaiting approval"),)


def test_disarming_readiness_with_a_literal_removal_waits_and_the_plan_names_both() -> None:
    """`health: false` on a serving app gates, so the literal removal that relies on readiness waits with it."""
    disarmed = app(with_base(health=False, env={k: v for k, v in BASE["env"].items() if k != "LOG_LEVEL"}))
    d = decide(side(disarmed), baseline(app()), [], owner_uid=UID)
    assert d.outcome == "hold" and d.target == baseline(app())
    assert d.plan is not None and d.plan.primary == "requires-restart"
    assert {(c.rule, c.field) for c in d.plan.changes} == {("AR-RR006", "health.readiness"),
                                                            ("AR-S005", "env.LOG_LEVEL")}
    assert d.migration_plan is not None and d.migration_plan["spec"]["trigger"]["field"] == "health.readiness"
    assert d.migration_plan["spec"]["trigger"]["from"] == "TCP :8080"


def test_an_approved_plan_with_the_recomputed_hash_applies() -> None:
    plan_name, digest = gated_plan()
    d = decide(side(GATED), baseline(app()), [ExistingPlan(plan_name, digest, APPROVED, UID)], owner_uid=UID)
    assert d.outcome == "apply-approved" and d.consumed == plan_name
    assert d.target == side(GATED).spec
    assert d.phases == ()


@pytest.mark.parametrize("stored", [None, "", "sha256:" + "0" * 64])
def test_an_approval_with_an_empty_missing_or_other_hash_never_applies(stored: str | None) -> None:
    plan_name, _ = gated_plan()
    d = decide(side(GATED), baseline(app()), [ExistingPlan(plan_name, stored or None, APPROVED, UID)],
               owner_uid=UID)
    assert d.outcome == "hold" and d.target == baseline(app())
    [phase] = d.phases
    assert (phase.name, phase.phase, phase.recreate) == (plan_name, PENDING, True)
    assert "created anew" in phase.message


def test_an_approval_on_a_plan_owned_by_another_object_never_applies() -> None:
    plan_name, digest = gated_plan()
    d = decide(side(GATED), baseline(app()), [ExistingPlan(plan_name, digest, APPROVED, "someone-else")],
               owner_uid=UID)
    assert d.outcome == "hold"
    assert d.phases[0].recreate


def test_an_edit_after_approval_supersedes_the_approved_plan() -> None:
    plan_name, digest = gated_plan()
    edited = app(with_base(needs={}))  # pg removed as well: another gated set
    d = decide(side(edited), baseline(app()), [ExistingPlan(plan_name, digest, APPROVED, UID)], owner_uid=UID)
    assert d.outcome == "hold" and d.waiting_for != plan_name
    assert PlanPhase(plan_name, SUPERSEDED, f"superseded by {d.waiting_for}: the spec changed again",
                     d.waiting_for) in d.phases


def test_a_revert_to_the_baseline_supersedes_the_waiting_plan() -> None:
    plan_name, digest = gated_plan()
    d = decide(side(app()), baseline(app()), [ExistingPlan(plan_name, digest, PENDING, UID)], owner_uid=UID)
    assert d.outcome == "apply" and d.plan is not None and not d.plan.changes
    assert [(p.name, p.phase, p.superseded_by) for p in d.phases] == [(plan_name, SUPERSEDED, None)]


def test_after_a_crash_between_restamp_and_plan_update_the_plan_is_finished_not_superseded() -> None:
    plan_name, digest = gated_plan()
    d = decide(side(GATED), baseline(GATED), [ExistingPlan(plan_name, digest, APPROVED, UID)], owner_uid=UID,
               applied_plan=plan_name)
    assert d.outcome == "apply"
    assert [(p.name, p.phase) for p in d.phases] == [(plan_name, APPLIED)]


@pytest.mark.parametrize("phase", [APPLIED, SUPERSEDED, ""])
def test_the_same_change_proposed_again_needs_a_new_approval(phase: str) -> None:
    plan_name, digest = gated_plan()
    d = decide(side(GATED), baseline(app()), [ExistingPlan(plan_name, digest, phase, UID)], owner_uid=UID)
    assert d.outcome == "hold"
    [again] = d.phases
    assert (again.name, again.phase) == (plan_name, PENDING)
    assert again.recreate == (phase != "")


def test_a_plan_without_a_phase_that_is_not_this_changes_is_created_anew() -> None:
    """A plan of the wanted name with no phase yet but another owner or hash is never set pending: its approval
    could not apply, so it is created anew (as every scope's gate does)."""
    plan_name, digest = gated_plan()
    for stale in (ExistingPlan(plan_name, digest, "", "someone-else"), ExistingPlan(plan_name, None, "", UID)):
        d = decide(side(GATED), baseline(app()), [stale], owner_uid=UID)
        assert d.outcome == "hold"
        [phase] = d.phases
        assert (phase.phase, phase.recreate) == (PENDING, True) and "created anew" in phase.message


def test_a_rejected_plan_keeps_its_phase_and_the_change_waits() -> None:
    plan_name, digest = gated_plan()
    d = decide(side(GATED), baseline(app()), [ExistingPlan(plan_name, digest, REJECTED, UID)], owner_uid=UID)
    assert d.outcome == "hold" and d.phases == ()


def test_an_unreadable_baseline_fails_closed() -> None:
    with pytest.raises(Unreadable) as e:
        decide(side(app()), {**baseline(app()), "replicas": "three"}, [], owner_uid=UID)
    assert e.value.field == "replicas"
    with pytest.raises(Unreadable):
        decide(side(app()), {**baseline(app()), "sneaky": True}, [], owner_uid=UID)


def test_a_new_claim_is_for_review_yet_applies_without_a_plan() -> None:
    """A need added is review-class (AR-RV001): listed for review, never gated, so the cluster applies it at once;
    beside a gated change it leaves that change's plan (name, hash) as it was, and is listed in it."""
    claimed = app(with_base(needs={**BASE["needs"], "s3": {}}))
    d = decide(side(claimed), baseline(app()), [], owner_uid=UID)
    assert (d.outcome, d.migration_plan, d.phases, d.target) == ("apply", None, (), side(claimed).spec)
    assert d.plan is not None and not d.plan.gated and d.plan.approved_spec_hash is None
    assert [(c.rule, c.field, c.classification) for c in d.plan.changes] == [("AR-RV001", "needs.s3", "review")]
    assert (d.plan.primary, d.plan.classifications) == ("review", ("review",))
    both = copy.deepcopy(GATED)
    both["spec"]["base"]["needs"]["s3"] = {}
    riding = plan(side(app()), side(both))
    assert (name(riding), riding.approved_spec_hash) == gated_plan()
    spec = migration_plan(riding, owner_uid=UID)["spec"]
    assert [(c["rule"], c["classification"]) for c in spec["changes"]] == [
        ("AR-DM001", "data-migration"), ("AR-RV001", "review")]
    assert spec["risks"]["classifications"] == ["data-migration", "review"]


def test_soft_changes_ride_along_with_an_approval() -> None:
    plan_name, digest = gated_plan()
    with_soft = copy.deepcopy(GATED)
    with_soft["spec"]["base"]["image"] = "ghcr.io/acme/demo:1.1.0"  # a tag change: soft
    d = decide(side(with_soft), baseline(app()), [ExistingPlan(plan_name, digest, APPROVED, UID)], owner_uid=UID)
    assert d.outcome == "apply-approved" and d.target["image"] == "ghcr.io/acme/demo:1.1.0"


@pytest.mark.parametrize(("before", "after", "fields"), [
    (with_base(replicas=3), with_base(replicas=2), ["replicas"]),
    (with_base(replicas=3), with_base(replicas=None), ["replicas"]),  # absent = 1
    (with_base(replicas=2), with_base(replicas=5), []),
    (with_base(replicas=0), with_base(replicas=2), []),
    (with_base(replicas=3, autoscale={"on": "cpu", "min": 1, "max": 4}),
     with_base(replicas=1, autoscale={"on": "cpu", "min": 1, "max": 4}), []),  # autoscale owns the count
    (BASE, with_base(env={k: v for k, v in BASE["env"].items() if k != "LOG_LEVEL"}), ["env.LOG_LEVEL"]),
    (BASE, with_base(needs={"pg": {"size": "nano", "version": "16"}, "redis": {}}), ["needs.pg.size"]),
    (BASE, with_base(needs={"pg": {"size": "large", "version": "16"}, "redis": {}}), []),
    (with_base(expose={"port": 8080, "paths": ["/"], "tls": True}), with_base(expose={"port": 8080}),
     ["expose.paths", "expose.tls"]),
    (BASE, with_base(image="ghcr.io/acme/demo:2.0.0"), []),
    # Readiness weakened but kept (the rollout still waits on TCP), liveness or startup taken away: an Event.
    (with_base(health={"readiness": {"path": "/healthz"}}), BASE, ["health.readiness.path"]),
    (BASE, with_base(health={"readiness": {"failureThreshold": 6, "timeoutSeconds": 3}}),
     ["health.readiness.failureThreshold", "health.readiness.timeoutSeconds"]),
    (with_base(health={"liveness": {}, "startup": {"failureThreshold": 30}}), BASE,
     ["health.liveness", "health.startup"]),
    (with_base(expose=None, health={"readiness": {"port": 9000}}), with_base(expose=None), ["health.readiness"]),
    (BASE, with_base(health={"readiness": {"path": "/healthz", "failureThreshold": 1}, "liveness": {}}), []),
])
def test_soft_destructive_changes(before: dict[str, Any], after: dict[str, Any], fields: list[str]) -> None:
    a, b = side(app(before)), side(app(after))
    d = decide(b, dict(a.spec), [], owner_uid=UID)
    assert d.allowed
    assert sorted(c.field for c in d.soft_destructive) == fields
    assert all(soft_destructive(c, a, b) for c in d.soft_destructive)


hashes = st.sampled_from([None, "sha256:" + "1" * 64, "sha256:" + "2" * 64])
phases = st.sampled_from(["", PENDING, APPROVED, APPLIED, SUPERSEDED, REJECTED])
owners = st.sampled_from([UID, "other"])


@settings(max_examples=300)
@given(apps, apps, st.lists(st.tuples(st.sampled_from(["p1", "p2", "wanted"]), hashes, phases, owners), max_size=4,
                            unique_by=lambda t: t[0]),
       st.booleans(), st.sampled_from([None, "p1", "wanted"]))
def test_the_gate_binds_approval_to_the_recomputed_hash(a: dict[str, Any], b: dict[str, Any],
                                                        raw: list[tuple[str, str | None, str, str]],
                                                        real_hash: bool, applied_plan: str | None) -> None:
    before, after = side(a), side(b)
    result = plan(before, after)
    wanted = name(result) if result.gated else "wanted"
    existing = []
    for plan_name, digest, phase, owner in raw:
        stored = result.approved_spec_hash if plan_name == "wanted" and real_hash else digest
        existing.append(ExistingPlan(wanted if plan_name == "wanted" else plan_name, stored, phase, owner))
    d = decide(after, dict(before.spec), existing, owner_uid=UID, applied_plan=applied_plan)

    matching = [p for p in existing if p.name == wanted and p.phase == APPROVED and p.owner_uid == UID
                and p.approved_spec_hash and p.approved_spec_hash == result.approved_spec_hash]
    if not result.gated:
        assert d.outcome == "apply"
    else:
        assert d.outcome == ("apply-approved" if matching else "hold")
    assert d.target == (after.spec if d.allowed else before.spec)
    moved = [p.name for p in d.phases]
    assert len(moved) == len(set(moved)), "a plan gets one phase per decision"
    by_name = {p.name: p for p in existing}
    for phase in d.phases:
        old = by_name.get(phase.name)
        if not phase.recreate:  # every move is one the phase machine (and the CRD's CEL rules) allows
            before = (old.phase or None) if old else None
            assert before == phase.phase or before in REACHABLE_FROM[phase.phase], (before, phase)
        if phase.phase == APPLIED:
            assert old is not None and old.name == applied_plan and old.phase == APPROVED
        if phase.phase == SUPERSEDED:
            assert old is not None and old.phase in ACTIVE and phase.name != d.waiting_for
        if phase.phase == PENDING:
            assert phase.name == d.waiting_for
    for p in existing:  # every plan still in play that is not the current one is finished or superseded
        if p.phase in ACTIVE and p.name != (d.waiting_for or d.consumed):
            assert p.name in moved
