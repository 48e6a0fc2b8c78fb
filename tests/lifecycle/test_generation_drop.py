"""A kept generation's own approved removal as pure decisions (lifecycle/generation_drop.py): which generation may go
(a kept one, never the live one), the request's form and who may ask (compatibility.authority), the plan opened and
nothing else before approval, a rejected plan, every step after approval through CloudNativePG's word (the same steps
as a claim's data drop: lifecycle.backends.pg's `drop_one`) touching the kept generation alone, status.restore.kept
without it at the end, and the Events. The same through the API server: tests/reconciler/test_pg_restore_cluster.py."""

from __future__ import annotations

from typing import Any

import pytest

from compatibility.authority import DROP_GENERATION_ANNOTATION, drop_generation_writer
from controller_runtime.outcomes import Requeue
from lifecycle import generation_drop, restore
from lifecycle.backends import pg_cluster
from lifecycle.backends.contract import Apply, Delete, Seen, Site
from lifecycle.backends.pg import CORE

OPERATOR = "system:serviceaccount:apprafter-system:apprafter-operator"
NS, IMAGE = "apprafter-pg", "localhost/postgresql:15"
LIVE, KEPT = "shop.cart-pg~2", "shop.cart-pg"
ASKED = "20261208T120000Z-0a1b2c3d@1"


def shared() -> pg_cluster.Shared:
    found = CORE.configure({"metadata": {"name": "pg-integrated"}, "spec": {
        "type": "pg", "backend": "cloudnative-pg", "config": {"cluster": "platform-postgres"}}}, Site(NS, IMAGE))
    assert isinstance(found, pg_cluster.Shared)
    return found


def claim(request: str | None = ASKED, generation: int = 2, kept: list[str] | None = None,
          drop: dict[str, Any] | None = None) -> dict[str, Any]:
    """shop/cart-pg after one restore: at generation 2, generation 1 kept (unless said otherwise)."""
    meta: dict[str, Any] = {"namespace": "shop", "name": "cart-pg", "uid": "u1",
                            "labels": {"app.kubernetes.io/name": "cart", "apprafter.io/environment": "prod"}}
    if request is not None:
        meta["annotations"] = {DROP_GENERATION_ANNOTATION: request}
    said: dict[str, Any] = {"generation": generation, "completed": "r1", "kept": [KEPT] if kept is None else kept}
    if drop is not None:
        said["drop"] = drop
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"type": "pg", "selector": {}}, "status": {"restore": said}}


def cluster(roles: dict[str, str | None]) -> dict[str, Any]:
    """The shared Cluster with these roles in spec (the live one and the kept one), each listed as CloudNativePG last
    computed it (None: in no list)."""
    made = pg_cluster.cluster_object(shared(), {name: {"name": name, "ensure": "present", "comment": "apprafter claim "
                                                       "shop/cart-pg"} for name in roles}, None)
    by_status: dict[str, list[str]] = {}
    for name, state in roles.items():
        if state is not None:
            by_status.setdefault(state, []).append(name)
    made["status"] = {"conditions": [{"type": "Ready", "status": "True"}],
                      "managedRolesStatus": {"byStatus": by_status}}
    return made


def seen(live: dict[str, Any] | None, database: dict[str, Any] | None, secret: dict[str, Any] | None) -> Seen:
    # the Cluster, then the generation's alternate login role's Database and Secret (never made here: it was never
    # rotated), then its role's
    reads = generation_drop.reads(claim(), shared(), generation_drop.Request("r", 1))
    return Seen(dict(zip(reads, (live, None, None, database, secret), strict=True)), None, "", 1000.0)


def plan(phase: str | None) -> dict[str, Any]:
    return {"status": {"phase": phase}} if phase else {"status": {}}


def names(writes: Any) -> list[str]:
    """What each write touches: `<kind> <name>`, and for the Cluster the roles it keeps."""
    out = []
    for write in writes:
        obj = write.obj if isinstance(write, Apply) else None
        if obj is not None and obj["kind"] == "Cluster":
            out.append("Cluster roles " + ",".join(r["name"] for r in obj["spec"]["managed"]["roles"]))
        elif obj is not None:
            out.append(f"{obj['kind']} {obj['metadata']['name']} {obj.get('spec', {}).get('ensure', '')}".strip())
        else:
            assert isinstance(write, Delete)
            out.append(f"delete {write.kind.kind} {write.name}")
    return out


