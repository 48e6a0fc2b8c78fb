"""A pg provider's backups: its Cluster's WAL archive and base backups (CloudNativePG's barmanObjectStore), the
ScheduledBackup, a recovery Cluster at a point in time, and what the Cluster says can be restored. Pure.

CloudNativePG 1.26's in-tree barman-cloud support (deprecated there for its barman-cloud plugin, still served): with
`spec.backup.barmanObjectStore` on the Cluster its instance manager runs barman-cloud-wal-archive for every WAL
segment PostgreSQL completes (archive_timeout 5 min: a segment at least that often) and barman-cloud-backup for each
Backup, inside the postgres container (deploy/images/postgresql.Dockerfile has barman-cli-cloud), and deletes what
`retentionPolicy` no longer needs. A restore is never in place: a NEW Cluster bootstraps from the object store
(`bootstrap.recovery` up to `recoveryTarget.targetTime`) and archives under its own name.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, NamedTuple

from controller_runtime.kinds import GroupVersionKind
from lifecycle.backends.contract import Apply, Delete
from lifecycle.conditions import find_condition

__all__ = ["BACKUP", "COMPRESSION", "COPY", "JOB", "ORIGIN", "SCHEDULED_BACKUP", "Backups", "Recoverable",
           "backup_stanza", "backups_of", "copy_job", "object_store", "recoverable", "recovery_cluster",
           "recovery_name", "region_env", "schedule_writes", "scheduled_backup_object", "target_time"]

CNPG = "postgresql.cnpg.io/v1"
SCHEDULED_BACKUP, BACKUP = GroupVersionKind(CNPG, "ScheduledBackup"), GroupVersionKind(CNPG, "Backup")
JOB = GroupVersionKind("batch/v1", "Job")
# gzip for base backups and WAL: Python's own (no python3-snappy in the image); an idle Cluster's 16 MiB segments,
# switched by archive_timeout, are mostly zeros
COMPRESSION = "gzip"
ORIGIN = "origin"  # the recovery Cluster's name for the Cluster it recovers (its externalClusters entry)
CLUSTER_NAME_MAX = 50  # CloudNativePG's webhook refuses a longer Cluster name


class Backups(NamedTuple):
    """A provider's backup config (spec.config.backup with the schema's defaults), once it names a destination."""

    bucket: str
    path: str  # a prefix in the bucket, "" for none
    endpoint_url: str | None
    region: str | None
    secret: str  # the credentials Secret, in the Cluster's namespace
    access_key_id_key: str
    secret_access_key_key: str
    retention: str  # "7d"
    schedule: str  # six cron fields

    def destination_path(self, namespace: str) -> str:
        """Where a Cluster of `namespace` archives: `s3://bucket[/path]/<namespace>`; barman adds `/<server name>`
        (the Cluster's name), so two providers' Clusters of one name in two namespaces never share an archive."""
        return "/".join(part for part in (f"s3://{self.bucket}", self.path, namespace) if part)


def backups_of(config: Mapping[str, Any]) -> Backups | None:
    """The backups a provider's config (with the schema's defaults) asks for; None without a destination."""
    backup = config.get("backup") or {}
    destination = backup.get("destination") or {}
    if "bucket" not in destination:  # the schema requires it of a destination: this one is only its defaults
        return None
    credentials = destination["credentials"]
    return Backups(str(destination["bucket"]), str(destination.get("path") or ""),
                   destination.get("endpointURL"), destination.get("region"), str(credentials["secretName"]),
                   str(credentials["accessKeyIdKey"]), str(credentials["secretAccessKeyKey"]),
                   str(backup["retention"]), str(backup["schedule"]))


def object_store(backups: Backups, namespace: str, server_name: str | None = None) -> dict[str, Any]:
    """The barmanObjectStore stanza: where, with which credentials, compressed. `server_name` None: the Cluster's
    own name (barman's default), the one to write on the Cluster that archives; a recovery names its source's."""
    store: dict[str, Any] = {
        "destinationPath": backups.destination_path(namespace),
        "s3Credentials": {"accessKeyId": {"name": backups.secret, "key": backups.access_key_id_key},
                          "secretAccessKey": {"name": backups.secret, "key": backups.secret_access_key_key}},
        "wal": {"compression": COMPRESSION}, "data": {"compression": COMPRESSION}}
    if backups.endpoint_url:
        store["endpointURL"] = backups.endpoint_url
    if server_name:
        store["serverName"] = server_name
    return store


def backup_stanza(backups: Backups, namespace: str) -> dict[str, Any]:
    """The Cluster's spec.backup: archive to the object store, keep what `retention` may need (barman's recovery
    window: the base backups and WAL to restore to any point in the last `retention`)."""
    return {"barmanObjectStore": object_store(backups, namespace), "retentionPolicy": backups.retention}


def region_env(backups: Backups | None) -> list[dict[str, str]]:
    """The instances' environment for the object store's region: CloudNativePG takes a region only from a Secret,
    every barman-cloud command it runs inherits the instance manager's environment (a recovery's job too)."""
    return [{"name": "AWS_DEFAULT_REGION", "value": backups.region}] if backups and backups.region else []


def scheduled_backup_object(cluster: Mapping[str, Any], backups: Backups,
                            labels: Mapping[str, str]) -> dict[str, Any]:
    """The live Cluster's ScheduledBackup, named as the Cluster and owned by it (deleting the Cluster deletes it):
    a base backup on the schedule and one at once when it is first made (WAL alone restores nothing), each Backup
    owned by it."""
    meta = cluster["metadata"]
    # no blockOwnerDeletion: that would need `update` on clusters/finalizers (OwnerReferencesPermissionEnforcement)
    owner = {"apiVersion": CNPG, "kind": "Cluster", "name": meta["name"], "uid": meta["uid"], "controller": True}
    return {"apiVersion": CNPG, "kind": "ScheduledBackup",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": dict(labels),
                         "ownerReferences": [owner]},
            "spec": {"schedule": backups.schedule, "cluster": {"name": meta["name"]}, "immediate": True,
                     "backupOwnerReference": "self", "method": "barmanObjectStore"}}


def recovery_name(cluster: str, target: datetime.datetime) -> str:
    """A recovery Cluster's name: `<cluster>-at-<target, UTC, to the second>` (`platform-postgres-at-20260509t073000`),
    at most CloudNativePG's 50 characters."""
    stamp = target.astimezone(datetime.UTC).strftime("%Y%m%dt%H%M%S")
    return f"{cluster[:CLUSTER_NAME_MAX - len(stamp) - 4].rstrip('-')}-at-{stamp}"


