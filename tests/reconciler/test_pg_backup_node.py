"""Backups and point-in-time restore of `needs: pg` on the node tier (issue 42 item 1), for real: a cloudnative-pg
provider whose config names a backup destination, a versitygw outside the node's cluster (a process of this host
on the node's address, tests/testbed/s3.py start_s3_for_node) with a bucket and a `user`-role account of its own
(made with the s3 backend's client), the credentials in a Secret beside the Cluster. The operator writes the Cluster
with its barmanObjectStore and, once it is Ready and archives, the ScheduledBackup; CloudNativePG's instance manager
runs Debian's barman-cloud in our PostgreSQL image: WAL is archived continuously (the Cluster's ContinuousArchiving
True) and the immediate base backup completes (a Backup `completed`, its files in the bucket). Then the app (the user
guide's shop, tests/testbed/shopapp/: POST, GET and DELETE /items over its DATABASE_URL) is asked through its Service
to store items, a time is noted in PostgreSQL, the items are deleted through the app and one more stored after it,
the WAL switched (as the superuser); then `apprafter db restore --to` that time (lifecycle.restore): a
data-migration MigrationPlan and nothing else until `apprafter migration approve`; then a NEW Cluster recovered from
the object store up to that time, a Job that copies the claim's database alone out of it into its generation 2, the
claim switched, the app's pods rolled onto it: the app's own GET answers the deleted items (and not the later one),
the old generation keeps only the later one, and the recovered Cluster is gone. `apprafter db backups` then says what
can be restored (the Cluster's first recoverable point to now, the noted time between them) and lists generation 1
as kept; `apprafter db drop-generation --generation 1` and its plan's approval drop it (lifecycle.generation_drop):
its database and role gone from the superuser's catalog, the app still answering from generation 2. Figures printed:
the backup's time, the restore's, the drop's, the bucket's bytes against the database's size
(docs/measurements.md)."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.backends import s3 as s3_client
from renderer.argocd_app import Source, argocd_application
from tests.reconciler.helpers import API, add_provider, apply, cr, service_provider
from tests.reconciler.node_pods import ready
from tests.reconciler.operator_proc import FAST, Fixture, Operator, operator_fixture
from tests.reconciler.test_pg_node import cloudnative_pg, pg_image, pg_image_flag, platform_file  # noqa: F401 (fixtures)
from tests.renderer.helpers import run_cli
from tests.testbed import cnpg
from tests.testbed.cnpg import CloudNativePG
from tests.testbed.node import NodeTestBed, RequestFailed
from tests.testbed.procs import wait_for
from tests.testbed.s3 import S3Server, start_s3_for_node
from tests.testbed.testapp import build_shop_app

pytestmark = [pytest.mark.node, pytest.mark.testbed]

RUN = uuid.uuid4().hex[:8]
SERVICES = f"pg-bak-{RUN}"
PROVIDER, CLUSTER = f"pg-bak-{RUN}", f"pgbak-{RUN}"
BUCKET, PREFIX, CREDENTIALS = f"pg-backups-{RUN}", "bed", "pg-backup-credentials"
SECRET = "demo-pg-conn"
ARGOCD = f"argocd-{RUN}"  # where the app is registered for `apprafter db backups` (no Argo CD runs)
ITEMS = ("cart 1", "cart 2", "cart 3")  # stored through the app before the noted time, deleted after it
LATER = "after the restore point"  # stored through the app after the delete: not in the restored database


@pytest.fixture(scope="module")
def pg_platform(node: NodeTestBed, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The operator's platform file: this module's pg services namespace."""
    return platform_file(node, tmp_path_factory, SERVICES)


operator = operator_fixture("--no-leader-elect", "--no-platform-stack", *FAST, "--platform", Fixture("pg_platform"),
                            "--backend-image", Fixture("pg_image_flag"), bed="node", crds=True, inside=True,
                            name="pg-backup-node", requires=("cloudnative_pg",))


