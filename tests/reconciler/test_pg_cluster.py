"""`needs: pg` through the API server with CloudNativePG's CRDs (reconciler/claims.py, reconciler/pg_claims.py,
lifecycle/pg_backend.py): an Application's claim, bound to a cloudnative-pg ServiceProvider, makes the provider's one
Cluster (lazily, Guaranteed, shared_buffers, the pg_hba that confines each role to its own database) with a managed
role per claim, its password Secret and a retained Database; the claim waits on what CloudNativePG reports and becomes
ready with its connection Secret; the role, password and database outlive the claim, unless an approved
data-migration plan removes the need: then the database and the role are dropped, step by step on CloudNativePG's
word, and their resources go.

No CloudNativePG manager runs on this tier: the test writes the status CloudNativePG writes (a JSON merge patch of the
status subresource, as its controllers do with client.MergeFrom: the Ready condition, status.managedRolesStatus, a
Database's applied and observedGeneration). Its real-tool twin, where CloudNativePG makes the role and the database
and pods connect, is tests/reconciler/test_pg_node.py."""

from __future__ import annotations

import base64
import datetime
import json
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from lifecycle.backends.pg_cluster import tenant_of
from reconciler.backends.registry import default_image
from tests.reconciler.helpers import (
    API,
    add_provider,
    apply,
    collect_garbage,
    condition,
    cr,
    edit,
    events,
    fresh_namespace,
    plan_phase,
    plans,
    status,
    template_pod,
    wait,
    wait_phase,
    wait_showing,
)
from tests.reconciler.operator_proc import FAST, Fixture, Operator, operator_fixture
from tests.renderer.helpers import run_cli
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
SERVICES = f"pg-svc-{RUN}"  # this module's pg services namespace (the operator's providerNamespaces.pg)
PROVIDER, CLUSTER = f"pg-{RUN}", f"postgres-{RUN}"
IMAGE = "localhost/postgresql:15"
CNPG = "postgresql.cnpg.io/v1"
FIELDS = {"url", "pooledUrl", "host", "port", "user", "password", "db"}
CNPG_MANAGER = "manager"  # the field manager CloudNativePG's binary writes status as (controller-runtime's default)