def test_only_a_kept_generation_may_go_never_the_live_one() -> None:
    assert generation_drop.kept_generations(claim()) == (1,)
    assert generation_drop.refusal(claim(), 1) is None
    assert generation_drop.refusal(claim(), 2) == (f"generation 2 is the one the app uses (database {LIVE}): never "
                                                   "dropped this way (a restore moves the app to another first)")
    assert generation_drop.refusal(claim(), 3) == ("generation 3 is not kept (kept: 1; `apprafter db backups` lists "
                                                   "them)")
    never = claim(kept=[])  # dropped already
    assert generation_drop.refusal(never, 1) == ("generation 1 is not kept (kept: none; `apprafter db backups` "
                                                 "lists them)")
    fresh = {**claim(), "status": {}}  # never restored: generation 1 is the live one
    assert generation_drop.refusal(fresh, 1) is not None and "the one the app uses" in str(
        generation_drop.refusal(fresh, 1))


@pytest.mark.parametrize(("old", "new", "kind", "user", "allowed"), [
    (None, ASKED, "pg", "alice", True),
    (ASKED, ASKED, "pg", OPERATOR, True),  # unchanged: the operator's own writes of the claim
    (ASKED, None, "pg", "alice", True),  # withdrawn
    (None, ASKED, "pg", OPERATOR, False),  # never the operator
    (None, "x@0", "pg", "alice", False),  # generations start at 1
    (None, "x@two", "pg", "alice", False),
    (None, "@1", "pg", "alice", False),
    (None, ASKED, "redis", "alice", False),  # no generations
])
def test_the_team_asks_in_the_requests_form_on_a_pg_claim_never_the_operator(
        old: str | None, new: str | None, kind: str, user: str, allowed: bool) -> None:
    assert (drop_generation_writer(old, new, kind, user, OPERATOR) is None) is allowed
    if new is not None and new != old and allowed:
        assert generation_drop.requested(claim(new)) == generation_drop.Request("20261208T120000Z-0a1b2c3d", 1)


def test_the_request_opens_a_data_migration_plan_and_nothing_else_happens_before_approval() -> None:
    live = cluster({LIVE: "reconciled", KEPT: "reconciled"})
    request = generation_drop.requested(claim())
    assert request is not None
    first = generation_drop.step(claim(), shared(), request, None, seen(live, {}, {}))
    [opened] = first.writes
    assert isinstance(opened, Apply) and opened.obj["kind"] == "MigrationPlan"
    assert first.plan_phase == "pending-approval"
    made = opened.obj
    assert made["metadata"]["name"] == generation_drop.plan_name(claim(), request)
    assert made["metadata"]["labels"]["apprafter.io/scope"] == "drop-generation"
    assert made["spec"]["risks"]["classification"] == "data-migration"
    assert made["spec"]["changes"][0]["from"] == f"generation 1: database {KEPT} (kept)"
    assert made["spec"]["changes"][0]["to"] == f"none; the app stays on generation 2: database {LIVE}"
    assert made["metadata"]["ownerReferences"][0]["uid"] == "u1"
    said = first.status["drop"]
    assert (said["phase"], said["generation"], said["requested"]) == ("AwaitingApproval", 1, request.id)
    assert first.status["kept"] == [KEPT] and first.status["generation"] == 2  # the rest of status.restore kept
    waiting = generation_drop.step(claim(), shared(), request, plan("pending-approval"), seen(live, {}, {}))
    assert waiting.writes == () and waiting.status["drop"]["phase"] == "AwaitingApproval"
    for phase in ("superseded", "rejected"):
        ended = generation_drop.step(claim(), shared(), request, plan(phase), seen(live, {}, {}))
        assert ended.writes == () and ended.status["drop"]["phase"] == "Failed", phase
        assert ended.status["kept"] == [KEPT]


