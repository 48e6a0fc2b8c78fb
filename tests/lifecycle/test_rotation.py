"""Credential rotation as pure decisions (lifecycle/rotation.py and the backends' cores): what the claim binder sees
of a request (its form, what the connection Secret answers, which pods hold an older password), redis' two passwords
through the rollout and pg's two alternating login roles, once per request; the status, its completion and Events;
the pod-template stamp that rolls the app's pods (and nothing else); who may ask
(compatibility.authority.rotate_writer)."""

from __future__ import annotations

from typing import Any

import pytest

from compatibility.authority import ROTATE_ANNOTATION, ROTATED_TYPES, rotate_writer
from lifecycle import rotation
from lifecycle.backends import pg_cluster, pg_roles
from lifecycle.backends.common import b64
from lifecycle.backends.contract import Again, Apply, CreateOnce, Ready, Rotation, Seen, Site, Waiting
from lifecycle.backends.pg import CORE as PG
from lifecycle.backends.redis import CORE as REDIS
from lifecycle.backends.redis import Config, SetUser, TryUser, account_of, acl_rules

OPERATOR = "system:serviceaccount:apprafter-system:apprafter-operator"
FRESH = "a-fresh-password"
OLD = "the-old-password"
V1, V2 = "20261208T100000Z-0a1b2c3d", "20261208T110000Z-4e5f6a7b"
TS = "2026-12-08T10:00:05Z"


def claim(kind: str = "redis", request: str | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": "shop", "name": f"cart-{kind}", "uid": "u1",
                            "labels": {"app.kubernetes.io/name": "cart"}}
    if request is not None:
        meta["annotations"] = {ROTATE_ANNOTATION: request}
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ResourceClaim", "metadata": meta,
            "spec": {"type": kind, "selector": {}}, **({"status": status} if status is not None else {})}


def pod(name: str, stamp: str | None = None, secret: str = "cart-redis-conn", kind: str = "redis",
        **extra: Any) -> dict[str, Any]:
    annotations = {rotation.template_key(kind): stamp} if stamp else {}
    return {"metadata": {"namespace": extra.pop("namespace", "shop"), "name": name, "annotations": annotations,
                         **extra.pop("meta", {})},
            "spec": {"containers": [{"name": "app", "env": [
                {"name": "URL", "valueFrom": {"secretKeyRef": {"name": secret, "key": "url"}}}]}]}, **extra}


def secret(marker: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "cart-redis-conn", **({"annotations": {rotation.ISSUED_ANNOTATION: marker}}
                                                       if marker else {})}}


# --- what the claim binder sees ------------------------------------------------------------------------------------

def test_a_request_is_due_until_the_connection_secret_answers_it_and_the_same_value_is_one_request() -> None:
    assert rotation.seen(claim(), secret(), []) == Rotation()  # never asked: nothing due, nothing held
    asked = rotation.seen(claim(request=V1), secret(), [])
    assert asked == Rotation(V1, None, ()) and asked.due and not asked.settled
    answered = rotation.seen(claim(request=V1), secret(V1), [])
    assert not answered.due and answered.settled  # the Secret holds V1's password: V1 again changes nothing
    assert rotation.seen(claim(request=V2), secret(V1), []).due  # a new value is a new request
    # a value of another form (the webhook refuses it) is no request; a type without a rotating backend sees none
    assert rotation.seen(claim(request="bad value; rm -rf"), secret(), []) == Rotation()
    assert rotation.seen(claim("disk", request=V1), secret(), []) == Rotation()


def test_the_pods_holding_an_older_password_are_those_reading_the_secret_from_an_older_template() -> None:
    pods = [pod("new-1", V1), pod("old-1"), pod("old-2", "20261207T000000Z-00000000"),
            pod("ending", meta={"deletionTimestamp": TS}),  # terminating: it still serves with the old one
            pod("done", status={"phase": "Succeeded"}),  # ended: holds nothing
            pod("elsewhere", namespace="other"), pod("not-reading", secret="cart-pg-conn")]
    assert rotation.holding(claim(), V1, pods) == ("ending", "old-1", "old-2")
    seen = rotation.seen(claim(request=V1), secret(V1), pods)
    assert seen.holding == ("ending", "old-1", "old-2") and not seen.due and not seen.settled
    # before any rotation the pods carry no stamp, and none is asked of them
    assert rotation.holding(claim(), None, [pod("a"), pod("b")]) == ()