@pytest.fixture(scope="module")
def pg_platform(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The operator's platform file: this module's services namespace for pg (made, as the stack makes it)."""
    bed.ensure_namespace(SERVICES)
    path = Path(tmp_path_factory.mktemp("platform")) / "platform.yaml"
    path.write_text(f"providerNamespaces: {{pg: {SERVICES}}}\n")
    return str(path)


@pytest.fixture(scope="module")
def provider(bed: KubeTestBed, pg_platform: str) -> Any:
    """An administrator's cloudnative-pg provider, its Cluster in this module's services namespace."""
    add_provider(bed, PROVIDER, "pg", "cloudnative-pg", {
                   "cluster": CLUSTER, "namespace": SERVICES, "instances": 1, "storage": {"size": "1Gi"},
                   "resources": {"cpu": "250m", "memory": "256Mi"}, "sharedBuffersPercent": 25}, labels={"bed": RUN})
    yield
    bed.delete(API, "ServiceProvider", PROVIDER)


operator = operator_fixture("--no-leader-elect", *FAST, "--platform", Fixture("pg_platform"),
                            "--backend-image", f"cloudnative-pg={IMAGE}")

NEEDS = edit(needs={"pg": {"selector": {"bed": RUN}}}, env={"DATABASE_URL": {"claim": "pg/url"}},
             expose={"port": 8080})


def claim_status(bed: KubeTestBed, namespace: str) -> dict[str, Any]:
    return (bed.get(API, "ResourceClaim", "demo-pg", namespace) or {}).get("status") or {}


def says(bed: KubeTestBed, namespace: str, reason: str, timeout: float = 60) -> dict[str, Any]:
    """Wait for the claim's Ready condition to have this reason."""
    def probe() -> dict[str, Any] | None:
        ready = condition(claim_status(bed, namespace), "Ready") or {}
        return ready if ready.get("reason") == reason else None
    return wait_showing(f"{namespace}/demo-pg to say {reason}", probe, timeout,
                        lambda: claim_status(bed, namespace), "claim status now")


def says_message(bed: KubeTestBed, namespace: str, reason: str, message: str, timeout: float = 60) -> None:
    """Wait for the claim's Ready condition to have this reason and message."""
    def probe() -> bool | None:
        ready = condition(claim_status(bed, namespace), "Ready") or {}
        return (ready.get("reason"), ready.get("message")) == (reason, message) or None
    wait_showing(f"{namespace}/demo-pg to say {reason}: {message}", probe, timeout,
                 lambda: claim_status(bed, namespace), "claim status now")


def cnpg_status(bed: KubeTestBed, kind: str, name: str, patch: dict[str, Any]) -> None:
    """Write status as CloudNativePG does: a JSON merge patch of the status subresource."""
    plural = {"Cluster": "clusters", "Database": "databases"}[kind]
    resp = bed.http.patch(f"/apis/{CNPG}/namespaces/{SERVICES}/{plural}/{name}/status",
                          params={"fieldManager": CNPG_MANAGER}, content=json.dumps({"status": patch}).encode(),
                          headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code < 300, resp.text


def play_cnpg(bed: KubeTestBed, roles: list[str]) -> None:
    """What CloudNativePG reports once the Cluster runs, the roles exist with their Secrets' passwords and the
    Databases are made."""
    versions = {role: (bed.get("v1", "Secret", role, SERVICES) or {})["metadata"]["resourceVersion"] for role in roles}
    cnpg_status(bed, "Cluster", CLUSTER, {
        "phase": "Cluster in healthy state", "instances": 1, "readyInstances": 1,
        "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterIsReady",
                        "message": "Cluster is Ready", "lastTransitionTime": "2026-12-05T00:00:00Z"}],
        # a merge patch from the status read: what is no longer there is null (client.MergeFrom's diff)
        "managedRolesStatus": {
            "byStatus": {"reconciled": roles, "reserved": ["postgres", "streaming_replica"],
                         "pending-reconciliation": None},
            "cannotReconcile": None,
            "passwordStatus": {role: {"transactionID": 750 + i, "resourceVersion": versions[role]}
                               for i, role in enumerate(roles)}}})
    for role in roles:  # written by the operator once CloudNativePG reconciled its owner
        database = wait(f"Database {role}", partial(bed.get, CNPG, "Database", role, SERVICES), 60)
        cnpg_status(bed, "Database", role, {"applied": True,
                                            "observedGeneration": database["metadata"]["generation"]})