def test_after_approval_the_kept_generation_goes_step_by_step_and_the_live_one_is_never_touched() -> None:
    request = generation_drop.requested(claim())
    assert request is not None
    config, kept = shared(), pg_cluster.tenant_of(claim(), 1)
    database = pg_cluster.database_object(config, kept)
    database["metadata"]["generation"] = 1
    secret = {"metadata": {"name": kept.object_name}}

    def after(live: dict[str, Any], db: dict[str, Any] | None, sec: dict[str, Any] | None) -> generation_drop.Step:
        return generation_drop.step(claim(), config, request, plan("approved"), seen(live, db, sec))

    both = {LIVE: "reconciled", KEPT: "reconciled"}
    steps = [after(cluster(both), database, secret)]
    absent = {**database, "spec": {**database["spec"], "ensure": "absent"},
              "metadata": {**database["metadata"], "generation": 2}}
    steps.append(after(cluster(both), absent, secret))  # CloudNativePG has not applied it yet: wait
    absent["status"] = {"applied": True, "observedGeneration": 2}
    steps.append(after(cluster(both), absent, secret))
    without_kept = cluster({LIVE: "reconciled", KEPT: "not-managed"})
    spec_roles = without_kept["spec"]["managed"]["roles"]
    without_kept["spec"]["managed"]["roles"] = [r for r in spec_roles if r["name"] == LIVE]
    steps.append(after(without_kept, absent, secret))
    marked = cluster({LIVE: "reconciled", KEPT: "reconciled"})
    for role in marked["spec"]["managed"]["roles"]:
        if role["name"] == KEPT:
            role["ensure"] = "absent"
    steps.append(after(marked, absent, secret))
    gone = cluster({LIVE: "reconciled"})
    steps.append(after(gone, absent, secret))
    steps.append(after(gone, None, secret))
    steps.append(after(gone, None, None))
    assert [names(s.writes) for s in steps] == [
        [f"Database {kept.object_name} absent"],
        [],
        [f"Cluster roles {LIVE}"],
        [f"Cluster roles {KEPT},{LIVE}"],
        [f"Cluster roles {LIVE}"],
        [f"delete Database {kept.object_name}"],
        [f"delete Secret {kept.object_name}"],
        [],
    ]
    assert all(s.status["drop"]["phase"] == "Dropping" and isinstance(s.retry, Requeue) for s in steps[:-2])
    assert steps[3].writes[0].obj["spec"]["managed"]["roles"][0]["ensure"] == "absent"  # type: ignore[union-attr]
    for s in steps[:-1]:  # the live role, as it was, in every Cluster written
        for write in s.writes:
            if isinstance(write, Apply) and write.obj["kind"] == "Cluster":
                [live_role] = [r for r in write.obj["spec"]["managed"]["roles"] if r["name"] == LIVE]
                assert live_role["ensure"] == "present"
    done = steps[-1]
    assert done.status["kept"] == [] and done.status["generation"] == 2 and done.plan_phase == "applied"
    assert (done.status["drop"]["phase"], done.status["drop"]["completed"]) == ("Dropped", request.id)
    # the same request again: nothing more
    again = generation_drop.step(claim(drop=done.status["drop"], kept=[]), config, request, plan("applied"),
                                 seen(gone, None, None))
    assert again.writes == () and again.status["drop"]["phase"] == "Dropped"


def test_a_request_the_claim_no_longer_allows_fails_and_drops_nothing() -> None:
    """Admitted when generation 1 was kept; a restore has switched the app back onto it since (its live one now)."""
    moved = claim(generation=1, kept=[LIVE])
    request = generation_drop.requested(moved)
    assert request is not None
    found = generation_drop.step(moved, shared(), request, plan("approved"),
                                 seen(cluster({LIVE: "reconciled", KEPT: "reconciled"}), {}, {}))
    assert found.writes == () and found.status["drop"]["phase"] == "Failed"
    assert "generation 1 is the one the app uses" in found.status["drop"]["message"]


def test_events_once_per_phase_and_a_restore_keeps_the_drop_record() -> None:
    asked = {"requested": "r2", "generation": 1, "phase": "AwaitingApproval", "message": "m"}
    before = {"kept": [KEPT]}
    [note] = generation_drop.notes(claim(), before, {**before, "drop": asked})
    assert note.reason == "GenerationDropRequested"
    assert generation_drop.notes(claim(), {"drop": asked}, {"drop": asked}) == []
    [note] = generation_drop.notes(claim(), {"drop": asked}, {"drop": {**asked, "phase": "Dropped"}})
    assert (note.reason, note.type) == ("GenerationDropped", "Normal")
    [note] = generation_drop.notes(claim(), {"drop": asked}, {"drop": {**asked, "phase": "Failed"}})
    assert (note.reason, note.type) == ("GenerationDropFailed", "Warning")
    # a later restore request rebuilds status.restore: the drop's record stays (else the drop would run again)
    import datetime

    from compatibility.authority import RESTORE_ANNOTATION

    later = claim(drop={**asked, "phase": "Dropped", "completed": "r2"}, kept=[])
    later["metadata"]["annotations"][RESTORE_ANNOTATION] = "r3@2026-12-08T11:30:00Z"
    now = datetime.datetime(2026, 12, 8, 12, 0, tzinfo=datetime.UTC)
    request = restore.requested(later)
    assert request is not None
    found = restore.step(later, shared(), request, restore.Seen(None, None, None, None, None, None, "f", now))
    assert found.status["drop"]["completed"] == "r2"