# --- redis: both passwords on the user until the pods have rolled ------------------------------------------------

def redis_config() -> Config:
    found = REDIS.configure({"metadata": {"name": "own"}, "spec": {"type": "redis", "backend": "redis-server",
                                                                   "config": {"address": "10.0.0.7:6379"}}},
                            Site("apprafter-redis"))
    assert isinstance(found, Config), found
    return found


def redis_step(seen_rotation: Rotation, password: str = OLD) -> tuple[Ready, SetUser, TryUser]:
    cfg = redis_config()
    admin = {"metadata": {"name": "own-admin"}, "data": {"password": b64("admin")}}
    reads = REDIS.reads(claim(), cfg)
    step = REDIS.provision(claim(), cfg, Seen(dict(zip(reads, (admin,), strict=False)),
                                              {"user": "shop.cart-redis", "password": password}, FRESH, 0,
                                              seen_rotation))
    assert isinstance(step.then, Ready), step.then
    set_user, try_user = step.calls
    assert isinstance(set_user, SetUser) and isinstance(try_user, TryUser)
    return step.then, set_user, try_user


def test_redis_a_request_sets_a_new_password_beside_the_old_one_and_hands_out_the_new() -> None:
    ready, set_user, try_user = redis_step(Rotation(V1, None, ()))
    account = account_of(claim())
    assert ready.secret is not None and ready.secret["password"] == FRESH and ready.rotated == V1
    assert set_user.rules == acl_rules(account, FRESH, keep=True)  # no reset: the old password stays on the user
    assert set_user.rules[:2] == ("resetkeys", "resetchannels") and "reset" not in set_user.rules
    assert try_user.password == FRESH
    assert FRESH not in repr(set_user) and FRESH not in ready.message  # a password is never shown


def test_redis_the_old_password_stays_while_a_pod_holds_it_and_goes_once_none_does() -> None:
    rolling, set_user, _ = redis_step(Rotation(V1, V1, ("old-1",)), FRESH)
    assert rolling.secret is not None and rolling.secret["password"] == FRESH and rolling.rotated == V1
    assert set_user.rules == acl_rules(account_of(claim()), FRESH, keep=True)
    settled, set_user, _ = redis_step(Rotation(V1, V1, ()), FRESH)
    assert settled.secret is not None and settled.secret["password"] == FRESH  # no second new password for V1
    assert set_user.rules == acl_rules(account_of(claim()), FRESH) and set_user.rules[0] == "reset"
    never, set_user, _ = redis_step(Rotation(), OLD)  # a claim never rotated: as before, reset, its kept password
    assert never.rotated is None and set_user.rules == acl_rules(account_of(claim()), OLD)


# --- pg: two login roles that alternate, the standby's Secret rewritten once per request ----------------------------

OWNER, ALT = "shop.cart-pg", "shop.cart-pg~b"


def pg_shared() -> pg_cluster.Shared:
    found = PG.configure({"metadata": {"name": "pg"}, "spec": {"type": "pg", "backend": "cloudnative-pg"}},
                         Site("apprafter-pg", "localhost/postgresql:15"))
    assert isinstance(found, pg_cluster.Shared), found
    return found


def pg_seen(secrets: dict[str, dict[str, Any] | None], applied: dict[str, str], given: dict[str, str] | None,
            seen_rotation: Rotation, job: dict[str, Any] | None = None) -> Seen:
    """What a pg step reads: the Cluster Ready with the roles of `applied` reconciled at those Secret versions, the
    Database applied, the two roles' password Secrets (by role), the alternate's Job."""
    cluster = {"status": {"conditions": [{"type": "Ready", "status": "True"}], "managedRolesStatus": {
        "byStatus": {"reconciled": sorted(applied)},
        "passwordStatus": {role: {"resourceVersion": version} for role, version in applied.items()}}}}
    database = {"metadata": {"generation": 1}, "status": {"applied": True, "observedGeneration": 1}}
    cluster_read, database_read, owner_read, pooler_read, _, alt_read, job_read = PG.reads(claim("pg"), pg_shared())
    return Seen({cluster_read: cluster, database_read: database, owner_read: secrets.get(OWNER), pooler_read: None,
                 alt_read: secrets.get(ALT), job_read: job}, given, FRESH, 0, seen_rotation)


