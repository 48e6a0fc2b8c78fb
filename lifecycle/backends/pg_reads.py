"""What the cloudnative-pg backend reads: the provider's Cluster and its Pooler, a generation's Database and role
password Secret, and the Job that sets an alternate role up (lifecycle.backends.pg_roles)."""

from __future__ import annotations

from lifecycle.backends.contract import Read
from lifecycle.backends.instance import SECRET
from lifecycle.backends.pg_cluster import CLUSTER, DATABASE, Shared, Tenant
from lifecycle.backends.pg_pooler import POOLER, pooler_name
from lifecycle.backends.pg_roles import JOB, job_name

__all__ = ["cluster_read", "job_read", "pooler_read", "tenant_reads"]


def job_read(config: Shared, alternate: Tenant) -> Read:
    return Read(JOB, config.namespace, job_name(alternate))


def cluster_read(config: Shared) -> Read:
    return Read(CLUSTER, config.namespace, config.name)


def pooler_read(config: Shared) -> Read:
    return Read(POOLER, config.namespace, pooler_name(config.name))


def tenant_reads(config: Shared, tenant: Tenant) -> tuple[Read, Read]:
    """One generation's Database and role password Secret."""
    return Read(DATABASE, config.namespace, tenant.object_name), Read(SECRET, config.namespace, tenant.object_name)
