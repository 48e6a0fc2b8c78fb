"""A pg provider's backups (lifecycle/backends/pg_backup.py, wired into pg.py and pg_cluster.py): the schema's backup
config and its defaults, the Cluster's barmanObjectStore and retention from it (none without a destination), the
ScheduledBackup a provisioning pass applies once the live Cluster is Ready and archives (and deletes when backups are
turned off), the recovery Cluster at a point in time (a new name, the source's archive as its origin, its own
archive), and what a Cluster says can be restored. The real thing, CloudNativePG archiving to versitygw and
recovering, is tests/reconciler/test_pg_backup_node.py."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from lifecycle.backends import pg_backup
from lifecycle.backends import pg_cluster as core
from lifecycle.backends.common import PROVIDER_LABEL
from lifecycle.backends.contract import Apply, Delete, Seen, Site
from lifecycle.backends.pg import CORE
from lifecycle.service_provider import check

NS = "apprafter-pg"
IMAGE = "localhost/postgresql:15"
DESTINATION = {"endpointURL": "http://backups.example:7070", "bucket": "pg-backups", "path": "site-a",
               "credentials": {"secretName": "pg-backup-creds"}}


def provider(**config: Any) -> dict[str, Any]:
    return {"metadata": {"name": "pg-integrated"},
            "spec": {"type": "pg", "backend": "cloudnative-pg", "config": {"cluster": "platform-postgres", **config}}}


def shared(**config: Any) -> core.Shared:
    found = CORE.configure(provider(**config), Site(NS, IMAGE))
    assert isinstance(found, core.Shared), found
    return found


def claim() -> dict[str, Any]:
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ResourceClaim",
            "metadata": {"namespace": "shop", "name": "cart-pg", "uid": "0a1b", "labels": {}},
            "spec": {"type": "pg", "selector": {}}}


def test_without_a_destination_there_are_no_backups_and_the_cluster_archives_nowhere() -> None:
    for config in ({}, {"backup": {"retention": "14d"}}):
        found = shared(**config)
        assert found.backups is None
        spec = core.cluster_object(found, {}, None)["spec"]
        assert "backup" not in spec and "env" not in spec


def test_a_destination_gives_the_cluster_its_archive_and_the_schemas_retention() -> None:
    found = shared(backup={"destination": DESTINATION})
    assert found.backups == pg_backup.Backups("pg-backups", "site-a", "http://backups.example:7070", None,
                                              "pg-backup-creds", "ACCESS_KEY_ID", "ACCESS_SECRET_KEY", "7d",
                                              "0 0 3 * * *")
    spec = core.cluster_object(found, {}, None)["spec"]
    assert spec["backup"] == {"retentionPolicy": "7d", "barmanObjectStore": {
        # the namespace under the path: two providers' Clusters of one name never share an archive; barman adds
        # the server name, the Cluster's own (none written)
        "destinationPath": "s3://pg-backups/site-a/apprafter-pg", "endpointURL": "http://backups.example:7070",
        "s3Credentials": {"accessKeyId": {"name": "pg-backup-creds", "key": "ACCESS_KEY_ID"},
                          "secretAccessKey": {"name": "pg-backup-creds", "key": "ACCESS_SECRET_KEY"}},
        "wal": {"compression": "gzip"}, "data": {"compression": "gzip"}}}
    assert "env" not in spec


def test_aws_itself_needs_no_endpoint_and_the_region_reaches_barman_through_the_instances_environment() -> None:
    found = shared(backup={"destination": {"bucket": "pg-backups", "region": "eu-central-1",
                                           "credentials": {"secretName": "aws", "accessKeyIdKey": "id",
                                                           "secretAccessKeyKey": "secret"}},
                           "retention": "30d", "schedule": "0 30 1 * * *"})
    spec = core.cluster_object(found, {}, None)["spec"]
    store = spec["backup"]["barmanObjectStore"]
    assert "endpointURL" not in store and store["destinationPath"] == "s3://pg-backups/apprafter-pg"
    assert store["s3Credentials"]["secretAccessKey"] == {"name": "aws", "key": "secret"}
    assert spec["backup"]["retentionPolicy"] == "30d"
    assert spec["env"] == [{"name": "AWS_DEFAULT_REGION", "value": "eu-central-1"}]


@pytest.mark.parametrize(("backup", "field"), [
    ({"destination": {"bucket": "pg-backups"}}, "spec.config.backup.destination.credentials"),
    ({"destination": {**DESTINATION, "bucket": "Not_A_Bucket"}}, "spec.config.backup.destination.bucket"),
    ({"destination": {**DESTINATION, "endpointURL": "backups:7070"}}, "spec.config.backup.destination.endpointURL"),
    ({"destination": {**DESTINATION, "path": "/abs"}}, "spec.config.backup.destination.path"),
    ({"retention": "7 days"}, "spec.config.backup.retention"),
    ({"retention": "0d"}, "spec.config.backup.retention"),
    ({"schedule": "0 3 * * *"}, "spec.config.backup.schedule"),  # five fields: CloudNativePG's cron has six
    ({"encryption": "AES256"}, "spec.config.backup.encryption"),
])
def test_a_backup_config_the_schema_refuses_names_its_field(backup: dict[str, Any], field: str) -> None:
    problems = check(provider(backup=backup))
    assert [f for f, _ in problems] == [field], problems
    assert CORE.configure(provider(backup=backup), Site(NS, IMAGE)) == [f"{f}: {p}" for f, p in problems]


def live(spec: dict[str, Any] | None = None, ready: bool = True, uid: str | None = "c1u1d") -> dict[str, Any]:
    """The provider's Cluster as the API server holds it."""
    return {"apiVersion": core.CNPG, "kind": "Cluster",
            "metadata": {"name": "platform-postgres", "namespace": NS, "resourceVersion": "5",
                         **({"uid": uid} if uid else {})},
            "spec": spec or {}, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def writes(found: core.Shared, cluster: dict[str, Any] | None) -> list[Any]:
    """What a provisioning pass writes, its password Secret there (so past its first step)."""
    tenant = core.tenant_of(claim())
    secret = core.password_secret_object(found, tenant, "pw")
    reads = CORE.reads(claim(), found)
    step = CORE.provision(claim(), found, Seen(dict(zip(reads, (cluster, None, secret, None), strict=False)), None, "f",
                                               0))
    return [(w.obj["kind"] if isinstance(w, Apply) else f"delete {w.kind.kind}") for w in step.writes]


def test_the_scheduled_backup_is_applied_only_once_the_live_cluster_is_ready_and_archives() -> None:
    on = shared(backup={"destination": DESTINATION})
    archiving = core.cluster_object(on, {}, None)["spec"]
    assert writes(on, None) == ["Cluster"]  # the Cluster made first, with its archive
    assert writes(on, live()) == ["Cluster"]  # a live Cluster not archiving yet: a Backup of it would fail
    assert writes(on, live(archiving, ready=False)) == ["Cluster"]  # not ready: a Backup would wait 30 s
    assert writes(on, live(archiving)) == ["ScheduledBackup", "Cluster"]
    # backups turned off: the ScheduledBackup goes before the write that takes the Cluster's archive off
    off = shared()
    assert writes(off, live(archiving)) == ["delete ScheduledBackup", "Cluster"]
    assert writes(off, live()) == ["Cluster"]


def test_the_scheduled_backup_backs_up_at_once_and_on_the_schedule_owned_by_the_cluster() -> None:
    on = shared(backup={"destination": DESTINATION, "schedule": "0 15 2 * * *"})
    cluster = live(core.cluster_object(on, {}, None)["spec"])
    [made] = pg_backup.schedule_writes(on.backups, cluster, {PROVIDER_LABEL: "pg-integrated"})
    assert isinstance(made, Apply)
    assert made.obj == {
        "apiVersion": "postgresql.cnpg.io/v1", "kind": "ScheduledBackup",
        "metadata": {"name": "platform-postgres", "namespace": NS, "labels": {PROVIDER_LABEL: "pg-integrated"},
                     "ownerReferences": [{"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
                                          "name": "platform-postgres", "uid": "c1u1d", "controller": True}]},
        "spec": {"schedule": "0 15 2 * * *", "cluster": {"name": "platform-postgres"}, "immediate": True,
                 "backupOwnerReference": "self", "method": "barmanObjectStore"}}
    [gone] = pg_backup.schedule_writes(None, cluster, {})
    assert gone == Delete(pg_backup.SCHEDULED_BACKUP, NS, "platform-postgres")


TARGET = datetime.datetime(2026, 5, 9, 7, 30, 0, 123456, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))