def pg_password_secret(password: str, version: str, marker: str | None = None, role: str = OWNER,
                       retired: str | None = None) -> dict[str, Any]:
    tenant = pg_cluster.tenant_of(claim("pg"), alternate=role == ALT)
    made = (pg_roles.retired_secret(pg_shared(), tenant, password, retired) if retired else
            pg_cluster.password_secret_object(pg_shared(), tenant, password, marker))
    made["metadata"]["resourceVersion"], made["metadata"]["uid"] = version, f"uid-{role}"
    return made


JOB_DONE = {"status": {"succeeded": 1}}


def secret_writes(step: Any) -> list[dict[str, Any]]:
    return [w.obj for w in step.writes if isinstance(w, Apply | CreateOnce) and w.obj["kind"] == "Secret"]


def test_pg_a_request_gives_the_standby_role_a_new_password_once_and_leaves_the_apps_role_alone() -> None:
    given = {"user": OWNER, "password": OLD}
    step = PG.provision(claim("pg", V1), pg_shared(), pg_seen({OWNER: pg_password_secret(OLD, "7")}, {OWNER: "7"},
                                                              given, Rotation(V1, None, ())))
    assert isinstance(step.then, Again)
    [write] = step.writes
    assert isinstance(write, CreateOnce) and write.obj["data"]["username"] == b64(ALT)
    assert write.obj["data"]["password"] == b64(FRESH)
    assert write.obj["metadata"]["annotations"][rotation.ISSUED_ANNOTATION] == V1
    assert write.obj["metadata"]["labels"]["cnpg.io/reload"] == "true"  # CloudNativePG applies it
    # marked: the same request again writes no password anew, the Cluster gets the alternate's entry
    again = PG.provision(claim("pg", V1), pg_shared(), pg_seen(
        {OWNER: pg_password_secret(OLD, "7"), ALT: pg_password_secret(FRESH, "8", V1, ALT)}, {OWNER: "7"}, given,
        Rotation(V1, None, ())))
    assert secret_writes(again) == []
    [cluster] = [w.obj for w in again.writes if isinstance(w, Apply) and w.obj["kind"] == "Cluster"]
    roles = {r["name"]: r for r in cluster["spec"]["managed"]["roles"]}
    assert roles[ALT] == {"name": ALT, "ensure": "present", "login": True, "passwordSecret": {
        "name": pg_cluster.tenant_of(claim("pg"), alternate=True).object_name}, "connectionLimit": 10,
        "inRoles": [OWNER], "comment": "apprafter alternate login of claim shop/cart-pg"}
    assert roles[OWNER]["passwordSecret"] == {"name": OWNER}  # the app's role as it was


