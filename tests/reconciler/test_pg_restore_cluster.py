"""`apprafter db restore` through the API server with CloudNativePG's CRDs (lifecycle/restore.py, reconciler/restore.py,
reconciler/claims.py): a time outside what the claim's Cluster can restore is refused with the window; a request
opens a data-migration MigrationPlan and nothing else happens before a person approves it; then the operator makes
the claim's next generation (role `<ns>.demo-pg~2`, its password Secret and Database) on the shared Cluster, applies
a NEW Cluster recovered from the object store up to the time and, once it is Ready, a Job that copies the claim's
database alone from it; once the Job completed the connection Secret (the same name) points at the new generation,
the app's pod template is stamped (its pods roll), the recovered Cluster is deleted, the plan is applied, and the old
generation (role, password Secret, Database) is kept and listed on the claim. Then the old generation's own approved
removal (`apprafter db drop-generation`, lifecycle/generation_drop.py): the live generation and one not kept refused
at the CLI, a data-migration plan and nothing else before its approval, then CloudNativePG's drop steps for that
generation alone (its Database, role, password Secret gone, off status.restore.kept), the live one untouched.

No CloudNativePG manager and no Job controller run on this tier: the test writes the status they write (as
tests/reconciler/test_pg_cluster.py does). The real thing on a node: tests/reconciler/test_pg_backup_node.py."""

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
import yaml

from tests.reconciler.helpers import (
    API,
    add_provider,
    apply,
    collect_garbage,
    cr,
    edit,
    events,
    fresh_namespace,
    plan_phase,
    plans,
    wait,
    wait_phase,
    wait_showing,
)
from tests.reconciler.operator_proc import FAST, Fixture, Operator, operator_fixture
from tests.renderer.helpers import run_cli
from tests.testbed import cnpg as cnpg_release
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
SERVICES = f"pg-rst-{RUN}"
PROVIDER, CLUSTER = f"pg-rst-{RUN}", f"postgres-{RUN}"
IMAGE = "localhost/postgresql:15"
CNPG = "postgresql.cnpg.io/v1"
MANAGER = "manager"  # the field manager CloudNativePG's and the Job controller's status writes carry
FIRST = datetime.datetime.now(datetime.UTC).replace(microsecond=0) - datetime.timedelta(hours=2)