def test_a_recovery_is_a_new_cluster_from_the_sources_archive_up_to_the_target_time() -> None:
    on = shared(backup={"destination": DESTINATION})
    roles = {"shop.cart-pg": core.role_entry(core.tenant_of(claim()))}
    source = core.cluster_object(on, roles, live())
    assert on.backups is not None
    name = pg_backup.recovery_name("platform-postgres", TARGET)
    assert name == "platform-postgres-at-20260509t053000"  # UTC, to the second
    made = pg_backup.recovery_cluster(source, on.backups, name, TARGET)
    assert made["metadata"] == {"name": name, "namespace": NS, "labels": {
        **source["metadata"]["labels"], "app.kubernetes.io/instance": name}}  # no resourceVersion: a new object
    spec = made["spec"]
    # PostgreSQL's format at offset +00: CloudNativePG would turn RFC 3339 into `... Z`, which PostgreSQL refuses
    assert spec["bootstrap"] == {"recovery": {"source": "origin", "recoveryTarget": {
        "targetTime": "2026-05-09 05:30:00.123456+00"}}}
    # the origin is the source's archive: its server name is the source Cluster's
    [origin] = spec["externalClusters"]
    assert origin == {"name": "origin", "barmanObjectStore": {
        **source["spec"]["backup"]["barmanObjectStore"], "serverName": "platform-postgres"}}
    # and it archives under its own name (none written: barman's default is the Cluster's), the rest as the source
    assert spec["backup"] == source["spec"]["backup"] and "serverName" not in spec["backup"]["barmanObjectStore"]
    assert {k: v for k, v in spec.items() if k not in ("bootstrap", "externalClusters")} == source["spec"]
    assert "bootstrap" not in source["spec"]  # the source untouched