def test_pg_the_claim_stays_ready_on_its_role_until_the_standby_is_applied_and_runs_as_the_owner() -> None:
    given = {"user": OWNER, "password": OLD, "url": "postgresql://old"}
    secrets = {OWNER: pg_password_secret(OLD, "7"), ALT: pg_password_secret(FRESH, "8", V1, ALT)}
    pending = PG.provision(claim("pg", V1), pg_shared(), pg_seen(secrets, {OWNER: "7"}, given,
                                                                 Rotation(V1, None, ())))
    assert isinstance(pending.then, Ready) and pending.then.secret == given and pending.then.rotated is None
    assert f"the rotation of request {V1} waits: role {ALT} is not reconciled" in pending.then.message
    # applied: the Job that makes its sessions run as the claim's role, made once; still on the old role meanwhile
    setting = PG.provision(claim("pg", V1), pg_shared(), pg_seen(secrets, {OWNER: "7", ALT: "8"}, given,
                                                                 Rotation(V1, None, ())))
    assert isinstance(setting.then, Ready) and setting.then.secret == given
    [job] = [w.obj for w in setting.writes if isinstance(w, CreateOnce) and w.obj["kind"] == "Job"]
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["PGUSER"], env["PGDATABASE"], env["SQL"]) == (ALT, OWNER, f"ALTER ROLE SESSION_USER SET role = "
                                                                           f"'{OWNER}'")
    assert job["metadata"]["ownerReferences"][0]["uid"] == f"uid-{ALT}"  # goes with the alternate's Secret
    assert FRESH not in repr(job)  # the password from the Secret, never in the Job
    switched = PG.provision(claim("pg", V1), pg_shared(), pg_seen(secrets, {OWNER: "7", ALT: "8"}, given,
                                                                  Rotation(V1, None, ()), JOB_DONE))
    assert isinstance(switched.then, Ready) and switched.then.secret is not None
    assert (switched.then.secret["user"], switched.then.secret["password"], switched.then.secret["db"]) == (
        ALT, FRESH, OWNER)
    assert switched.then.secret["url"].endswith(f"/{OWNER}") and switched.then.rotated == V1
    assert secret_writes(switched) == []  # the old role's password untouched while pods may hold it
    # outside a rotation a password not applied is a wait, as it always was
    waits = PG.provision(claim("pg"), pg_shared(), pg_seen({OWNER: pg_password_secret(OLD, "8")}, {OWNER: "7"},
                                                           given, Rotation()))
    assert isinstance(waits.then, Waiting) and waits.then.reason == "RoleNotReady"


def test_pg_the_old_roles_password_is_replaced_only_once_no_pod_holds_it_and_refused_once_applied() -> None:
    given = {"user": ALT, "password": FRESH}
    secrets = {OWNER: pg_password_secret(OLD, "7"), ALT: pg_password_secret(FRESH, "8", V1, ALT)}
    rolling = PG.provision(claim("pg", V1), pg_shared(), pg_seen(secrets, {OWNER: "7", ALT: "8"}, given,
                                                                 Rotation(V1, V1, ("old-1",)), JOB_DONE))
    assert isinstance(rolling.then, Ready) and rolling.then.secret is not None
    assert rolling.then.secret["user"] == ALT and secret_writes(rolling) == []
    settled = PG.provision(claim("pg", V1), pg_shared(), pg_seen(secrets, {OWNER: "7", ALT: "8"}, given,
                                                                 Rotation(V1, V1, ()), JOB_DONE))
    assert isinstance(settled.then, Ready) and not settled.then.refused  # not yet: CloudNativePG applies it
    [retiring] = secret_writes(settled)
    assert retiring["data"] == {"username": b64(OWNER), "password": b64(FRESH)}
    assert retiring["metadata"]["annotations"][pg_roles.RETIRED_ANNOTATION] == V1
    assert rotation.ISSUED_ANNOTATION not in retiring["metadata"]["annotations"]
    assert "completed" not in (rotation.status(claim("pg", V1), Rotation(V1, V1, ()), V1, True, TS,
                                               settled.then.refused) or {})
    secrets[OWNER] = pg_password_secret("retired", "9", role=OWNER, retired=V1)
    unapplied = PG.provision(claim("pg", V1), pg_shared(), pg_seen(secrets, {OWNER: "7", ALT: "8"}, given,
                                                                   Rotation(V1, V1, ()), JOB_DONE))
    assert isinstance(unapplied.then, Ready) and not unapplied.then.refused and secret_writes(unapplied) == []
    refused = PG.provision(claim("pg", V1), pg_shared(), pg_seen(secrets, {OWNER: "9", ALT: "8"}, given,
                                                                 Rotation(V1, V1, ()), JOB_DONE))
    assert isinstance(refused.then, Ready) and refused.then.refused and refused.then.secret is not None
    assert refused.then.secret["user"] == ALT and refused.then.rotated == V1
    assert (rotation.status(claim("pg", V1), Rotation(V1, V1, ()), V1, True, TS, refused.then.refused) or {})[
        "completed"] == V1