def connection(bed: KubeTestBed, namespace: str) -> dict[str, str]:
    secret = bed.get("v1", "Secret", "demo-pg-conn", namespace)
    assert secret is not None, f"no Secret {namespace}/demo-pg-conn"
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_two_apps_get_the_shared_cluster_a_role_and_database_each_and_their_secrets(
        bed: KubeTestBed, operator: Operator, provider: None) -> None:
    assert bed.get(CNPG, "Cluster", CLUSTER, SERVICES) is None  # lazy: nothing before a claim
    first, second = fresh_namespace(bed, "pg"), fresh_namespace(bed, "pg")
    roles = [f"{first}.demo-pg", f"{second}.demo-pg"]
    started = time.monotonic()
    for namespace in (first, second):
        apply(bed, cr(namespace, NEEDS))

    def both_roles() -> dict[str, Any] | None:
        cluster = bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {}
        names = [r["name"] for r in ((cluster.get("spec") or {}).get("managed") or {}).get("roles") or []]
        return cluster if names == sorted(roles) else None
    cluster = wait("the Cluster to manage both claims' roles", both_roles, 60)
    spec = cluster["spec"]
    assert spec["resources"]["requests"] == spec["resources"]["limits"] == {"cpu": "250m", "memory": "256Mi"}
    assert (spec["instances"], spec["imageName"], spec["storage"]["size"]) == (1, IMAGE, "1Gi")
    assert spec["postgresql"]["parameters"]["shared_buffers"] == "64MB"
    assert spec["postgresql"]["pg_hba"] == ["host sameuser all all scram-sha-256",
                                            "host samerole all all scram-sha-256", "host all all all reject"]
    assert spec["enableSuperuserAccess"] is False
    for role, entry in zip(sorted(roles), spec["managed"]["roles"], strict=True):
        assert (entry["login"], entry["passwordSecret"], entry["ensure"]) == (True, {"name": role}, "present")
        assert not entry.get("superuser") and not entry.get("createdb") and not entry.get("createrole")
    clusters = bed.http.get(f"/apis/{CNPG}/namespaces/{SERVICES}/clusters").json()["items"]
    assert [c["metadata"]["name"] for c in clusters] == [CLUSTER]  # one per provider, whatever the claims

    for role in roles:
        password = bed.get("v1", "Secret", role, SERVICES) or {}
        assert password["type"] == "kubernetes.io/basic-auth"
        assert base64.b64decode(password["data"]["username"]).decode() == role
        # no Database before CloudNativePG reconciled its owner (its CREATE DATABASE would fail and wait 30 s)
        assert bed.get(CNPG, "Database", role, SERVICES) is None
    # nothing runs the Cluster here until the test says so: the claims wait, and their Application says why
    for namespace in (first, second):
        # the Cluster made by the first pass wakes the claims (its watch): the next pass sees it without a phase
        says_message(bed, namespace, "InstanceNotReady",
                     f"Cluster {SERVICES}/{CLUSTER} is not ready yet (no phase yet)")
        assert claim_status(bed, namespace)["ready"] is False
    wanted = f"needs.pg waits: bound to ServiceProvider {PROVIDER}: InstanceNotReady: "
    wait(f"{first}/demo ClaimsReady to say why", lambda: wanted in str(
        (condition(status(bed, first), "ClaimsReady") or {}).get("message")) or None, 60)

    # CloudNativePG could not make the first role: the claim says so, with its words
    cnpg_status(bed, "Cluster", CLUSTER, {
        "phase": "Cluster in healthy state",
        "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterIsReady", "message": "Cluster is Ready",
                        "lastTransitionTime": "2026-12-05T00:00:00Z"}],
        "managedRolesStatus": {"byStatus": {"pending-reconciliation": roles},
                               "cannotReconcile": {roles[0]: ["could not perform CREATE on role: disk full"]}}})
    refused = says(bed, first, "BackendRefused")
    assert refused["message"] == (f"Cluster {SERVICES}/{CLUSTER} cannot reconcile role {roles[0]}: could not "
                                  "perform CREATE on role: disk full")
    assert says(bed, second, "RoleNotReady")["message"] == (
        f"role {roles[1]} is not reconciled on Cluster {SERVICES}/{CLUSTER} yet")

    play_cnpg(bed, roles)
    for role in roles:
        database = bed.get(CNPG, "Database", role, SERVICES) or {}
        assert database["spec"] == {"cluster": {"name": CLUSTER}, "name": role, "owner": role, "ensure": "present",
                                    "databaseReclaimPolicy": "retain"}
    for namespace, role in zip((first, second), roles, strict=True):
        ready = says(bed, namespace, "Provisioned")
        st = claim_status(bed, namespace)
        assert st["ready"] is True and st["provider"] == PROVIDER, st
        host = f"{CLUSTER}-rw.{SERVICES}.svc"
        assert st["connection"] == {"host": host, "port": 5432, "user": role, "db": role,
                                    "secretName": "demo-pg-conn"}
        fields = connection(bed, namespace)
        assert set(fields) == FIELDS and (fields["host"], fields["port"], fields["user"], fields["db"]) == (
            host, "5432", role, role)
        stored = base64.b64decode((bed.get("v1", "Secret", role, SERVICES) or {})["data"]["password"]).decode()
        assert fields["password"] == stored and len(stored) >= 43
        assert fields["url"] == f"postgresql://{role}:{stored}@{host}:5432/{role}"
        # the pooled URL: the same role, password and database through the Cluster's Pooler (the operator's
        # default PgBouncer image: no --backend-image cloudnative-pg.pgbouncer given)
        assert fields["pooledUrl"] == f"postgresql://{role}:{stored}@{CLUSTER}-pooler.{SERVICES}.svc:5432/{role}"
        assert ready["message"] == f"role and database {role} on {host}:5432; connection in Secret demo-pg-conn"
    took = time.monotonic() - started
    wait(f"{first}/demo ClaimsReady", lambda: (condition(status(bed, first), "ClaimsReady") or {}).get("status")
         == "True" or None, 60)
    a, b = connection(bed, first), connection(bed, second)
    assert a["password"] != b["password"]
    # one Pooler for the Cluster, owned by it, passing CloudNativePG's CRD schema
    poolers = bed.http.get(f"/apis/{CNPG}/namespaces/{SERVICES}/poolers").json()["items"]
    assert [p["metadata"]["name"] for p in poolers] == [f"{CLUSTER}-pooler"]
    [owner] = poolers[0]["metadata"]["ownerReferences"]
    cluster_uid = (bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {})["metadata"]["uid"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Cluster", CLUSTER, cluster_uid)
    assert poolers[0]["spec"]["type"] == "rw" and poolers[0]["spec"]["pgbouncer"]["poolMode"] == "transaction"
    assert poolers[0]["spec"]["template"]["spec"]["containers"][0]["image"] == default_image("cloudnative-pg.pgbouncer")

    # nothing secret in what the operator says: the claims' status, its log
    said = json.dumps([claim_status(bed, first), claim_status(bed, second)]) + operator.log()
    for password in (a["password"], b["password"]):
        assert password not in said
    print(f"two claims -> ready (CloudNativePG's status played): {took:.2f} s")


def test_the_role_password_and_database_outlive_the_claim_and_the_same_app_and_need_get_them_back(
        bed: KubeTestBed, operator: Operator, provider: None) -> None:
    namespace = fresh_namespace(bed, "pg")
    role = f"{namespace}.demo-pg"
    apply(bed, cr(namespace, NEEDS))
    wait("the claim's role in the Cluster", lambda: role in [r["name"] for r in (
        (bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {}).get("spec") or {}).get("managed", {}).get("roles", [])]
        or None, 60)
    reconciled = ((bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {}).get("status") or {}).get(
        "managedRolesStatus", {}).get("byStatus", {}).get("reconciled") or []
    play_cnpg(bed, sorted({*reconciled, role}))
    says(bed, namespace, "Provisioned")
    before = connection(bed, namespace)
    database = bed.get(CNPG, "Database", role, SERVICES) or {}
    old = bed.get(API, "ResourceClaim", "demo-pg", namespace) or {}
    # the claim goes (and its Secret with it, as the garbage collector does on a cluster: the bare API server runs
    # none); its role, password Secret and Database stay. The Application is still there, so its claim comes back.
    bed.delete(API, "ResourceClaim", "demo-pg", namespace)
    wait("the claim made anew", lambda: (bed.get(API, "ResourceClaim", "demo-pg", namespace) or {}).get(
        "metadata", {}).get("uid") not in (None, old["metadata"]["uid"]) or None, 60)
    collect_garbage(bed, "Secret", "demo-pg-conn", namespace, old["metadata"]["uid"])
    says(bed, namespace, "Provisioned")
    after = connection(bed, namespace)
    assert after == before  # the same role, database and password: CloudNativePG has nothing to change
    kept = bed.get(CNPG, "Database", role, SERVICES) or {}
    assert kept["metadata"]["uid"] == database["metadata"]["uid"]
    assert kept["spec"]["databaseReclaimPolicy"] == "retain"
    names = [r["name"] for r in (bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {})["spec"]["managed"]["roles"]]
    assert names.count(role) == 1


def managed(bed: KubeTestBed) -> dict[str, dict[str, Any]]:
    """The Cluster's spec.managed.roles by name."""
    cluster = bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {}
    return {r["name"]: r for r in ((cluster.get("spec") or {}).get("managed") or {}).get("roles") or []}


def by_status(bed: KubeTestBed, **lists: list[str] | None) -> None:
    """CloudNativePG's instance manager recomputing byStatus from PostgreSQL (the lists it no longer has: null)."""
    states = ("reconciled", "not-managed", "pending-reconciliation")
    cnpg_status(bed, "Cluster", CLUSTER, {"managedRolesStatus": {"byStatus": {
        state: lists.get(state.replace("-", "_")) for state in states}}})


def drop_says(bed: KubeTestBed, namespace: str, words: str) -> None:
    """Wait for the claim's deletion to say why it waits (a DataDropWaiting event) in these words."""
    wait(f"a DataDropWaiting event saying {words!r}", lambda: any(
        words in e.get("note", "") for e in events(bed, namespace, "DataDropWaiting")) or None, 60)


def test_removing_the_need_waits_for_a_plan_and_approving_it_drops_the_database_and_role_step_by_step(
        bed: KubeTestBed, operator: Operator, provider: None) -> None:
    mine, theirs = fresh_namespace(bed, "pg"), fresh_namespace(bed, "pg")
    role, other = f"{mine}.demo-pg", f"{theirs}.demo-pg"
    for namespace in (mine, theirs):
        apply(bed, cr(namespace, NEEDS))
    wait("both claims' roles in the Cluster", lambda: {role, other} <= set(managed(bed)) or None, 60)
    present = sorted(name for name, entry in managed(bed).items() if entry.get("ensure") == "present")
    play_cnpg(bed, present)
    for name in (role, other):
        # CloudNativePG's instance manager puts its finalizer on every Database it reconciles
        bed.http.patch(f"/apis/{CNPG}/namespaces/{SERVICES}/databases/{name}",
                       content=json.dumps({"metadata": {"finalizers": ["cnpg.io/deleteDatabase"]}}).encode(),
                       headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
    for namespace in (mine, theirs):
        says(bed, namespace, "Provisioned")
    wait_phase(bed, mine, "Ready", timeout=60)
    before = {kind: bed.get(*kind_of, other, SERVICES) for kind, kind_of in (
        ("database", (CNPG, "Database")), ("secret", ("v1", "Secret")))}
    their_entry = managed(bed)[other]

    apply(bed, cr(mine, edit(NEEDS, needs=None, env=None)))
    st = wait_phase(bed, mine, "AwaitingMigrationApproval", timeout=60)
    [plan] = plans(bed, mine)
    assert {"rule": "AR-DM001", "field": "needs.pg"}.items() <= next(
        c for c in plan["spec"]["changes"] if c["rule"] == "AR-DM001").items()
    assert st["migrationPlan"] == plan["metadata"]["name"]
    # held: nothing dropped, nothing even asked of CloudNativePG while the plan waits
    assert managed(bed)[role]["ensure"] == "present"
    assert (bed.get(CNPG, "Database", role, SERVICES) or {})["spec"]["ensure"] == "present"

    name = plan["metadata"]["name"]
    approved = time.monotonic()
    result = run_cli("migration", "approve", name, "-n", mine, "--kubeconfig", str(bed.kubeconfig))
    assert result.returncode == 0, result.stderr
    # 1. the database first (its role owns it): ensure: absent, and nothing else until CloudNativePG says it dropped it
    def absent() -> dict[str, Any] | None:
        found = bed.get(CNPG, "Database", role, SERVICES) or {}
        return found if found["spec"]["ensure"] == "absent" else None
    database = wait("the Database set absent", absent, 60)
    assert managed(bed)[role]["ensure"] == "present"
    claim = bed.get(API, "ResourceClaim", "demo-pg", mine) or {}
    assert claim["metadata"].get("deletionTimestamp"), claim  # pruned, held by its finalizer
    drop_says(bed, mine, f"CloudNativePG drops database {role}")
    cnpg_status(bed, "Database", role, {"applied": True, "observedGeneration": database["metadata"]["generation"]})
    # 2. the role: handed back (its entry out), absent once CloudNativePG lists it not-managed, then its entry out
    wait("the role's entry taken out", lambda: role not in managed(bed) or None, 60)
    assert managed(bed)[other] == their_entry
    by_status(bed, reconciled=present)  # a status computed before that write: it lists the role reconciled still
    drop_says(bed, mine, f"CloudNativePG still lists role {role} reconciled on Cluster {SERVICES}/{CLUSTER}")
    assert role not in managed(bed)  # nothing decided on it
    by_status(bed, reconciled=[n for n in present if n != role], not_managed=["app", role])
    wait("the role put back absent", lambda: managed(bed).get(role, {}).get("ensure") == "absent" or None, 60)
    put_back = managed(bed)[role]
    assert "passwordSecret" not in put_back and not put_back.get("login")  # nothing left to log in with
    drop_says(bed, mine, f"CloudNativePG has not dropped role {role} on Cluster {SERVICES}/{CLUSTER} yet (not-managed)")
    by_status(bed, reconciled=[n for n in present if n != role], pending_reconciliation=[role], not_managed=["app"])
    drop_says(bed, mine, f"CloudNativePG has not dropped role {role} on Cluster {SERVICES}/{CLUSTER} yet "
                    "(pending-reconciliation)")
    # CloudNativePG's DROP ROLE changes no status: the Cluster is touched so that its instance manager looks again
    nudged = (bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {})["metadata"].get("annotations") or {}
    assert "apprafter.io/roles-nudged" in nudged, nudged
    by_status(bed, reconciled=present, not_managed=["app"])  # dropped: an absent role not in PostgreSQL
    wait("the absent entry taken out", lambda: role not in managed(bed) or None, 60)
    by_status(bed, reconciled=[n for n in present if n != role], not_managed=["app"])
    # 3. the Database resource (CloudNativePG's finalizer: it releases it, retained: nothing dropped again)
    wait("the Database being deleted", lambda: (bed.get(CNPG, "Database", role, SERVICES) or {}).get(
        "metadata", {}).get("deletionTimestamp"), 60)
    bed.http.patch(f"/apis/{CNPG}/namespaces/{SERVICES}/databases/{role}",
                   content=json.dumps({"metadata": {"finalizers": None}}).encode(),
                   headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
    wait("the claim gone", lambda: bed.get(API, "ResourceClaim", "demo-pg", mine) is None or None, 60)
    print(f"`migration approve` run -> claim gone, its database and role dropped (CloudNativePG's status played): "
          f"{time.monotonic() - approved:.2f} s")
    assert bed.get(CNPG, "Database", role, SERVICES) is None
    assert bed.get("v1", "Secret", role, SERVICES) is None
    assert role not in managed(bed)
    # the other app's role, Database, password Secret and claim untouched
    assert managed(bed)[other] == their_entry
    after = {kind: bed.get(*kind_of, other, SERVICES) for kind, kind_of in (
        ("database", (CNPG, "Database")), ("secret", ("v1", "Secret")))}
    for kind in ("database", "secret"):
        assert (after[kind] or {})["metadata"]["uid"] == (before[kind] or {})["metadata"]["uid"], kind
    assert (after["database"] or {})["spec"]["ensure"] == "present"
    assert claim_status(bed, theirs)["ready"] is True
    [dropped] = events(bed, mine, "DataDropped")
    assert name in dropped["note"] and "needs.pg" in dropped["note"]
    wait("plan applied", lambda: plan_phase(bed, mine, name) == "applied" or None)


def roles_applied(bed: KubeTestBed, secrets: dict[str, str]) -> None:
    """CloudNativePG's instance manager after it reconciled these roles (role -> its password Secret's name) with
    their Secrets' current passwords: byStatus and passwordStatus (the Cluster Ready, as play_cnpg left it)."""
    versions = {role: (bed.get("v1", "Secret", name, SERVICES) or {})["metadata"]["resourceVersion"]
                for role, name in secrets.items()}
    cnpg_status(bed, "Cluster", CLUSTER, {"managedRolesStatus": {
        "byStatus": {"reconciled": sorted(secrets), "not-managed": None, "pending-reconciliation": None},
        "passwordStatus": {role: {"transactionID": 800, "resourceVersion": version}
                           for role, version in versions.items()}}})


def password_secret(bed: KubeTestBed, name: str, marker: str, request: str) -> dict[str, Any] | None:
    """A role's password Secret once it is marked with the request (marker: issued or retired)."""
    found = bed.get("v1", "Secret", name, SERVICES) or {}
    return found if (found.get("metadata", {}).get("annotations") or {}).get(f"apprafter.io/{marker}") == request \
        else None


def rotate(bed: KubeTestBed, namespace: str) -> str:
    """`apprafter db rotate` without waiting: the request it wrote."""
    result = run_cli("db", "rotate", "demo", "-e", "prod", "--need", "pg", "-n", namespace, "--kubeconfig",
                     str(bed.kubeconfig), "--timeout", "0")
    assert result.returncode == 0, result.stderr
    request: str = (bed.get(API, "ResourceClaim", "demo-pg", namespace) or {})["metadata"]["annotations"][
        "apprafter.io/rotate"]
    assert result.stdout == f"resourceclaim/demo-pg: rotation {request} requested (namespace {namespace})\n"
    return request


def completed(bed: KubeTestBed, namespace: str, request: str) -> dict[str, Any] | None:
    found = claim_status(bed, namespace).get("rotation") or {}
    return found if found.get("completed") == request else None


def drop_role(bed: KubeTestBed, name: str, others: list[str]) -> None:
    """CloudNativePG's word through one role's drop (lifecycle.backends.pg's drop_one): its entry out, listed
    not-managed, put back absent, dropped (listed reconciled), its entry out, listed nowhere."""
    wait(f"role {name}'s entry taken out", lambda: name not in managed(bed) or None, 60)
    by_status(bed, reconciled=others, not_managed=[name])
    wait(f"role {name} put back absent", lambda: managed(bed).get(name, {}).get("ensure") == "absent" or None, 60)
    by_status(bed, reconciled=[*others, name])  # dropped: an absent role not in PostgreSQL
    wait(f"role {name}'s absent entry taken out", lambda: name not in managed(bed) or None, 60)
    by_status(bed, reconciled=others)


def test_rotating_the_credentials_alternates_between_two_login_roles_and_retires_the_old_one_after_the_rollout(
        bed: KubeTestBed, operator: Operator, provider: None) -> None:
    """`apprafter db rotate` on a pg need (lifecycle.rotation, lifecycle.backends.pg_roles): the role the app does not
    use gets a new password (its Secret marked with the request, once); the claim stays ready on its old connection
    until CloudNativePG reports it applied and a Job made its sessions run as the claim's role; then the connection
    Secret names that role (the same database), the pods roll, the old role's password stays valid while an old pod
    runs, is replaced by one no one is given once none does, and the rotation completes once CloudNativePG applied
    that. The next rotation goes back to the claim's role; the drop takes both roles. The old credentials refused and
    the app answering throughout, in PostgreSQL itself: tests/reconciler/test_pg_node.py."""
    namespace = fresh_namespace(bed, "pg")
    role = f"{namespace}.demo-pg"
    apply(bed, cr(namespace, NEEDS))
    wait(f"role {role} in the Cluster", lambda: role in managed(bed) or None, 60)
    play_cnpg(bed, [role])
    says(bed, namespace, "Provisioned")
    wait_phase(bed, namespace, "Ready", timeout=60)
    old = connection(bed, namespace)
    claim = bed.get(API, "ResourceClaim", "demo-pg", namespace) or {}
    alt = tenant_of(claim, alternate=True)
    assert alt.name == f"{role}~b"
    template_pod(bed, namespace, "demo-old")

    # 1. the standby role (the alternate) gets a new password, marked with the request; the app's role untouched
    first = rotate(bed, namespace)
    made = wait("the alternate's password Secret for the request", partial(
        password_secret, bed, alt.object_name, "rotation", first), 60)
    new = base64.b64decode(made["data"]["password"]).decode()
    assert base64.b64decode(made["data"]["username"]).decode() == alt.name
    assert new != old["password"] and len(new) >= 43
    entry = wait("the alternate in the Cluster's managed roles", lambda: managed(bed).get(alt.name), 60)
    assert (entry["inRoles"], entry["login"], entry["connectionLimit"], entry["passwordSecret"]) == (
        [role], True, managed(bed)[role]["connectionLimit"], {"name": alt.object_name})
    owner_secret = bed.get("v1", "Secret", role, SERVICES) or {}
    assert base64.b64decode(owner_secret["data"]["password"]).decode() == old["password"]
    # not applied yet: the claim stays ready on its role, the app's Secret and pods as they were
    wait("the claim saying the rotation waits", lambda: f"the rotation of request {first} waits" in (
        condition(claim_status(bed, namespace), "Ready") or {}).get("message", "") or None, 60)
    assert connection(bed, namespace) == old and status(bed, namespace)["phase"] == "Ready"

    # 2. applied: a Job, as the alternate, makes its sessions run as the claim's role; handed out only once it did
    roles_applied(bed, {role: role, alt.name: alt.object_name})
    job = wait("the set-role Job", lambda: bed.get("batch/v1", "Job", f"{alt.object_name}-set-role", SERVICES), 60)
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") or e.get("valueFrom", {}).get("secretKeyRef", {}).get("name")
           for e in container["env"]}
    assert (env["PGUSER"], env["PGDATABASE"], env["PGPASSWORD"], env["SQL"]) == (
        alt.name, role, alt.object_name, f"ALTER ROLE SESSION_USER SET role = '{role}'")
    assert container["image"] == IMAGE and new not in json.dumps(job)
    assert connection(bed, namespace) == old
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    resp = bed.http.patch(f"/apis/batch/v1/namespaces/{SERVICES}/jobs/{job['metadata']['name']}/status",
                          params={"fieldManager": CNPG_MANAGER},
                          headers={"Content-Type": "application/merge-patch+json"},
                          content=json.dumps({"status": {
                              "startTime": now, "completionTime": now, "succeeded": 1, "ready": 0, "terminating": 0,
                              "conditions": [{"type": "SuccessCriteriaMet", "status": "True",
                                              "lastTransitionTime": now, "lastProbeTime": now},
                                             {"type": "Complete", "status": "True", "lastTransitionTime": now,
                                              "lastProbeTime": now}]}}).encode())
    assert resp.status_code < 300, resp.text

    # 3. switched: the alternate, its password, the claim's database; the pods roll
    fields = wait("the alternate in the connection Secret", lambda: f if (f := connection(
        bed, namespace))["user"] == alt.name else None, 60)
    assert fields["password"] == new and fields["db"] == role
    assert fields["url"] == f"postgresql://{alt.name}:{new}@{CLUSTER}-rw.{SERVICES}.svc:5432/{role}"
    wait("the pod template stamped", lambda: ((bed.get("apps/v1", "Deployment", "demo", namespace) or {})["spec"][
        "template"]["metadata"].get("annotations") or {}).get("rotation.apprafter.io/pg") == first or None, 30)
    [rotating] = wait("the CredentialsRotating event", lambda: events(bed, namespace, "CredentialsRotating") or None,
                      30)
    assert "alternates between two login roles" in rotating["note"]
    # 4. an old pod still runs: the old role's password stays valid, the rotation not completed
    assert password_secret(bed, role, "retired", first) is None and completed(bed, namespace, first) is None
    assert plans(bed, namespace) == []
    bed.delete("v1", "Pod", "demo-old", namespace)
    retiring = wait("the old role's password replaced", partial(password_secret, bed, role, "retired", first), 60)
    assert base64.b64decode(retiring["data"]["password"]).decode() not in (old["password"], new)
    assert completed(bed, namespace, first) is None  # not before CloudNativePG applied it
    roles_applied(bed, {role: role, alt.name: alt.object_name})
    done = wait("the rotation completed", partial(completed, bed, namespace, first), 60)
    assert done["issued"] == first and done["completedAt"]
    wait("the CredentialsRotated event", lambda: events(bed, namespace, "CredentialsRotated") or None, 30)

    # 5. the next rotation goes back to the claim's role, with a new password; then the alternate is retired
    template_pod(bed, namespace, "demo-mid")
    second = rotate(bed, namespace)
    back = wait("the claim's role's password Secret for the request", partial(
        password_secret, bed, role, "rotation", second), 60)
    again = base64.b64decode(back["data"]["password"]).decode()
    assert "apprafter.io/retired" not in back["metadata"]["annotations"] and again not in (old["password"], new)
    assert connection(bed, namespace)["user"] == alt.name  # until applied
    roles_applied(bed, {role: role, alt.name: alt.object_name})
    fields = wait("the claim's role back in the connection Secret", lambda: f if (f := connection(
        bed, namespace))["user"] == role else None, 60)
    assert (fields["password"], fields["db"]) == (again, role)
    assert password_secret(bed, alt.object_name, "retired", second) is None
    bed.delete("v1", "Pod", "demo-mid", namespace)
    wait("the alternate's password replaced", partial(password_secret, bed, alt.object_name, "retired", second), 60)
    roles_applied(bed, {role: role, alt.name: alt.object_name})
    wait("the second rotation completed", partial(completed, bed, namespace, second), 60)
    said = json.dumps(claim_status(bed, namespace)) + operator.log()
    assert not any(p in said for p in (old["password"], new, again))

    # 6. the need removed and the plan approved: the alternate dropped first, then the database and the claim's role
    apply(bed, cr(namespace, edit(NEEDS, needs=None, env=None)))
    wait_phase(bed, namespace, "AwaitingMigrationApproval", timeout=60)
    [plan] = plans(bed, namespace)
    result = run_cli("migration", "approve", plan["metadata"]["name"], "-n", namespace, "--kubeconfig",
                     str(bed.kubeconfig))
    assert result.returncode == 0, result.stderr
    others = [n for n, e in managed(bed).items() if e.get("ensure") == "present" and n not in (role, alt.name)]
    drop_role(bed, alt.name, [*others, role])
    assert managed(bed)[role]["ensure"] == "present"  # the claim's role stayed while its alternate went
    database = wait("the Database set absent", lambda: d if (d := bed.get(CNPG, "Database", role, SERVICES) or {})[
        "spec"]["ensure"] == "absent" else None, 60)
    cnpg_status(bed, "Database", role, {"applied": True, "observedGeneration": database["metadata"]["generation"]})
    drop_role(bed, role, others)
    wait("the claim gone", lambda: bed.get(API, "ResourceClaim", "demo-pg", namespace) is None or None, 60)
    assert bed.get("v1", "Secret", role, SERVICES) is None and bed.get("v1", "Secret", alt.object_name,
                                                                         SERVICES) is None
    assert role not in managed(bed) and alt.name not in managed(bed)