@pytest.fixture(scope="module")
def pg_platform(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The operator's platform file; and the ScheduledBackup CRD, which the bed's pinned CRDs leave out (a provider
    with backups has one), from CloudNativePG's release manifest."""
    path = Path(tmp_path_factory.mktemp("crds")) / "scheduledbackups.yaml"
    path.write_text(yaml.safe_dump_all(d for d in yaml.safe_load_all(cnpg_release.manifest().read_text()) if d and d[
        "kind"] == "CustomResourceDefinition" and d["spec"]["names"]["kind"] == "ScheduledBackup"))
    known = list(bed.crd_names)
    bed.crd_names = known + bed.install_crds([path])
    bed.ensure_namespace(SERVICES)
    path = Path(tmp_path_factory.mktemp("platform")) / "platform.yaml"
    path.write_text(f"providerNamespaces: {{pg: {SERVICES}}}\n")
    return str(path)


@pytest.fixture(scope="module")
def provider(bed: KubeTestBed, pg_platform: str) -> Any:
    """A cloudnative-pg provider whose config names a backup destination."""
    add_provider(bed, PROVIDER, "pg", "cloudnative-pg", {
        "cluster": CLUSTER, "namespace": SERVICES, "instances": 1, "storage": {"size": "1Gi"},
        "resources": {"cpu": "250m", "memory": "256Mi"}, "sharedBuffersPercent": 25,
        "backup": {"destination": {"bucket": "pg-backups", "credentials": {"secretName": "creds"}}}},
        labels={"bed": RUN})
    yield
    bed.delete(API, "ServiceProvider", PROVIDER)


operator = operator_fixture("--no-leader-elect", *FAST, "--platform", Fixture("pg_platform"),
                            "--backend-image", f"cloudnative-pg={IMAGE}")

NEEDS = edit(needs={"pg": {"selector": {"bed": RUN}}}, env={"DATABASE_URL": {"claim": "pg/url"}},
             expose={"port": 8080})


def write_status(bed: KubeTestBed, path: str, patch: dict[str, Any]) -> None:
    """Status as CloudNativePG's and Kubernetes' controllers write it: a JSON merge patch of the status subresource."""
    resp = bed.http.patch(f"{path}/status", params={"fieldManager": MANAGER},
                          content=json.dumps({"status": patch}).encode(),
                          headers={"Content-Type": "application/merge-patch+json"})
    assert resp.status_code < 300, resp.text


def cnpg(kind: str, name: str) -> str:
    return f"/apis/{CNPG}/namespaces/{SERVICES}/{kind}/{name}"


def play_cluster(bed: KubeTestBed, name: str, roles: list[str]) -> None:
    """The Cluster running and archiving (restorable from FIRST), the roles reconciled with their Secrets' passwords,
    their Databases applied."""
    versions = {role: (bed.get("v1", "Secret", obj, SERVICES) or {})["metadata"]["resourceVersion"]
                for role, obj in roles_objects(bed, name).items() if role in roles}
    ready = {"type": "Ready", "status": "True", "reason": "ClusterIsReady", "message": "Cluster is Ready",
             "lastTransitionTime": "2026-12-05T00:00:00Z"}
    archiving = {"type": "ContinuousArchiving", "status": "True", "reason": "ContinuousArchivingSuccess",
                 "message": "", "lastTransitionTime": "2026-12-05T00:00:00Z"}
    write_status(bed, cnpg("clusters", name), {
        "phase": "Cluster in healthy state", "conditions": [ready, archiving],
        "firstRecoverabilityPoint": FIRST.isoformat().replace("+00:00", "Z"),
        "managedRolesStatus": {"byStatus": {"reconciled": roles, "pending-reconciliation": None},
                               "cannotReconcile": None,
                               "passwordStatus": {role: {"transactionID": 700 + i, "resourceVersion": versions[role]}
                                                  for i, role in enumerate(roles)}}})
    for obj in roles_objects(bed, name).values():  # written by the operator once CloudNativePG reconciled its owner
        database = wait_showing(f"Database {obj}", partial(bed.get, CNPG, "Database", obj, SERVICES), 60,
                                lambda: bed.http.get(f"/apis/{API}/resourceclaims").json()["items"], "claims")
        write_status(bed, cnpg("databases", obj), {"applied": True,
                                                   "observedGeneration": database["metadata"]["generation"]})


def roles_objects(bed: KubeTestBed, cluster: str) -> dict[str, str]:
    """The Cluster's managed roles and the name of each one's password Secret (and Database)."""
    live = bed.get(CNPG, "Cluster", cluster, SERVICES) or {}
    return {r["name"]: r["passwordSecret"]["name"] for r in live["spec"]["managed"]["roles"]}


def claim(bed: KubeTestBed, namespace: str) -> dict[str, Any]:
    return bed.get(API, "ResourceClaim", "demo-pg", namespace) or {}


def connection(bed: KubeTestBed, namespace: str) -> dict[str, str]:
    secret = bed.get("v1", "Secret", "demo-pg-conn", namespace) or {}
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def restore_cli(bed: KubeTestBed, namespace: str, *args: str) -> Any:
    return run_cli("db", "restore", "demo", "-e", "prod", "-n", namespace, "--kubeconfig", str(bed.kubeconfig), *args)


def drop_cli(bed: KubeTestBed, namespace: str, *args: str) -> Any:
    return run_cli("db", "drop-generation", "demo", "-e", "prod", "-n", namespace, "--kubeconfig", str(bed.kubeconfig),
                   *args)


def cnpg_clusters(bed: KubeTestBed) -> list[str]:
    return sorted(c["metadata"]["name"] for c in bed.http.get(f"/apis/{CNPG}/namespaces/{SERVICES}/clusters").json()[
        "items"])


def jobs(bed: KubeTestBed) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = bed.http.get(f"/apis/batch/v1/namespaces/{SERVICES}/jobs").json()["items"]
    return items


def test_a_restore_waits_for_its_plans_approval_then_copies_into_a_new_generation_and_switches_the_app_to_it(
        bed: KubeTestBed, operator: Operator, provider: None) -> None:
    namespace = fresh_namespace(bed, "pgr")
    old = f"{namespace}.demo-pg"
    apply(bed, cr(namespace, NEEDS))
    wait(f"role {old} on the Cluster", lambda: old in (((bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {}).get(
        "spec") or {}).get("managed") or {}).get("roles", [{}])[0].get("name", "") or None, 60)
    play_cluster(bed, CLUSTER, [old])
    wait("the claim ready", lambda: claim(bed, namespace).get("status", {}).get("ready") or None, 60)
    wait_phase(bed, namespace, "Ready", timeout=60)
    before = connection(bed, namespace)
    assert before["user"] == old

    # what it refuses, one line each: a time before the first recoverable point (the window said), not a time, no
    # restore for the need
    early = (FIRST - datetime.timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    refused = restore_cli(bed, namespace, "--to", early)
    assert refused.returncode == 1 and refused.stdout == "", refused
    # the window: from the first recoverable point to the latest (now: WAL is archived continuously)
    assert (f"cannot restore Cluster {SERVICES}/{CLUSTER} to {early}: {early} is outside what can be restored: from "
            f"{FIRST.isoformat().replace('+00:00', 'Z')} to 20") in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    for args, said in ((("--to", "yesterday"), "--to 'yesterday': not a time"),
                       (("--to", "now-1h", "--need", "redis"), "--need redis: no point-in-time restore for it")):
        refused = restore_cli(bed, namespace, *args)
        assert refused.returncode == 1 and said in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert "apprafter.io/restore" not in (claim(bed, namespace)["metadata"].get("annotations") or {})

    # the request: a plan, and nothing else before its approval; a later request supersedes the earlier one's plan
    first = restore_cli(bed, namespace, "--to", "now-40m")
    assert first.returncode == 0, first.stderr
    [earlier] = [p["metadata"]["name"] for p in plans(bed, namespace)
                 if p["metadata"]["labels"].get("apprafter.io/scope") == "restore"]
    assert plan_phase(bed, namespace, earlier) == "pending-approval"
    started = time.monotonic()
    asked = restore_cli(bed, namespace, "--to", "now-30m")
    assert asked.returncode == 0, asked.stderr
    [plan] = [p for p in plans(bed, namespace) if p["metadata"]["labels"].get("apprafter.io/scope") == "restore"
              and p["metadata"]["name"] != earlier]
    name = plan["metadata"]["name"]
    gone = bed.get(API, "MigrationPlan", earlier, namespace) or {}
    assert (gone["status"]["phase"], gone["status"]["supersededBy"]) == ("superseded", name)
    request, _, target = claim(bed, namespace)["metadata"]["annotations"]["apprafter.io/restore"].partition("@")
    assert asked.stdout.splitlines() == [
        f"resourceclaim/demo-pg: restore {request} to {target} requested (namespace {namespace})",
        f"resourceclaim/demo-pg: MigrationPlan {name} awaits approval; nothing happens before it:",
        f"  apprafter migration approve {name} -n {namespace}"]
    assert plan_phase(bed, namespace, name) == "pending-approval"
    assert plan["spec"]["risks"]["classification"] == "data-migration"
    assert plan["spec"]["changes"][0]["to"] == f"generation 2: database {old}~2, as database {old} was at {target}"
    listed = run_cli("migration", "list", "-n", namespace, "--kubeconfig", str(bed.kubeconfig))
    assert name in listed.stdout and "data-migration" in listed.stdout
    wait("the RestoreRequested event", lambda: events(bed, namespace, "RestoreRequested") or None, 30)
    new = f"{old}~2"
    assert cnpg_clusters(bed) == [CLUSTER] and jobs(bed) == [] and new not in roles_objects(bed, CLUSTER)
    assert claim(bed, namespace)["status"]["restore"]["phase"] == "AwaitingApproval"  # what the command waited for
    assert connection(bed, namespace) == before

    # approved (a person): the new generation on the shared Cluster and the recovered Cluster
    approved = run_cli("migration", "approve", name, "-n", namespace, "--kubeconfig", str(bed.kubeconfig))
    assert approved.returncode == 0, approved.stderr
    wait(f"role {new} on the shared Cluster", lambda: new in roles_objects(bed, CLUSTER) or None, 60)
    new_object = roles_objects(bed, CLUSTER)[new]
    assert new_object != old and bed.get("v1", "Secret", new_object, SERVICES) is not None
    [recovered] = wait("the recovered Cluster", lambda: [c for c in cnpg_clusters(bed) if c != CLUSTER] or None, 60)
    spec = (bed.get(CNPG, "Cluster", recovered, SERVICES) or {})["spec"]
    stamp = datetime.datetime.fromisoformat(target.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S.%f+00")
    assert spec["bootstrap"]["recovery"] == {"source": "origin", "recoveryTarget": {"targetTime": stamp}}
    assert spec["externalClusters"][0]["barmanObjectStore"]["serverName"] == CLUSTER
    wait("the Restoring event", lambda: events(bed, namespace, "Restoring") or None, 30)
    assert jobs(bed) == []  # nothing is copied before the recovered Cluster is Ready
    play_cluster(bed, CLUSTER, [old, new])
    write_status(bed, cnpg("clusters", recovered), {"phase": "Cluster in healthy state", "conditions": [
        {"type": "Ready", "status": "True", "reason": "ClusterIsReady", "message": "Cluster is Ready",
         "lastTransitionTime": "2026-12-05T00:00:00Z"}]})

    # the copy: the claim's database alone, from the recovered Cluster as its own role, into the new one
    [job] = wait("the copy Job", lambda: jobs(bed) or None, 60)
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") or e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"]}
    assert env["FROM"].startswith(f"host={recovered}-rw.{SERVICES}.svc port=5432 user={old} dbname={old} ")
    assert env["TO"].startswith(f"host={CLUSTER}-rw.{SERVICES}.svc port=5432 user={new} dbname={new} ")
    assert (env["FROM_PASSWORD"], env["TO_PASSWORD"]) == (old, new_object)
    assert "pg_dump" in container["command"][-1] and container["image"] == IMAGE
    wait("status.restore Copying", lambda: claim(bed, namespace)["status"]["restore"]["phase"] == "Copying" or None,
         30)
    assert connection(bed, namespace) == before  # not switched while it copies
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    write_status(bed, f"/apis/batch/v1/namespaces/{SERVICES}/jobs/{job['metadata']['name']}", {
        "startTime": now, "completionTime": now, "succeeded": 1, "ready": 0, "terminating": 0, "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now, "lastProbeTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now, "lastProbeTime": now}]})

    # switched: the same Secret name, the new generation's role, password and database; the pods roll
    fields = wait("the connection Secret on the new generation", lambda: f if (f := connection(
        bed, namespace)).get("user") == new else None, 60)
    took = time.monotonic() - started
    password = base64.b64decode((bed.get("v1", "Secret", new_object, SERVICES) or {})["data"]["password"]).decode()
    assert fields["db"] == new and fields["password"] == password != before["password"]
    assert fields["url"] == f"postgresql://{new}:{password}@{CLUSTER}-rw.{SERVICES}.svc:5432/{new}"
    said = wait("status.restore Restored", lambda: r if (r := claim(bed, namespace)["status"].get("restore") or {}).get(
        "phase") == "Restored" else None, 60)
    assert (said["generation"], said["completed"], said["kept"], said["target"]) == (2, request, [old], target)
    assert claim(bed, namespace)["status"]["connection"]["user"] == new
    wait("the pod template stamped", lambda: ((bed.get("apps/v1", "Deployment", "demo", namespace) or {})["spec"][
        "template"]["metadata"].get("annotations") or {}).get("restore.apprafter.io/pg") == "2" or None, 30)
    wait("the recovered Cluster deleted", lambda: cnpg_clusters(bed) == [CLUSTER] or None, 60)
    assert plan_phase(bed, namespace, name) == "applied"
    [restored] = wait("the Restored event", lambda: events(bed, namespace, "Restored") or None, 30)
    assert old in restored["note"] and new in restored["note"]
    # the old generation kept: its role, password Secret and Database
    assert old in roles_objects(bed, CLUSTER) and bed.get("v1", "Secret", old, SERVICES) is not None
    assert (bed.get(CNPG, "Database", old, SERVICES) or {})["spec"]["ensure"] == "present"
    # nothing secret said
    text = json.dumps(claim(bed, namespace)["status"]) + json.dumps(plans(bed, namespace)) + operator.log()
    assert password not in text and before["password"] not in text

    # the old generation's own approved removal (lifecycle.generation_drop): the live one and one not kept refused at
    # the CLI, one line each, nothing written; a request opens a data-migration plan and nothing else before approval
    for number, said in ((2, f"--generation 2: generation 2 is the one the app uses (database {new})"),
                         (3, "--generation 3: generation 3 is not kept (kept: 1;")):
        refused = drop_cli(bed, namespace, "--generation", str(number))
        assert refused.returncode == 1 and refused.stdout == "" and said in refused.stderr, refused
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "apprafter.io/drop-generation" not in claim(bed, namespace)["metadata"].get("annotations", {})
    asked = drop_cli(bed, namespace, "--generation", "1")
    assert asked.returncode == 0, asked.stderr
    [dropping] = [p for p in plans(bed, namespace) if p["metadata"]["labels"].get("apprafter.io/scope") ==
                  "drop-generation"]
    drop_plan = dropping["metadata"]["name"]
    assert f"  apprafter migration approve {drop_plan} -n {namespace}" in asked.stdout.splitlines(), asked.stdout
    assert dropping["spec"]["risks"]["classification"] == "data-migration"
    assert dropping["spec"]["changes"][0]["from"] == f"generation 1: database {old} (kept)"
    wait("the GenerationDropRequested event", lambda: events(bed, namespace, "GenerationDropRequested") or None, 30)
    assert (bed.get(CNPG, "Database", old, SERVICES) or {})["spec"]["ensure"] == "present"  # nothing before approval
    assert old in roles_objects(bed, CLUSTER) and claim(bed, namespace)["status"]["restore"]["kept"] == [old]
    approved = run_cli("migration", "approve", drop_plan, "-n", namespace, "--kubeconfig", str(bed.kubeconfig))
    assert approved.returncode == 0, approved.stderr
    # CloudNativePG's word played at each step: DROP DATABASE applied, the role listed not-managed once out of the
    # spec, then dropped (reconciled as absent), then in no list
    dropped_db = wait(f"Database {old} set to ensure: absent", lambda: d if (d := bed.get(
        CNPG, "Database", old, SERVICES) or {}).get("spec", {}).get("ensure") == "absent" else None, 60)
    write_status(bed, cnpg("databases", old), {"applied": True,
                                               "observedGeneration": dropped_db["metadata"]["generation"]})
    wait(f"role {old} out of the Cluster's spec", lambda: old not in roles_objects(bed, CLUSTER) or None, 60)
    assert new in roles_objects(bed, CLUSTER)
    write_status(bed, cnpg("clusters", CLUSTER), {"managedRolesStatus": {"byStatus": {
        "reconciled": [new], "not-managed": [old], "pending-reconciliation": None}}})
    wait(f"role {old} ensure: absent", lambda: [r for r in (bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {})[
        "spec"]["managed"]["roles"] if r["name"] == old and r["ensure"] == "absent"] or None, 60)
    write_status(bed, cnpg("clusters", CLUSTER), {"managedRolesStatus": {"byStatus": {
        "reconciled": [new, old], "not-managed": None}}})
    wait(f"role {old} taken out again", lambda: old not in roles_objects(bed, CLUSTER) or None, 60)
    write_status(bed, cnpg("clusters", CLUSTER), {"managedRolesStatus": {"byStatus": {"reconciled": [new]}}})
    dropped = wait("status.restore.drop Dropped", lambda: r if ((r := claim(bed, namespace)["status"]["restore"])
                                                                .get("drop") or {}).get("phase") == "Dropped" else
                   None, 60)
    assert dropped["kept"] == [] and dropped["generation"] == 2, dropped
    assert bed.get(CNPG, "Database", old, SERVICES) is None and bed.get("v1", "Secret", old, SERVICES) is None
    assert plan_phase(bed, namespace, drop_plan) == "applied"
    wait("the GenerationDropped event", lambda: events(bed, namespace, "GenerationDropped") or None, 30)
    # the live generation untouched: its role, Database, password Secret, the app's connection
    assert next(r for r in (bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {})["spec"]["managed"]["roles"]
            if r["name"] == new)["ensure"] == "present"
    assert (bed.get(CNPG, "Database", new_object, SERVICES) or {})["spec"]["ensure"] == "present"
    assert bed.get("v1", "Secret", new_object, SERVICES) is not None and connection(bed, namespace) == fields
    assert claim(bed, namespace)["status"]["ready"] is True

    # the claim deleted and made again (as when its app is removed and added): it comes back to the restored
    # generation, which its kept-data record names, not to generation 1
    gone_claim = claim(bed, namespace)
    bed.delete(API, "ResourceClaim", "demo-pg", namespace)
    wait("the claim made anew", lambda: claim(bed, namespace).get("metadata", {}).get("uid") not in (
        None, gone_claim["metadata"]["uid"]) or None, 60)
    collect_garbage(bed, "Secret", "demo-pg-conn", namespace, gone_claim["metadata"]["uid"])
    again = wait("the claim made again on generation 2", lambda: c if (c := claim(bed, namespace)).get(
        "status", {}).get("connection", {}).get("user") == new else None, 60)
    assert again["status"]["restore"]["generation"] == 2, again["status"]
    wait("its connection Secret on generation 2", lambda: connection(bed, namespace).get("user") == new or None, 60)
    assert connection(bed, namespace)["password"] == password
    print(f"restore (CloudNativePG's and the Job's status played): request -> switched {took:.2f} s")