def test_pg_the_next_request_goes_back_to_the_claims_role_with_a_new_password() -> None:
    given = {"user": ALT, "password": FRESH}
    secrets = {OWNER: pg_password_secret("retired", "9", role=OWNER, retired=V1),
               ALT: pg_password_secret(FRESH, "8", V1, ALT)}
    step = PG.provision(claim("pg", V2), pg_shared(), pg_seen(secrets, {OWNER: "9", ALT: "8"}, given,
                                                              Rotation(V2, V1, ()), JOB_DONE))
    [write] = secret_writes(step)
    assert isinstance(step.then, Again) and write["data"] == {"username": b64(OWNER), "password": b64(FRESH)}
    assert write["metadata"]["annotations"] == {"apprafter.io/claim": "shop/cart-pg",
                                                rotation.ISSUED_ANNOTATION: V2}  # no longer retired
    secrets[OWNER] = pg_password_secret("new", "10", V2)
    back = PG.provision(claim("pg", V2), pg_shared(), pg_seen(secrets, {OWNER: "10", ALT: "8"}, given,
                                                              Rotation(V2, V1, ()), JOB_DONE))
    assert isinstance(back.then, Ready) and back.then.secret is not None and back.then.rotated == V2
    assert (back.then.secret["user"], back.then.secret["password"]) == (OWNER, "new")
    # a connection Secret gone (the claim re-created): the role whose password is not retired
    secrets = {OWNER: pg_password_secret("retired", "9", role=OWNER, retired=V1),
               ALT: pg_password_secret(FRESH, "8", V1, ALT)}
    fresh = PG.provision(claim("pg"), pg_shared(), pg_seen(secrets, {OWNER: "9", ALT: "8"}, None, Rotation(),
                                                           JOB_DONE))
    assert isinstance(fresh.then, Ready) and fresh.then.secret is not None and fresh.then.secret["user"] == ALT


# --- status and Events ----------------------------------------------------------------------------------------------

def test_the_status_follows_the_request_to_completion_once_and_its_events_once_each() -> None:
    assert rotation.status(claim(), Rotation(), None, True, TS) is None  # never asked: no field
    asked = claim(request=V1)
    made = rotation.status(asked, Rotation(V1, None, ()), V1, True, TS)  # the step that made the new password
    assert made is not None and (made["requested"], made["issued"]) == (V1, V1) and "completed" not in made
    assert "the app's pods roll onto it" in made["message"]
    [rotating] = rotation.notes(asked, None, made)
    assert rotating.reason == "CredentialsRotating" and "cart-redis-conn" in rotating.text
    rolling = claim(request=V1, status={"rotation": made})
    held = rotation.status(rolling, Rotation(V1, V1, ("old-1",)), V1, True, "2026-12-08T10:00:06Z")
    assert held is not None and "completed" not in held and "old-1" in held["message"]
    assert rotation.notes(rolling, made, held) == []  # nothing new to say
    done = rotation.status(rolling, Rotation(V1, V1, ()), V1, True, "2026-12-08T10:00:09Z")
    assert done is not None and (done["completed"], done["completedAt"]) == (V1, "2026-12-08T10:00:09Z")
    assert "the old password is refused" in done["message"]
    [rotated] = rotation.notes(rolling, held, done)
    assert rotated.reason == "CredentialsRotated" and V1 in rotated.text
    later = rotation.status(claim(request=V1, status={"rotation": done}), Rotation(V1, V1, ()), V1, True,
                            "2026-12-08T11:00:00Z")
    assert later == done  # completed once: its time kept
    # a claim that is not ready keeps what its status said, the request noted
    waiting = rotation.status(claim(request=V2, status={"rotation": done}), Rotation(V2, V1, ()), None, False, TS)
    assert waiting is not None and (waiting["requested"], waiting["issued"], waiting["completed"]) == (V2, V1, V1)
    assert "once the claim is ready again" in waiting["message"]


def test_a_rotation_in_flight_wakes_on_the_pods_that_read_its_secret() -> None:
    flying = claim(request=V1, status={"rotation": {"requested": V1, "issued": V1}})
    finished = {**claim("pg"), "status": {"rotation": {"requested": V1, "completed": V1}}}
    assert rotation.in_flight(flying) and not rotation.in_flight(finished) and not rotation.in_flight(claim())
    assert rotation.concerned([flying, finished], pod("p")) == [("shop", "cart-redis")]
    assert rotation.concerned([flying], pod("p", secret="other")) == []
    assert rotation.concerned([flying], pod("p", namespace="other")) == []


