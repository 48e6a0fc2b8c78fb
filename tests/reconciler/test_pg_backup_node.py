"""Backups and point-in-time restore of `needs: pg` on the node tier (issue 42 item 1), for real: a cloudnative-pg
provider whose config names a backup destination, a versitygw outside the node's cluster (a process of this host
on the node's address, tests/testbed/s3.py start_s3_for_node) with a bucket and a `user`-role account of its own
(made with the s3 backend's client), the credentials in a Secret beside the Cluster. The operator writes the Cluster
with its barmanObjectStore and, once it is Ready and archives, the ScheduledBackup; CloudNativePG's instance manager
runs Debian's barman-cloud in our PostgreSQL image: WAL is archived continuously (the Cluster's ContinuousArchiving
True) and the immediate base backup completes (a Backup `completed`, its files in the bucket). Then an app's pod
writes rows, a time is noted in PostgreSQL, the rows are deleted and the WAL switched (as the superuser); a NEW
Cluster recovered from the object store up to that time (lifecycle.backends.pg_backup.recovery_cluster, applied as
the restore will apply it) holds the deleted rows, read by the app's own role and password over its `-rw` Service,
while the original holds only what was left, and archives under its own name. Figures printed: the backup's time,
the restore's, the bucket's bytes against the database's size (docs/measurements.md). `apprafter db backups` then
says what can be restored: the Cluster's first recoverable point to now, the noted time between them."""

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

from lifecycle.backends import pg_backup
from lifecycle.backends.contract import Site
from lifecycle.backends.pg import CORE
from lifecycle.backends.pg_cluster import Shared, cluster_object, roles_of
from reconciler.backends import s3 as s3_client
from renderer.argocd_app import Source, argocd_application
from tests.reconciler import node_pods
from tests.reconciler.helpers import API, add_provider, apply, cr, service_provider
from tests.reconciler.node_pods import finished, ready, secret_env
from tests.reconciler.operator_proc import FAST, Fixture, Operator, operator_fixture
from tests.reconciler.test_pg_node import cloudnative_pg, pg_image, pg_image_flag, platform_file  # noqa: F401 (fixtures)
from tests.renderer.helpers import run_cli
from tests.testbed import cnpg
from tests.testbed.cnpg import CloudNativePG
from tests.testbed.node import NodeTestBed
from tests.testbed.procs import wait_for
from tests.testbed.s3 import S3Server, start_s3_for_node

pytestmark = [pytest.mark.node, pytest.mark.testbed]

RUN = uuid.uuid4().hex[:8]
SERVICES = f"pg-bak-{RUN}"
PROVIDER, CLUSTER = f"pg-bak-{RUN}", f"pgbak-{RUN}"
BUCKET, PREFIX, CREDENTIALS = f"pg-backups-{RUN}", "bed", "pg-backup-credentials"
SECRET = "demo-pg-conn"
ARGOCD = f"argocd-{RUN}"  # where the app is registered for `apprafter db backups` (no Argo CD runs)
ROWS, KEPT = 10000, 10  # rows written, rows left after the delete
# The app's pod (its connection Secret as its env): a table of ROWS rows, the time noted by PostgreSQL after their
# commit (epoch seconds), every row past KEPT deleted (its commit is later than the noted time).
WRITER = f"""set -eu
psql -X -w "$URL" -v ON_ERROR_STOP=1 -qc 'create table notes (id int primary key, v text)' \
  -c "insert into notes select g, 'note ' || g from generate_series(1, {ROWS}) g"
echo "written: $(psql -X -w "$URL" -Atc 'select count(*) from notes')"
echo "noted: $(psql -X -w "$URL" -Atc 'select extract(epoch from clock_timestamp())')"
psql -X -w "$URL" -qc 'delete from notes where id > {KEPT}'
echo "left: $(psql -X -w "$URL" -Atc 'select count(*) from notes')"
"""
# The same role and password, on another Cluster's -rw Service.
READER = """set -eu
echo "rows: $(PGPASSWORD="$PASSWORD" psql -X -w "host=$AT port=5432 user=$USER dbname=$DB connect_timeout=10" \
  -Atc 'select count(*) from notes')"
"""


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
              "backup": backup_config(store)}
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


def run_pod(node: NodeTestBed, namespace: str, name: str, image: str, script: str,
            extra: list[dict[str, Any]] | None = None) -> list[str]:
    """What a psql pod with the app's connection Secret as its env prints (it must succeed)."""
    env = secret_env(SECRET, [(key.upper(), key) for key in ("url", "user", "password", "db")]) + (extra or [])
    node.apply(node_pods.client_pod(name, namespace, image, script, env, 26), field_manager="test")
    pod = node.wait("v1", "Pod", name, namespace, finished, timeout=180, what=f"pod {namespace}/{name} to finish")
    log = node.logs(name, namespace)
    assert pod["status"]["phase"] == "Succeeded", log
    return log.splitlines()


def superuser(node: NodeTestBed, cluster: str, sql: str) -> str:
    """One statement as the instance's superuser over its local socket, on the Cluster's primary."""
    primary = (node.get(cnpg.API, "Cluster", cluster, SERVICES) or {})["status"]["currentPrimary"]
    return node.kubectl("exec", "-n", SERVICES, primary, "-c", "postgres", "--", "psql", "-X", "-d", "postgres",
                        "-Atc", sql).stdout.strip()


def seconds(start: str, stop: str) -> float:
    return (datetime.datetime.fromisoformat(stop) - datetime.datetime.fromisoformat(start)).total_seconds()