class Store:
    """The object store: the server, and the `user` account whose bucket the backups go to."""

    def __init__(self, server: S3Server, access: str, secret: str) -> None:
        self.server, self.access, self.secret = server, access, secret

    def files(self) -> dict[str, int]:
        """The bucket's objects (their paths in it) and their sizes, read from versitygw's posix directory."""
        root = self.server.data / BUCKET
        return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def store(node: NodeTestBed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """versitygw outside the cluster; a bucket owned by an account of role `user` (it cannot make or reach another),
    made with the s3 backend's own client, as an administrator provisions a backup destination."""
    root = s3_client.Credentials(f"root{RUN}", secrets.token_urlsafe(24))
    server = start_s3_for_node(Path(tmp_path_factory.mktemp("backups")), node, root.access, root.secret)
    access, secret = f"pgbackup{RUN}", secrets.token_urlsafe(32)
    try:
        asyncio.run(s3_client.ensure_user(server.endpoint, root, access, secret))
        asyncio.run(s3_client.ensure_bucket(server.endpoint, root, BUCKET, access))
        yield Store(server, access, secret)
    finally:
        server.stop()


def backup_config(store: Store) -> dict[str, Any]:
    return {"destination": {"endpointURL": store.server.pods_endpoint, "bucket": BUCKET, "path": PREFIX,
                            "credentials": {"secretName": CREDENTIALS}},
            "retention": "7d", "schedule": "0 0 3 * * *"}


@pytest.fixture(scope="module")
def provider(node: NodeTestBed, operator: Operator, cloudnative_pg: CloudNativePG,  # noqa: F811
             store: Store) -> Iterator[dict[str, Any]]:
    """An administrator's cloudnative-pg provider with backups, and the credentials Secret beside its Cluster."""
    node.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": CREDENTIALS, "namespace": SERVICES},
                "stringData": {"ACCESS_KEY_ID": store.access, "ACCESS_SECRET_KEY": store.secret}},
               field_manager="admin")
    config = {"cluster": CLUSTER, "namespace": SERVICES, "instances": 1,
              "storage": {"size": "1Gi", "storageClassName": cloudnative_pg.storage_class},
              "resources": {"cpu": "250m", "memory": "256Mi"}, "sharedBuffersPercent": 25,
              "backup": backup_config(store),
              "pooler": {"enabled": False}}  # test_pg_node.py proves the pooler: no pod of it here on the serial node
    add_provider(node, PROVIDER, "pg", "cloudnative-pg", config, labels={"bed": RUN})
    yield service_provider(PROVIDER, "pg", "cloudnative-pg", config, labels={"bed": RUN})
    node.delete(API, "ServiceProvider", PROVIDER)
    node.delete("v1", "Namespace", SERVICES)  # the Clusters go with it (not waited for: nothing uses them)


def archiving(obj: dict[str, Any]) -> Any:
    """A Cluster whose WAL archiving works (CloudNativePG's ContinuousArchiving condition True)."""
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "ContinuousArchiving"]
    return obj if found and found[0].get("status") == "True" else None


def completed_backup(node: NodeTestBed) -> dict[str, Any]:
    """The Cluster's first Backup once CloudNativePG says it completed (a failed one fails the test at once)."""
    def check(backups: list[dict[str, Any]]) -> Any:
        phases = [(b.get("status") or {}).get("phase") for b in backups]
        assert "failed" not in phases, [b.get("status") for b in backups]
        return next((b for b in backups if (b.get("status") or {}).get("phase") == "completed"), None)
    found: dict[str, Any] = node.wait_list(cnpg.API, "Backup", SERVICES, check, timeout=600,
                                           what="a completed Backup")
    return found


@pytest.fixture(scope="module")
def shop_app(node: NodeTestBed) -> str:
    """The user guide's shop (tests/testbed/shopapp/) in the node's containerd."""
    return node.import_image(build_shop_app())


def items(node: NodeTestBed, url: str, method: str = "GET", body: bytes | None = None) -> Any:
    """The app's answer to one request through its Service (from inside the namespace, as a client pod would)."""
    answer = node.request(method, f"{url}items", body=body, timeout=10)
    assert answer.status_code in (200, 201), (answer.status_code, answer.text)
    return answer.json()