# --- the pod-template stamp ---------------------------------------------------------------------------------------

def deployment(secret: str = "cart-redis-conn") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "cart"},
            "spec": {"template": {"metadata": {"labels": {"app": "cart"}, "annotations": {"kept": "yes"}},
                                  "spec": pod("x", secret=secret)["spec"]}}}


def test_a_rotated_claims_request_is_stamped_on_the_templates_that_read_its_secret_and_nowhere_else() -> None:
    rotated = claim(status={"rotation": {"requested": V1, "issued": V1},
                            "connection": {"secretName": "cart-redis-conn"}})
    asked = claim("pg", status={"rotation": {"requested": V2}, "connection": {"secretName": "cart-pg-conn"}})
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "cart"}, "spec": {}}
    reads, other, svc = rotation.stamped([deployment(), deployment("cart-pg-conn"), service], [rotated, asked])
    assert reads["spec"]["template"]["metadata"]["annotations"] == {"kept": "yes",
                                                                   "rotation.apprafter.io/redis": V1}
    # pg's request has no new password handed out yet: nothing rolls before the Secret holds it
    assert other == deployment("cart-pg-conn") and svc == service
    assert rotation.stamped([deployment()], [claim()]) == [deployment()]  # never rotated: the template as rendered
    original = deployment()
    rotation.stamped([original], [rotated])
    assert original == deployment()  # the rendered child is not changed in place


# --- who may ask ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("old", "new", "kind", "user", "refused"), [
    (None, V1, "pg", "alice", None),  # the app's team (whoever RBAC lets write the claim)
    (V1, V2, "redis", "alice", None),
    (V1, V1, "pg", OPERATOR, None),  # unchanged: the operator's own applies of the claim
    (V1, None, "pg", "alice", None),  # withdrawn
    (None, V1, "pg", OPERATOR, "never the operator"),
    (None, "-starts-with-a-dash", "pg", "alice", "is not a rotation request"),
    (None, "x" * 64, "pg", "alice", "is not a rotation request"),
    (None, "a b", "pg", "alice", "is not a rotation request"),
    (None, V1, "disk", "alice", "a claim of type disk has no password the operator rotates"),
    (None, V1, "s3", "alice", "a claim of type s3 has no password the operator rotates"),
])
def test_who_may_ask_for_a_rotation_and_what_a_request_looks_like(old: str | None, new: str | None, kind: str,
                                                                   user: str, refused: str | None) -> None:
    why = rotate_writer(old, new, kind, user, OPERATOR)
    assert (why is None) == (refused is None) and (refused is None or refused in str(why))


def test_every_type_a_request_may_name_has_its_backends_words() -> None:
    assert set(rotation.ROTATES) == set(ROTATED_TYPES)


def test_pg_a_restores_new_generation_answers_the_request_the_connection_did_no_second_rotation() -> None:
    """After a restore's switch (lifecycle.restore) the claim is at generation 2, whose role's Secret the restore
    made without a mark: the connection still answers the completed request, so nothing is due (no new password, no
    switch to generation 2's alternate)."""
    restored = claim("pg", V1, {"restore": {"generation": 2}})
    found = pg_shared()
    owner = pg_cluster.tenant_of(restored)
    secret = pg_cluster.password_secret_object(found, owner, "restored")
    secret["metadata"]["resourceVersion"] = "20"
    cluster = {"status": {"conditions": [{"type": "Ready", "status": "True"}], "managedRolesStatus": {
        "byStatus": {"reconciled": [owner.name]}, "passwordStatus": {owner.name: {"resourceVersion": "20"}}}}}
    database = {"metadata": {"generation": 1}, "status": {"applied": True, "observedGeneration": 1}}
    reads = PG.reads(restored, found)
    seen = Seen({reads[0]: cluster, reads[1]: database, reads[2]: secret}, {"user": ALT, "password": FRESH}, FRESH,
                0, Rotation(V1, V1, ()))
    step = PG.provision(restored, found, seen)
    assert isinstance(step.then, Ready) and step.then.secret is not None and step.then.rotated == V1
    assert (step.then.secret["user"], step.then.secret["password"]) == (owner.name, "restored")
    assert secret_writes(step) == []