def recovery_cluster(source: Mapping[str, Any], backups: Backups, name: str,
                     target: datetime.datetime) -> dict[str, Any]:
    """A NEW Cluster `name` beside `source` (the Cluster the pg core writes, as written), bootstrapped from
    `source`'s object store up to `target`: the base backup before it, then its WAL replayed until `target`
    (inclusive). It holds every database `source` held then, roles and passwords included, and archives under its
    own name. `target` must be after the first recoverable point and before the last archived WAL, else
    PostgreSQL stops the recovery (CloudNativePG: no backup found; PostgreSQL: recovery ended before the target)."""
    meta, spec = source["metadata"], dict(source["spec"])
    spec["bootstrap"] = {"recovery": {"source": ORIGIN, "recoveryTarget": {"targetTime": target_time(target)}}}
    spec["externalClusters"] = [{"name": ORIGIN,
                                 "barmanObjectStore": object_store(backups, meta["namespace"], meta["name"])}]
    labels = {**(meta.get("labels") or {}), "app.kubernetes.io/instance": name}
    return {"apiVersion": CNPG, "kind": "Cluster",
            "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels}, "spec": spec}


def target_time(target: datetime.datetime) -> str:
    """`recoveryTarget.targetTime` in PostgreSQL's own format, UTC as a numeric offset (`2026-05-09
    05:30:00.123456+00`). Not RFC 3339: CloudNativePG 1.26 rewrites an RFC 3339 time at offset 0 to `... Z`, and
    PostgreSQL refuses `Z` in recovery_target_time (a time zone abbreviation, which it cannot read when the setting is
    checked): the recovery's PostgreSQL never starts. A PostgreSQL timestamp passes CloudNativePG unchanged."""
    return target.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


class Recoverable(NamedTuple):
    """What a Cluster says can be restored: from `first` (its oldest base backup's end) to `latest`, `archiving`
    whether WAL archiving works now (then the latest point is now, less at most archive_timeout), and why not."""

    first: str | None
    last_backup: str | None
    latest: str | None
    archiving: bool
    problem: str | None


def recoverable(cluster: Mapping[str, Any], now: datetime.datetime) -> Recoverable:
    """From the Cluster's status: CloudNativePG's first recoverability point and last successful backup, its
    ContinuousArchiving condition (True: the latest point is `now`; False: the time archiving stopped)."""
    status = cluster.get("status") or {}
    archiving = find_condition(status.get("conditions"), "ContinuousArchiving") or {}
    working = archiving.get("status") == "True"
    first, last = status.get("firstRecoverabilityPoint") or None, status.get("lastSuccessfulBackup") or None
    if not (cluster.get("spec") or {}).get("backup"):
        return Recoverable(first, last, None, False, "no backups configured for this Cluster")
    if not archiving:
        return Recoverable(first, last, None, False, "WAL archiving has not reported yet")
    if not working:
        said = archiving.get("message") or archiving.get("reason") or "failing"
        return Recoverable(first, last, archiving.get("lastTransitionTime"), False, f"WAL archiving fails: {said}")
    latest = now.astimezone(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Recoverable(first, last, latest, True, None if first else "no base backup has completed yet")


def schedule_writes(backups: Backups | None, live: Mapping[str, Any] | None,
                    labels: Mapping[str, str]) -> tuple[Apply | Delete, ...]:
    """What a provisioning pass writes of the ScheduledBackup, before the Cluster: with backups, applied once the
    live Cluster is Ready and archives (its spec.backup written by an earlier pass: a Backup of a Cluster without
    one fails at once, and one of a Cluster not ready waits 30 s); without, deleted while the live Cluster still
    archives (the pass that takes spec.backup off), else its Backups would fail every day."""
    if live is None:
        return ()
    meta, archives = live.get("metadata") or {}, bool(((live.get("spec") or {}).get("backup") or {}).get(
        "barmanObjectStore"))
    if backups is None:
        return (Delete(SCHEDULED_BACKUP, meta.get("namespace"), str(meta.get("name"))),) if archives else ()
    ready = (find_condition((live.get("status") or {}).get("conditions"), "Ready") or {}).get("status") == "True"
    return (Apply(scheduled_backup_object(live, backups, labels)),) if archives and ready and meta.get("uid") else ()


# The copy of one database from a recovery Cluster into a new one on the shared Cluster, as the two roles themselves
# (pg_hba `sameuser` lets each reach its own database alone; no superuser): the recovered Cluster applies its roles'
# passwords a little after it is Ready, so the first connection is tried for a while. pg_restore in one transaction:
# a failed attempt leaves the new database empty, so the Job's retry starts clean. No owner, no grants: every object
# is the new role's.
COPY = """set -eu -o pipefail
for attempt in $(seq 60); do
  PGPASSWORD="$FROM_PASSWORD" psql -X -w -d "$FROM" -Atc 'select 1' >/dev/null 2>&1 && break
  [ "$attempt" = 60 ] && { echo "cannot connect to the recovered database"; exit 1; }
  sleep 2
done
PGPASSWORD="$FROM_PASSWORD" pg_dump -w -Fc -d "$FROM" \\
  | PGPASSWORD="$TO_PASSWORD" pg_restore -w --no-owner --no-privileges --single-transaction --exit-on-error -d "$TO"
echo "copied"
"""
JOB_SECONDS = 3600  # the copy's deadline; past it the Job fails and the restore says so
JOB_KEPT_SECONDS = 86400  # a finished Job (its pod's log) stays this long for a person to read


def copy_job(name: str, namespace: str, image: str, labels: Mapping[str, str], source: tuple[str, str, str],
             target: tuple[str, str, str]) -> dict[str, Any]:
    """The Job that copies one database: `source` and `target` are (host, role and database, password Secret); a
    role's database has its name (pg_hba `sameuser`), each password is read from its Secret in `namespace`."""
    def side(prefix: str, where: tuple[str, str, str]) -> list[dict[str, Any]]:
        host, role, secret = where
        return [{"name": prefix, "value": f"host={host} port=5432 user={role} dbname={role} connect_timeout=10"},
                {"name": f"{prefix}_PASSWORD", "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}}}]

    locked = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
              "runAsUser": 26, "runAsGroup": 26, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}
    resources = {"cpu": "250m", "memory": "256Mi"}
    pod = {"metadata": {"labels": dict(labels)},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
                    "containers": [{"name": "copy", "image": image, "command": ["bash", "-c", COPY],
                                    "env": [*side("FROM", source), *side("TO", target),
                                            {"name": "HOME", "value": "/tmp"}],
                                    "resources": {"requests": resources, "limits": resources},
                                    "securityContext": locked, "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}],
                    "volumes": [{"name": "tmp", "emptyDir": {}}]}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"backoffLimit": 2, "activeDeadlineSeconds": JOB_SECONDS,
                     "ttlSecondsAfterFinished": JOB_KEPT_SECONDS, "template": pod}}