def answered(node: NodeTestBed, url: str) -> list[str] | None:
    """The items the app's GET answers with, None while it does not answer (kube-proxy still on a gone pod)."""
    try:
        answer = node.request("GET", f"{url}items", timeout=5)
    except RequestFailed:
        return None
    return list(answer.json()["pg"]) if answer.status_code == 200 else None


def superuser(node: NodeTestBed, cluster: str, sql: str, database: str = "postgres") -> str:
    """One statement as the instance's superuser over its local socket, on the Cluster's primary."""
    primary = (node.get(cnpg.API, "Cluster", cluster, SERVICES) or {})["status"]["currentPrimary"]
    return node.kubectl("exec", "-n", SERVICES, primary, "-c", "postgres", "--", "psql", "-X", "-d", database,
                        "-Atc", sql).stdout.strip()


def listed(node: NodeTestBed, api_version: str, kind: str) -> list[dict[str, Any]]:
    """The objects of a kind in the pg services namespace."""
    resp = node.http.get(node.resource_for(api_version, kind).path(None, SERVICES))
    resp.raise_for_status()
    items: list[dict[str, Any]] = resp.json()["items"]
    return items


def seconds(start: str, stop: str) -> float:
    return (datetime.datetime.fromisoformat(stop) - datetime.datetime.fromisoformat(start)).total_seconds()