def test_wal_is_archived_a_base_backup_completes_and_a_new_cluster_recovers_the_deleted_rows_at_the_noted_time(
        node: NodeTestBed, test_app: str, cloudnative_pg: CloudNativePG, operator: Operator,  # noqa: F811
        store: Store, provider: dict[str, Any]) -> None:
    image = cloudnative_pg.postgres_image
    namespace = f"pg-bak-app-{RUN}"
    recovered = ""
    try:
        node.ensure_namespace(namespace)
        apply(node, cr(namespace, {"image": test_app, "replicas": 1, "expose": {"port": 8080},
                                   "needs": {"pg": {"selector": {"bed": RUN}}},
                                   "env": {"MODE": "serve", "DATABASE_URL": {"claim": "pg/url"}}}))
        node.wait(API, "Application", "demo", namespace, ready, timeout=600, what="the Application Ready")
        live = node.get(cnpg.API, "Cluster", CLUSTER, SERVICES) or {}
        assert live["spec"]["backup"]["barmanObjectStore"]["destinationPath"] == f"s3://{BUCKET}/{PREFIX}/{SERVICES}"
        # the operator applied the ScheduledBackup once the Cluster was Ready and archiving; its immediate Backup
        scheduled = node.wait(cnpg.API, "ScheduledBackup", CLUSTER, SERVICES, lambda o: o, timeout=300,
                              what="the ScheduledBackup")
        assert scheduled["spec"]["immediate"] is True and scheduled["metadata"]["ownerReferences"][0]["uid"] == \
            live["metadata"]["uid"]
        backup = completed_backup(node)
        took = seconds(backup["status"]["startedAt"], backup["status"]["stoppedAt"])
        node.wait(cnpg.API, "Cluster", CLUSTER, SERVICES, archiving, timeout=600,
                  what="WAL archived continuously (ContinuousArchiving True)")
        after_backup = store.files()
        server = f"{PREFIX}/{SERVICES}/{CLUSTER}"
        base = [f for f in after_backup if f.startswith(f"{server}/base/{backup['status']['backupId']}/")]
        wals = [f for f in after_backup if f.startswith(f"{server}/wals/")]
        assert base and wals, sorted(after_backup)
        db_bytes = int(superuser(node, CLUSTER, "select sum(pg_database_size(datname)) from pg_database"))

        # rows written, a time noted, rows deleted; the WAL holding the delete switched out and archived
        written = run_pod(node, namespace, "pg-writer", image, WRITER)
        assert written[0] == f"written: {ROWS}" and written[2] == f"left: {KEPT}", written
        noted = datetime.datetime.fromtimestamp(float(written[1].removeprefix("noted: ")), datetime.UTC)
        segment = superuser(node, CLUSTER, "select pg_walfile_name(pg_switch_wal())")
        # no Kubernetes event says a segment is archived: its object appearing in the bucket does
        wait_for(f"WAL segment {segment} archived",
                 lambda: True if any(f.startswith(f"{server}/wals/") and Path(f).name.startswith(segment)
                                     for f in store.files()) else None, 300, interval=0.5)

        # a NEW Cluster from the object store, up to the noted time, as the restore writes it
        shared = CORE.configure(provider, Site(SERVICES, image))
        assert isinstance(shared, Shared) and shared.backups is not None
        source = cluster_object(shared, roles_of(node.get(cnpg.API, "Cluster", CLUSTER, SERVICES)), None)
        recovered = pg_backup.recovery_name(CLUSTER, noted)
        started = time.monotonic()
        node.apply(pg_backup.recovery_cluster(source, shared.backups, recovered, noted), field_manager="admin")
        node.wait(cnpg.API, "Cluster", recovered, SERVICES, cnpg.cluster_ready, timeout=900,
                  what=f"Cluster {recovered} recovered and Ready")
        restore = time.monotonic() - started

        # the app's own role and password read the deleted rows back on the recovered Cluster; the original kept
        # only what was left
        at = [{"name": "AT", "value": f"{recovered}-rw.{SERVICES}.svc"}]
        assert run_pod(node, namespace, "pg-reader-recovered", image, READER, at) == [f"rows: {ROWS}"]
        at = [{"name": "AT", "value": f"{CLUSTER}-rw.{SERVICES}.svc"}]
        assert run_pod(node, namespace, "pg-reader-original", image, READER, at) == [f"rows: {KEPT}"]
        # and it archives under its own name, beside the original's archive
        node.wait(cnpg.API, "Cluster", recovered, SERVICES, archiving, timeout=600,
                  what=f"Cluster {recovered} archiving")
        at_end = store.files()
        assert any(f.startswith(f"{PREFIX}/{SERVICES}/{recovered}/wals/") for f in at_end), sorted(at_end)

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

        # nothing secret said: the operator's log, the Clusters' status
        said = operator.log() + str(node.get(cnpg.API, "Cluster", CLUSTER, SERVICES)) + str(
            node.get(cnpg.API, "Cluster", recovered, SERVICES))
        assert store.secret not in said and base64.b64encode(store.secret.encode()).decode() not in said
        print(f"\npg backup: base backup {took:.1f} s ({sum(after_backup[f] for f in base)} B in "
              f"{len(base)} objects) of databases of {db_bytes} B; bucket after it {sum(after_backup.values())} B in "
              f"{len(after_backup)} objects; restore to a new Cluster Ready {restore:.1f} s; bucket at the end "
              f"{sum(at_end.values())} B in {len(at_end)} objects")
    finally:
        if recovered:
            node.delete(cnpg.API, "Cluster", recovered, SERVICES)
        # while its operator runs: the claims' finalizers are its to take off
        node.delete_namespaces([namespace, ARGOCD])
