"""The cloudnative-pg backend's pooler: a CloudNativePG Pooler (PgBouncer) before a provider's shared Cluster. Pure.

One Pooler per Cluster, `type: rw` (to the primary), made with the Cluster on its first claim; every claim's
connection Secret gets a pooled URL through its Service beside the direct one. PgBouncer logs a client in with the
role's own password (CloudNativePG's auth_query, as its `cnpg_pooler_pgbouncer` role with a certificate) and opens
server connections as that role to the database of its name, so the Cluster's pg_hba (`sameuser`) confines a pooled
login exactly as a direct one. Each claim is one (role, database) pool: `default_pool_size`, `max_user_connections`
and `max_db_connections` bound the server connections one claim holds through it, `max_client_conn` the clients of
the whole pooler. CloudNativePG 1.26 writes one `[pgbouncer]` section for every database (no per-user or
per-database entries), so the bound is one for every claim; each role's connection limit (its size) stays
PostgreSQL's bound over its direct and pooled connections together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NamedTuple

from controller_runtime.kinds import GroupVersionKind
from lifecycle.backends.common import PROVIDER_LABEL
from lifecycle.backends.contract import Apply, Delete

__all__ = ["POOLER", "POOLER_SUFFIX", "Pooling", "pooler_host", "pooler_name", "pooler_object", "pooler_writes",
           "pooling_of"]

CNPG = "postgresql.cnpg.io/v1"
POOLER = GroupVersionKind(CNPG, "Pooler")
POOLER_SUFFIX = "-pooler"
LABEL_MAX = 63  # a Service's name is a DNS label: the Pooler's name is its Service's
# Seconds an idle server connection stays open (PgBouncer's default: 600): a claim's database is dropped only once no
# session holds it (CloudNativePG's DROP DATABASE has no FORCE and retries every 30 s), so idle pooled sessions would
# hold an approved drop for ten minutes (30 s held the node test's drop 40 s); 10 s costs a busy app nothing (its
# sessions are never idle that long) and a quiet one a new server login now and then.
SERVER_IDLE_TIMEOUT = 10
LABELS: Mapping[str, str] = {"app.kubernetes.io/component": "pgbouncer", "app.kubernetes.io/managed-by": "apprafter"}


class Pooling(NamedTuple):
    """A provider's pooler (spec.config.pooler with the schema's defaults) and the image it runs."""

    instances: int
    mode: str  # PgBouncer's pool_mode: transaction (the default) or session
    pool_size: int  # server connections one claim (one role and its database) holds through the pooler
    max_client_conn: int  # client connections the pooler takes, every claim's together, per instance
    cpu: str
    memory: str
    image: str


def pooling_of(config: Mapping[str, Any], image: str | None) -> Pooling | None:
    """The pooler a provider's config (with the schema's defaults) asks for; None when it is off or the operator
    has no PgBouncer image."""
    pooler = config.get("pooler") or {}
    if not pooler.get("enabled", True) or not image:
        return None
    resources = pooler.get("resources") or {}
    return Pooling(int(pooler["instances"]), str(pooler["poolMode"]), int(pooler["poolSize"]),
                   int(pooler["maxClientConn"]), str(resources["cpu"]), str(resources["memory"]), image)


def pooler_name(cluster: str) -> str:
    """The Pooler's (and its Service's) name: `<cluster>-pooler`, or for a long Cluster name its first 35
    characters, `-`, 20 hex characters of its SHA-256 and the suffix (a DNS label of 63 at most either way)."""
    plain = f"{cluster}{POOLER_SUFFIX}"
    if len(plain) <= LABEL_MAX:
        return plain
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:20]
    return f"{cluster[:LABEL_MAX - len(POOLER_SUFFIX) - 21].rstrip('-')}-{digest}{POOLER_SUFFIX}"


def pooler_host(cluster: str, namespace: str) -> str:
    """Where a claim's pooled connection goes: the Pooler's Service (CloudNativePG names it as the Pooler)."""
    return f"{pooler_name(cluster)}.{namespace}.svc"


def pooler_object(cluster: Mapping[str, Any], provider: str, pooling: Pooling) -> dict[str, Any]:
    """The live Cluster's Pooler, owned by it (deleting the Cluster deletes it): PgBouncer from our image
    (CloudNativePG's instance manager runs it), Guaranteed, the per-claim bounds and the pooler's client bound as
    PgBouncer parameters."""
    meta = cluster["metadata"]
    resources = {"cpu": pooling.cpu, "memory": pooling.memory}
    size = str(pooling.pool_size)
    parameters = {"default_pool_size": size, "max_user_connections": size, "max_db_connections": size,
                  "max_client_conn": str(pooling.max_client_conn), "server_idle_timeout": str(SERVER_IDLE_TIMEOUT)}
    # no blockOwnerDeletion: that would need `update` on clusters/finalizers (OwnerReferencesPermissionEnforcement)
    owner = {"apiVersion": CNPG, "kind": "Cluster", "name": meta["name"], "uid": meta["uid"], "controller": True}
    return {"apiVersion": CNPG, "kind": "Pooler",
            "metadata": {"name": pooler_name(meta["name"]), "namespace": meta["namespace"],
                         "labels": {**LABELS, "app.kubernetes.io/instance": meta["name"], PROVIDER_LABEL: provider},
                         "ownerReferences": [owner]},
            "spec": {"cluster": {"name": meta["name"]}, "type": "rw", "instances": pooling.instances,
                     "pgbouncer": {"poolMode": pooling.mode, "parameters": parameters},
                     "template": {"metadata": {"labels": dict(LABELS)},
                                  "spec": {"containers": [{"name": "pgbouncer", "image": pooling.image,
                                                           "resources": {"requests": resources,
                                                                         "limits": resources}}]}}}}


def pooler_writes(pooling: Pooling | None, provider: str, cluster: Mapping[str, Any] | None,
                  pooler: Mapping[str, Any] | None) -> tuple[Apply | Delete, ...]:
    """What a provisioning pass writes of the Pooler, after the Cluster: applied once the live Cluster exists (it
    owns the Pooler; CloudNativePG makes its Deployment once the Cluster's certificates are there); with the pooler
    off, an existing Pooler of ours deleted (its clients are cut: a provider's administrator's choice)."""
    meta = (cluster or {}).get("metadata") or {}
    if pooling is not None:
        return (Apply(pooler_object(cluster or {}, provider, pooling)),) if meta.get("uid") else ()
    ours = ((pooler or {}).get("metadata") or {}).get("labels", {}).get(PROVIDER_LABEL) == provider
    return (Delete(POOLER, meta.get("namespace"), pooler_name(str(meta.get("name")))),) if pooler and ours else ()