def test_wal_is_archived_a_base_backup_completes_and_the_apps_deleted_items_come_back_from_the_noted_time(
        node: NodeTestBed, shop_app: str, cloudnative_pg: CloudNativePG, operator: Operator,  # noqa: F811
        store: Store, provider: dict[str, Any]) -> None:
    namespace = f"pg-bak-app-{RUN}"
    try:
        node.ensure_namespace(namespace)
        apply(node, cr(namespace, {"image": shop_app, "replicas": 1, "expose": {"port": 3000},
                                   "health": {"readiness": {"path": "/healthz", "periodSeconds": 1}},
                                   "needs": {"pg": {"selector": {"bed": RUN}}},
                                   "env": {"DATABASE_URL": {"claim": "pg/url"}}}))
        node.wait(API, "Application", "demo", namespace, ready, timeout=600, what="the Application Ready")
        url = f"http://{(node.get('v1', 'Service', 'demo', namespace) or {})['spec']['clusterIP']}:3000/"
        live = node.get(cnpg.API, "Cluster", CLUSTER, SERVICES) or {}
        assert live["spec"]["backup"]["barmanObjectStore"]["destinationPath"] == f"s3://{BUCKET}/{PREFIX}/{SERVICES}"
        # the operator applied the ScheduledBackup once the Cluster was Ready and archiving; its immediate Backup
        scheduled = node.wait(cnpg.API, "ScheduledBackup", CLUSTER, SERVICES, lambda o: o, timeout=300,
                              what="the ScheduledBackup")
        assert scheduled["spec"]["immediate"] is True and scheduled["metadata"]["ownerReferences"][0]["uid"] == \
            live["metadata"]["uid"]
        backup = completed_backup(node)
        took = seconds(backup["status"]["startedAt"], backup["status"]["stoppedAt"])
        # CloudNativePG writes the Cluster's first recoverable point a little after the Backup completed: nothing
        # can be restored before it (what `db restore` checks)
        node.wait(cnpg.API, "Cluster", CLUSTER, SERVICES, lambda o: o if archiving(o) and (o.get("status") or {}).get(
            "firstRecoverabilityPoint") else None, timeout=600,
                  what="WAL archived continuously (ContinuousArchiving True) and a first recoverable point")
        after_backup = store.files()
        server = f"{PREFIX}/{SERVICES}/{CLUSTER}"
        base = [f for f in after_backup if f.startswith(f"{server}/base/{backup['status']['backupId']}/")]
        wals = [f for f in after_backup if f.startswith(f"{server}/wals/")]
        assert base and wals, sorted(after_backup)
        db_bytes = int(superuser(node, CLUSTER, "select sum(pg_database_size(datname)) from pg_database"))

        # items stored through the app, a time noted, the items deleted through the app and one more stored; the
        # WAL holding the delete switched out and archived
        for item in ITEMS:
            assert items(node, url, "POST", item.encode()) == {"stored": item}
        assert items(node, url)["pg"] == list(ITEMS)
        noted = datetime.datetime.fromtimestamp(float(superuser(
            node, CLUSTER, "select extract(epoch from clock_timestamp())")), datetime.UTC)
        assert items(node, url, "DELETE") == {"deleted": len(ITEMS)}
        items(node, url, "POST", LATER.encode())
        assert items(node, url)["pg"] == [LATER]
        segment = superuser(node, CLUSTER, "select pg_walfile_name(pg_switch_wal())")
        # no Kubernetes event says a segment is archived: its object appearing in the bucket does
        wait_for(f"WAL segment {segment} archived",
                 lambda: True if any(f.startswith(f"{server}/wals/") and Path(f).name.startswith(segment)
                                     for f in store.files()) else None, 300, interval=0.5)

        # `apprafter db restore --to` the noted time, as a person asks (the Application of environment prod says the
        # namespace), then the plan approved: a NEW Cluster from the object store up to that time, the claim's
        # database alone copied out of it into generation 2, the app's Secret switched
        started = time.monotonic()
        to = noted.isoformat()
        asked = run_cli("db", "restore", "demo", "-e", "prod", "--to", to, "--timeout", "120",
                        "--kubeconfig", str(node.kubeconfig))
        assert asked.returncode == 0, asked.stderr
        plan = (node.get(API, "ResourceClaim", "demo-pg", namespace) or {})["status"]["restore"]["plan"]
        assert f"apprafter migration approve {plan} -n {namespace}" in asked.stdout, asked.stdout
        assert [c["metadata"]["name"] for c in listed(node, cnpg.API, "Cluster")] == [CLUSTER]  # nothing yet
        approved = run_cli("migration", "approve", plan, "-n", namespace, "--kubeconfig", str(node.kubeconfig))
        assert approved.returncode == 0, approved.stderr

        def switched(claim: dict[str, Any]) -> Any:
            said = (claim.get("status") or {}).get("restore") or {}
            if said.get("phase") == "Failed":  # the copy Job's log says why
                logs = [node.kubectl("logs", "-n", SERVICES, f"job/{job['metadata']['name']}", check=False).stdout
                        for job in listed(node, "batch/v1", "Job")]
                raise AssertionError(f"{said['message']}; {logs}")
            user = ((claim.get("status") or {}).get("connection") or {}).get("user")
            return claim if said.get("phase") == "Restored" and user == f"{namespace}.demo-pg~2" else None
        node.wait(API, "ResourceClaim", "demo-pg", namespace, switched, timeout=900,
                  what="the restore switched the claim to generation 2")
        restore = time.monotonic() - started
        old = f"{namespace}.demo-pg"

        # the app's pods rolled onto generation 2 (its SAME Secret name); its own GET answers the deleted items, not
        # the later one; the old generation keeps what it had; the recovered Cluster (every tenant's data at that
        # time) is gone
        def rolled(deployment: dict[str, Any]) -> Any:
            spec, status = deployment["spec"], deployment.get("status") or {}
            stamped = (spec["template"]["metadata"].get("annotations") or {}).get("restore.apprafter.io/pg") == "2"
            done = status.get("observedGeneration", 0) >= deployment["metadata"]["generation"] and status.get(
                "updatedReplicas") == status.get("replicas") == status.get("readyReplicas") == spec["replicas"]
            return deployment if stamped and done else None
        node.wait("apps/v1", "Deployment", "demo", namespace, rolled, timeout=300,
                  what="the app's pods rolled onto generation 2")
        wait_for("the app's GET answering from generation 2", lambda: True if answered(node, url) not in (
            None, [LATER]) else None, 60, interval=0.5)
        assert items(node, url) == {"pg": list(ITEMS)}
        assert superuser(node, CLUSTER, "select string_agg(value, ',') from items", old) == LATER
        node.wait_list(cnpg.API, "Cluster", SERVICES, lambda found: [c["metadata"]["name"] for c in found] == [
            CLUSTER] or None, timeout=300, what="the recovered Cluster deleted")
        at_end = store.files()

        # what `apprafter db backups` says of it, as a person asks (the app registered as `app add` registers it)
        node.ensure_namespace(ARGOCD)
        registered = argocd_application("demo", "prod", Source("https://git.example/shop.git", ".", "main"),
                                        namespace=namespace, project="default", argocd_namespace=ARGOCD)
        registered["metadata"].pop("finalizers")  # no Argo CD runs here to take its finalizer off
        node.apply(registered, field_manager="test")
        result = run_cli("db", "backups", "demo", "-e", "prod", "--argocd-namespace", ARGOCD, "-o", "json",
                         "--kubeconfig", str(node.kubeconfig))
        assert result.returncode == 0, result.stderr
        said, status = json.loads(result.stdout), (node.get(cnpg.API, "Cluster", CLUSTER, SERVICES) or {})["status"]
        assert (said["cluster"], said["provider"], said["archiving"], said["problem"]) == (
            {"name": CLUSTER, "namespace": SERVICES}, PROVIDER, True, None), said
        assert (said["earliest"], said["lastBackup"]) == (status["firstRecoverabilityPoint"],
                                                          status["lastSuccessfulBackup"]), (said, status)
        assert said["earliest"] <= noted.isoformat(timespec="seconds").replace("+00:00", "Z") <= said["latest"]
        assert (said["generation"], said["kept"]) == ({"number": 2, "database": f"{old}~2"},
                                                      [{"number": 1, "database": old}]), said

        # the old generation's own approved removal (lifecycle.generation_drop): a plan, its approval, then
        # CloudNativePG drops that database and role; the app keeps answering from generation 2
        started = time.monotonic()
        asked = run_cli("db", "drop-generation", "demo", "-e", "prod", "--generation", "1", "--timeout", "120",
                        "--kubeconfig", str(node.kubeconfig))
        assert asked.returncode == 0, asked.stderr
        drop_plan = (node.get(API, "ResourceClaim", "demo-pg", namespace) or {})["status"]["restore"]["drop"]["plan"]
        assert superuser(node, CLUSTER, f"select count(*) from pg_database where datname = '{old}'") == "1"
        approved = run_cli("migration", "approve", drop_plan, "-n", namespace, "--kubeconfig", str(node.kubeconfig))
        assert approved.returncode == 0, approved.stderr
        node.wait(API, "ResourceClaim", "demo-pg", namespace, lambda c: c if ((c.get("status") or {}).get(
            "restore") or {}).get("drop", {}).get("phase") == "Dropped" else None, timeout=300,
                  what="generation 1 dropped")
        dropping = time.monotonic() - started
        catalog = ("select (select count(*) from pg_database where datname = '{0}') || ',' || (select count(*) from "
                   "pg_roles where rolname = '{0}')")
        assert superuser(node, CLUSTER, catalog.format(old)) == "0,0"
        assert superuser(node, CLUSTER, catalog.format(f"{old}~2")) == "1,1"
        assert items(node, url) == {"pg": list(ITEMS)}

        # nothing secret said: the operator's log, the Cluster's status, the claim's
        said = operator.log() + str(node.get(cnpg.API, "Cluster", CLUSTER, SERVICES)) + str(
            node.get(API, "ResourceClaim", "demo-pg", namespace))
        assert store.secret not in said and base64.b64encode(store.secret.encode()).decode() not in said
        print(f"\npg backup: base backup {took:.1f} s ({sum(after_backup[f] for f in base)} B in "
              f"{len(base)} objects) of databases of {db_bytes} B; bucket after it {sum(after_backup.values())} B in "
              f"{len(after_backup)} objects; restore (request, approval, recovered Cluster, copy, switch) "
              f"{restore:.1f} s; drop of the kept generation (request, approval, CloudNativePG) {dropping:.1f} s; "
              f"bucket at the end "
              f"{sum(at_end.values())} B in {len(at_end)} objects")
    finally:
        for cluster in listed(node, cnpg.API, "Cluster"):  # a restore that failed half-way: its recovered Cluster
            if cluster["metadata"]["name"] != CLUSTER:
                node.delete(cnpg.API, "Cluster", cluster["metadata"]["name"], SERVICES)
        # while its operator runs: the claims' finalizers are its to take off
        node.delete_namespaces([namespace, ARGOCD])
