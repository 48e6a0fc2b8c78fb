"""Point-in-time restore as pure decisions (lifecycle/restore.py, the generations of lifecycle.backends.pg_cluster and
pg.py): the request's form and TIME, the window it must fall in, the plan opened and nothing else before approval,
every step after it in order (the new generation's Secret, role, the recovered Cluster, the Database, the copy Job),
the switch (status.restore.generation, the recovered Cluster deleted, the old generation kept), a failed copy, the
Events, the pod-template stamp, the drop of every generation, and who may ask (compatibility.authority). The same
through the API server: tests/reconciler/test_pg_restore_cluster.py."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from compatibility.authority import RESTORE_ANNOTATION, restore_writer
from controller_runtime.outcomes import Requeue
from lifecycle import restore, rotation
from lifecycle.backends import pg_cluster
from lifecycle.backends.contract import Again, Apply, CreateOnce, Delete, Gone, Seen, Site
from lifecycle.backends.instance import SECRET
from lifecycle.backends.pg import CORE

OPERATOR = "system:serviceaccount:apprafter-system:apprafter-operator"
NS, IMAGE = "apprafter-pg", "localhost/postgresql:15"
NOW = datetime.datetime(2026, 12, 8, 12, 0, 0, tzinfo=datetime.UTC)
DESTINATION = {"bucket": "pg-backups", "credentials": {"secretName": "creds"}}
ASKED = "20261208T115900Z-0a1b2c3d@2026-12-08T11:30:00.25Z"


def shared(backups: bool = True) -> pg_cluster.Shared:
    config = {"cluster": "platform-postgres", **({"backup": {"destination": DESTINATION}} if backups else {})}
    found = CORE.configure({"metadata": {"name": "pg-integrated"},
                            "spec": {"type": "pg", "backend": "cloudnative-pg", "config": config}}, Site(NS, IMAGE))
    assert isinstance(found, pg_cluster.Shared)
    return found


def claim(request: str | None = ASKED, status: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": "shop", "name": "cart-pg", "uid": "u1",
                            "labels": {"app.kubernetes.io/name": "cart", "apprafter.io/environment": "prod"}}
    if request is not None:
        meta["annotations"] = {RESTORE_ANNOTATION: request}
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"type": "pg", "selector": {}}, **({"status": status} if status is not None else {})}


def ready(obj: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {**obj, "status": {"conditions": [{"type": "Ready", "status": "True"}], **status}}


def live_cluster(roles: list[str]) -> dict[str, Any]:
    """The shared Cluster as CloudNativePG reports it: archiving, restorable from 10:00, these roles reconciled."""
    cluster = pg_cluster.cluster_object(shared(), {r: {"name": r} for r in roles}, None)
    cluster["metadata"]["uid"] = "c1"
    return ready(cluster, firstRecoverabilityPoint="2026-12-08T10:00:00Z",
                 conditions=[{"type": "Ready", "status": "True"},
                             {"type": "ContinuousArchiving", "status": "True"}],
                 managedRolesStatus={"byStatus": {"reconciled": roles},
                                     "passwordStatus": {r: {"resourceVersion": "7"} for r in roles}})


def seen(cluster: dict[str, Any] | None, plan_phase: str | None = None, **objects: Any) -> restore.Seen:
    plan = {"status": {"phase": plan_phase}} if plan_phase is not None else None
    return restore.Seen(cluster, plan, objects.get("recovery"), objects.get("job"), objects.get("secret"),
                        objects.get("database"), "fresh", NOW)


def test_the_request_is_an_id_and_a_time_and_time_is_rfc_3339_or_now_less_a_duration() -> None:
    found = restore.requested(claim())
    assert found == restore.Request("20261208T115900Z-0a1b2c3d",
                                    datetime.datetime(2026, 12, 8, 11, 30, 0, 250000, tzinfo=datetime.UTC))
    assert found.at == "2026-12-08T11:30:00.25Z"
    for bad in ("0a1b", "x@2026-12-08T11:30:00+01:00", "x@2026-12-08", "@2026-12-08T11:30:00Z"):
        assert restore.requested(claim(bad)) is None, bad
    assert restore.requested(claim(None)) is None
    assert restore.target_of("now-1h30m", NOW) == datetime.datetime(2026, 12, 8, 10, 30, tzinfo=datetime.UTC)
    assert restore.target_of("now-2d", NOW) == NOW - datetime.timedelta(days=2)
    assert restore.target_of("2026-12-08T12:30:00+01:00", NOW) == datetime.datetime(2026, 12, 8, 11, 30,
                                                                                      tzinfo=datetime.UTC)
    for bad in ("yesterday", "now-", "now-5x", "2026-12-08", "2026-12-08T11:30:00"):  # no zone: which time?
        assert restore.target_of(bad, NOW) is None, bad


def test_a_time_outside_the_window_or_a_cluster_without_backups_is_refused_with_the_window() -> None:
    cluster = live_cluster([])
    assert restore.outside(NOW - datetime.timedelta(hours=1), cluster, NOW) is None
    assert restore.outside(datetime.datetime(2026, 12, 8, 9, 0, tzinfo=datetime.UTC), cluster, NOW) == (
        "2026-12-08T09:00:00Z is outside what can be restored: from 2026-12-08T10:00:00Z to 2026-12-08T12:00:00Z")
    assert "outside" in str(restore.outside(NOW + datetime.timedelta(minutes=1), cluster, NOW))
    bare = pg_cluster.cluster_object(shared(backups=False), {}, None)
    assert restore.outside(NOW, bare, NOW) == ("no backups are configured for it (its ServiceProvider names no "
                                               "backup destination)")
    no_base = {**cluster, "status": {**cluster["status"], "firstRecoverabilityPoint": None}}
    assert restore.outside(NOW, no_base, NOW) == ("nothing can be restored yet: no base backup has completed yet")
    # the operator says the same on the claim, and opens no plan
    refused = restore.step(claim("r1@2026-12-08T09:00:00Z"), shared(), restore.Request(
        "r1", datetime.datetime(2026, 12, 8, 9, tzinfo=datetime.UTC)), seen(cluster))
    assert refused.writes == () and refused.status["phase"] == "Failed" and "from 2026-12-08T10:00:00Z" in \
        refused.status["message"]


def test_a_request_opens_a_data_migration_plan_and_nothing_else_happens_before_approval() -> None:
    config, request = shared(), restore.requested(claim())
    assert request is not None
    first = restore.step(claim(), config, request, seen(live_cluster(["shop.cart-pg"])))
    [opened] = first.writes
    assert isinstance(opened, Apply)
    plan = opened.obj
    name = restore.plan_name(claim(), request)
    assert plan["metadata"]["name"] == name and name.startswith("cart-pg-restore-")
    assert plan["metadata"]["labels"] == {**restore.PLAN_LABELS, "apprafter.io/claim": "cart-pg"}
    assert plan["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert plan["spec"]["scope"] == {"type": "application", "application": {
        "ref": {"name": "cart", "namespace": "shop"}, "environment": "prod"}}
    assert plan["spec"]["risks"]["classification"] == "data-migration"
    [change] = plan["spec"]["changes"]
    assert (change["from"], change["to"]) == ("generation 1: database shop.cart-pg", "generation 2: database "
                                              "shop.cart-pg~2, as database shop.cart-pg was at 2026-12-08T11:30:00.25Z")
    assert plan["spec"]["trigger"]["approvedSpecHash"].startswith("sha256:")
    assert first.plan_phase == "pending-approval"  # opened: the operator puts it before a person
    assert first.status == {"requested": request.id, "target": "2026-12-08T11:30:00.25Z", "plan": name,
                            "generation": 1, "restoring": 2, "phase": "AwaitingApproval",
                            "message": f"MigrationPlan {name} awaits approval (`apprafter migration approve {name} "
                                       "-n shop`): nothing happens before it"}
    # the plan exists, pending: nothing is written, whatever else exists
    waiting = claim(status={"restore": first.status})
    assert restore.step(waiting, config, request, seen(live_cluster(["shop.cart-pg"]), "pending-approval")).writes \
        == ()
    assert restore.step(waiting, config, request, seen(live_cluster(["shop.cart-pg"]), "")).writes == ()


def test_approval_makes_the_new_generation_then_the_recovered_cluster_then_the_copy_then_switches() -> None:
    config, request = shared(), restore.requested(claim())
    assert request is not None
    now = claim(status={"restore": restore.step(claim(), config, request, seen(live_cluster(["shop.cart-pg"])))
                        .status})
    new = pg_cluster.tenant_of(now, 2)
    assert (new.name, new.object_name) == ("shop.cart-pg~2", new.object_name)
    assert new.object_name.startswith("claim-") and new.object_name != pg_cluster.tenant_of(now, 3).object_name
    # 1. its password Secret
    made = restore.step(now, config, request, seen(live_cluster(["shop.cart-pg"]), "approved"))
    [secret] = made.writes
    assert isinstance(secret, CreateOnce) and secret.obj["metadata"]["name"] == new.object_name and made.again
    assert made.status["phase"] == "Restoring"
    # 2. its role on the shared Cluster, beside every role there
    made = restore.step(now, config, request, seen(live_cluster(["shop.cart-pg"]), "approved", secret=secret.obj))
    [role] = made.writes
    assert isinstance(role, Apply) and [r["name"] for r in role.obj["spec"]["managed"]["roles"]] == [
        "shop.cart-pg", "shop.cart-pg~2"]
    # 3. the recovered Cluster and, once the role is reconciled, the Database
    both = live_cluster(["shop.cart-pg", "shop.cart-pg~2"])
    secret.obj["metadata"]["resourceVersion"] = "7"
    made = restore.step(now, config, request, seen(both, "approved", secret=secret.obj))
    recovery, database = made.writes
    assert isinstance(recovery, Apply) and isinstance(database, Apply)
    recovered = restore.recovered_name(config, now, request)
    assert recovery.obj["metadata"]["name"] == recovered and len(recovered) <= 50
    assert recovery.obj["spec"]["bootstrap"]["recovery"]["recoveryTarget"]["targetTime"] == \
        "2026-12-08 11:30:00.250000+00"
    assert database.obj["spec"]["name"] == database.obj["spec"]["owner"] == "shop.cart-pg~2"
    assert made.status["phase"] == "Restoring" and not made.again
    applied = {**database.obj, "metadata": {**database.obj["metadata"], "generation": 1},
               "status": {"applied": True, "observedGeneration": 1}}
    made = restore.step(now, config, request, seen(both, "approved", secret=secret.obj, database=applied,
                                                   recovery=recovery.obj))
    assert made.writes == () and recovered in made.status["message"]  # recovering: waits for it
    # 4. the copy Job, from the recovered Cluster as the old role, into the new database as the new role
    made = restore.step(now, config, request, seen(both, "approved", secret=secret.obj, database=applied,
                                                   recovery=ready(recovery.obj)))
    [job] = made.writes
    assert isinstance(job, Apply) and job.obj["kind"] == "Job" and made.status["phase"] == "Copying"
    env = {e["name"]: e.get("value") or e["valueFrom"]["secretKeyRef"]["name"]
           for e in job.obj["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["FROM"] == (f"host={recovered}-rw.{NS}.svc port=5432 user=shop.cart-pg dbname=shop.cart-pg "
                           "connect_timeout=10")
    assert env["TO"] == (f"host=platform-postgres-rw.{NS}.svc port=5432 user=shop.cart-pg~2 dbname=shop.cart-pg~2 "
                         "connect_timeout=10")
    assert (env["FROM_PASSWORD"], env["TO_PASSWORD"]) == ("shop.cart-pg", new.object_name)
    running = {**job.obj, "status": {"active": 1}}
    args = dict(secret=secret.obj, database=applied, recovery=ready(recovery.obj))
    assert restore.step(now, config, request, seen(both, "approved", job=running, **args)).writes == ()
    # 5. copied: the switch, the recovered Cluster deleted, the old generation kept, the plan applied
    complete = {**job.obj, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    made = restore.step(now, config, request, seen(both, "approved", job=complete, **args))
    assert made.writes == (Delete(pg_cluster.CLUSTER, NS, recovered),) and made.plan_phase == "applied"
    assert {k: made.status[k] for k in ("generation", "completed", "kept", "phase")} == {
        "generation": 2, "completed": request.id, "kept": ["shop.cart-pg"], "phase": "Restored"}
    switched = claim(status={"restore": made.status})
    assert pg_cluster.tenant_of(switched) == new  # the backend provisions the claim at generation 2 from now
    assert restore.step(switched, config, request, seen(both, "applied")).writes == ()  # once per request
    assert restore.in_flight(now) and not restore.in_flight(switched)  # the edge reads nothing more for it
    # a new request restores into generation 3, generation 2 and 1 kept
    again = restore.Request("r2", request.target)
    assert restore.restoring(claim("r2@2026-12-08T11:30:00Z", {"restore": made.status}), again) == 3


def test_a_new_generation_whose_share_does_not_fit_the_clusters_volume_waits_and_adds_no_role() -> None:
    config, request = shared(), restore.requested(claim())
    assert request is not None
    crowded = live_cluster(["shop.cart-pg"])  # the default volume 1Gi: eight small shares fill it
    for i in range(8):
        crowded["spec"]["managed"]["roles"].append(pg_cluster.role_entry(pg_cluster.tenant_of(
            {**claim(), "metadata": {**claim()["metadata"], "name": f"other{i}-pg"}})))
    made = restore.step(claim(), config, request, seen(crowded, "approved", secret={"metadata": {}}))
    assert made.writes == () and made.status["phase"] == "Restoring" and "does not fit" in made.status["message"]
    crowded["spec"]["managed"]["roles"].pop()  # room for one more
    [role] = restore.step(claim(), config, request, seen(crowded, "approved", secret={"metadata": {}})).writes
    assert isinstance(role, Apply)


def test_a_failed_copy_says_why_deletes_the_recovered_cluster_and_the_app_stays_where_it_was() -> None:
    config, request = shared(), restore.requested(claim())
    assert request is not None
    both = live_cluster(["shop.cart-pg", "shop.cart-pg~2"])
    now = claim(status={"restore": {"requested": request.id, "restoring": 2, "generation": 1}})
    failed = {"status": {"conditions": [{"type": "Failed", "status": "True", "message": "Job has reached the "
                                         "specified backoff limit"}]}}
    made = restore.step(now, config, request, seen(both, "approved", secret={"metadata": {"resourceVersion": "7"}},
                                                   database={"status": {"applied": True}}, job=failed,
                                                   recovery=ready({})))
    assert made.writes == (Delete(pg_cluster.CLUSTER, NS, restore.recovered_name(config, now, request)),)
    assert made.status["phase"] == "Failed" and "backoff limit" in made.status["message"]
    assert made.status["generation"] == 1
    assert restore.step(claim(status={"restore": made.status}), config, request, seen(both, "approved")).writes == ()


def test_a_new_request_supersedes_the_plans_of_earlier_ones_still_in_play() -> None:
    def plan(name: str, phase: str | None, claim_name: str = "cart-pg", namespace: str = "shop") -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": namespace, "labels": {"apprafter.io/claim": claim_name}},
                **({"status": {"phase": phase}} if phase is not None else {})}
    plans = [plan("now", "pending-approval"), plan("pending", "pending-approval"), plan("approved", "approved"),
             plan("unwritten", None), plan("applied", "applied"), plan("superseded", "superseded"),
             plan("other-claim", "pending-approval", "other-pg"), plan("other-ns", "pending-approval", namespace="x")]
    assert restore.superseded(plans, claim(), "now") == ["approved", "pending", "unwritten"]


def test_each_phase_is_one_event_once_per_request() -> None:
    asked = {"requested": "r1", "target": "T", "message": "m"}
    assert [n.reason for n in restore.notes(claim(), None, {**asked, "phase": "AwaitingApproval"})] == [
        "RestoreRequested"]
    assert restore.notes(claim(), {**asked, "phase": "AwaitingApproval"}, {**asked, "phase": "AwaitingApproval"}) \
        == []
    assert [n.reason for n in restore.notes(claim(), {**asked, "phase": "AwaitingApproval"},
                                            {**asked, "phase": "Restoring"})] == ["Restoring"]
    assert restore.notes(claim(), {**asked, "phase": "Copying"}, {**asked, "phase": "Restoring"}) == []
    [done] = restore.notes(claim(), {**asked, "phase": "Copying"}, {**asked, "phase": "Restored"})
    assert (done.reason, done.type, done.occurrence) == ("Restored", "Normal", "u1/r1/Restored")
    [failed] = restore.notes(claim(), {**asked, "phase": "Copying"}, {**asked, "phase": "Failed"})
    assert (failed.reason, failed.type) == ("RestoreFailed", "Warning")


def test_the_switch_stamps_the_pod_templates_that_read_the_claims_secret() -> None:
    deployment = {"kind": "Deployment", "metadata": {"name": "cart"}, "spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "URL", "valueFrom": {"secretKeyRef": {"name": "cart-pg-conn",
                                                                               "key": "url"}}}]}]}}}}
    other = {**deployment, "metadata": {"name": "other"}, "spec": {"template": {"spec": {"containers": []}}}}
    switched = claim(status={"restore": {"generation": 2}})
    out = rotation.stamped([deployment, other], [switched])
    assert out[0]["spec"]["template"]["metadata"]["annotations"] == {"restore.apprafter.io/pg": "2"}
    assert out[1] == other
    assert rotation.stamped([deployment], [claim()]) == [deployment]  # generation 1: nothing to roll


def test_dropping_the_claims_data_drops_every_generation_the_one_it_is_at_first() -> None:
    switched = claim(status={"restore": {"generation": 2, "restoring": 2, "kept": ["shop.cart-pg"]}})
    assert pg_cluster.generations(switched) == (2, 1)
    assert pg_cluster.generations(claim()) == (1,)
    names = [r.name for r in CORE.reads(switched, shared())]
    first, second = pg_cluster.tenant_of(switched, 2), pg_cluster.tenant_of(switched, 1)
    alternates = [pg_cluster.tenant_of(switched, n, alternate=True).object_name for n in (2, 1)]
    assert names == ["platform-postgres", first.object_name, first.object_name, second.object_name,
                     second.object_name, "platform-postgres-pooler", alternates[0], alternates[0], alternates[1],
                     alternates[1], f"{alternates[0]}-set-role"]
    # nothing left of generation 2 but its Secret: it goes, and the drop goes on to generation 1
    step = CORE.drop(switched, shared(), Seen({CORE.reads(switched, shared())[2]: {"metadata": {}}}, None, "", 0.0))
    assert isinstance(step.then, Again) and step.writes == (Delete(SECRET, NS,
                                                                   first.object_name),)
    step = CORE.drop(switched, shared(), Seen({}, None, "", 0.0))
    assert isinstance(step.then, Gone)


@pytest.mark.parametrize(("old", "new", "kind", "user", "allowed"), [
    (None, ASKED, "pg", "alice", True),
    (ASKED, ASKED, "pg", OPERATOR, True),  # unchanged
    (ASKED, None, "pg", "alice", True),  # withdrawn
    (None, ASKED, "pg", OPERATOR, False),  # never the operator
    (None, "2026-12-08T11:30:00Z", "pg", "alice", False),  # not a request's form
    (None, ASKED, "redis", "alice", False),  # no restore for it
])
def test_who_may_ask_for_a_restore(old: str | None, new: str | None, kind: str, user: str, allowed: bool) -> None:
    assert (restore_writer(old, new, kind, user, OPERATOR) is None) is allowed


def test_one_restore_per_provider_at_a_time_the_next_waits_queued_and_makes_nothing() -> None:
    """A recovered Cluster holds every tenant's data of the provider: while another claim's is there, an approved
    restore makes nothing (no role, no Cluster), says whose it waits for, and starts once that one is gone."""
    config, request = shared(), restore.requested(claim())
    assert request is not None
    now = claim(status={"restore": restore.step(claim(), config, request, seen(live_cluster(["shop.cart-pg"])))
                        .status})
    other = {"metadata": {"namespace": "shop", "name": "cart-pg"}}
    theirs = {"metadata": {"name": "platform-postgres-x-at-1", "annotations": restore.recovery_annotations(
        {"metadata": {"namespace": "blog", "name": "posts-pg"}})}}
    mine = {"metadata": {"name": "platform-postgres-y-at-2", "annotations": restore.recovery_annotations(other)}}
    shared_cluster = live_cluster(["shop.cart-pg"])
    assert restore.slot_holder(now, [shared_cluster, mine]) is None  # the shared Cluster and its own: free
    assert restore.slot_holder(now, [shared_cluster, theirs]) == ("platform-postgres-x-at-1", "blog/posts-pg")
    gone = {"metadata": {**theirs["metadata"], "deletionTimestamp": "2026-12-08T12:00:00Z"}}
    assert restore.slot_holder(now, [gone]) is None
    queued = restore.step(now, config, request, seen(shared_cluster, "approved")._replace(
        clusters=(shared_cluster, theirs)))
    assert queued.writes == () and queued.status["phase"] == "Queued" and isinstance(queued.retry, Requeue)
    assert "blog/posts-pg" in queued.status["message"]
    [note] = restore.notes(now, now["status"]["restore"], queued.status)
    assert note.reason == "RestoreQueued"
    free = restore.step(now, config, request, seen(shared_cluster, "approved")._replace(clusters=(shared_cluster,)))
    assert free.status["phase"] == "Restoring" and free.writes  # its password Secret first