def test_a_recovery_name_fits_cloudnative_pgs_fifty_characters() -> None:
    name = pg_backup.recovery_name("a-cluster-name-of-forty-characters-long-", TARGET)
    assert len(name) <= 50 and name.endswith("-at-20260509t053000") and "--" not in name


NOW = datetime.datetime(2026, 5, 9, 12, 0, 0, tzinfo=datetime.UTC)


def status(archiving: str | None, **fields: str) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True"}]
    if archiving is not None:
        conditions.append({"type": "ContinuousArchiving", "status": archiving, "reason": "ContinuousArchivingFailing",
                           "message": "unexpected failure invoking barman-cloud-wal-archive: exit status 4",
                           "lastTransitionTime": "2026-05-09T11:00:00Z"})
    return {"spec": {"backup": {"barmanObjectStore": {}}}, "status": {"conditions": conditions, **fields}}


def test_what_can_be_restored_is_from_the_first_backup_to_now_while_wal_is_archived() -> None:
    points = {"firstRecoverabilityPoint": "2026-05-02T03:00:41Z", "lastSuccessfulBackup": "2026-05-09T03:00:40Z"}
    assert pg_backup.recoverable(status("True", **points), NOW) == pg_backup.Recoverable(
        "2026-05-02T03:00:41Z", "2026-05-09T03:00:40Z", "2026-05-09T12:00:00Z", True, None)
    # archiving stopped: the latest point is when it did
    assert pg_backup.recoverable(status("False", **points), NOW) == pg_backup.Recoverable(
        "2026-05-02T03:00:41Z", "2026-05-09T03:00:40Z", "2026-05-09T11:00:00Z", False,
        "WAL archiving fails: unexpected failure invoking barman-cloud-wal-archive: exit status 4")
    assert pg_backup.recoverable(status("True"), NOW).problem == "no base backup has completed yet"
    assert pg_backup.recoverable(status(None), NOW).problem == "WAL archiving has not reported yet"
    assert pg_backup.recoverable({"spec": {}}, NOW) == pg_backup.Recoverable(
        None, None, None, False, "no backups configured for this Cluster")


def test_the_cluster_a_claim_is_on_is_read_back_from_its_connections_host() -> None:
    found = shared()
    assert core.cluster_at(found.host) == ("platform-postgres", NS)
    for host in ("", "platform-postgres.apprafter-pg.svc", "x-rw.apprafter-pg", "x-rw.ns.svc.cluster.local"):
        assert core.cluster_at(host) is None, host
