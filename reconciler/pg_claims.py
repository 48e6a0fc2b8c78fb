"""The cloudnative-pg backend, the edge: for a claim bound to a cloudnative-pg ServiceProvider, read what exists (the
provider's Cluster, the claim's password Secret and Database in the Cluster's namespace, its connection Secret), ask
lifecycle.pg_backend what should, write it (the password Secret once, the Cluster with the claim's role, the Database,
the connection Secret), and hand the claim's Ready condition and status fields back to the claim binder, which writes
the claim's status once. CloudNativePG makes the role and the database; this module never connects to PostgreSQL."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from typing import Any

from controller_runtime.client import Kube
from controller_runtime.compare import up_to_date
from controller_runtime.errors import KubeError
from controller_runtime.kinds import GroupVersionKind
from lifecycle import pg_backend as core
from lifecycle.conditions import Condition
from reconciler.backends import drop_pg_database_and_role

__all__ = ["CLUSTER", "DATABASE", "PgBackend"]

log = logging.getLogger("apprafter.claims")

SECRET = GroupVersionKind("v1", "Secret")
CLUSTER = GroupVersionKind(core.CNPG, "Cluster")
DATABASE = GroupVersionKind(core.CNPG, "Database")
PASSWORD_BYTES = 32  # secrets.token_urlsafe: 43 URL-safe characters, fit for a postgresql:// URL as they are

Provisioned = tuple[Condition, dict[str, Any]]


def new_password() -> str:
    return secrets.token_urlsafe(PASSWORD_BYTES)


class PgBackend:
    """Provisions claims bound to cloudnative-pg providers: Clusters (in `namespace` unless a provider names another)
    running `image`."""

    backend = core.BACKEND

    def __init__(self, kube: Kube, namespace: str, image: str) -> None:
        self.kube, self.namespace, self.image = kube, namespace, image

    def serves(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> bool:
        return core.serves(claim, provider)

    async def drop(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> str | None:
        """Drop the claim's database and role (reconciler.backends' hook); None once done, else why not yet."""
        return await drop_pg_database_and_role(claim, provider)

    async def provision(self, claim: Mapping[str, Any], provider: Mapping[str, Any]) -> Provisioned:
        """The claim's Ready condition and status fields, after making what it needs (nothing secret is said)."""
        shared = core.shared_of(provider, self.namespace)
        if isinstance(shared, list):
            return core.waiting("InvalidConfig", f"ServiceProvider {provider['metadata']['name']}: "
                                                 + "; ".join(shared))
        tenant = core.tenant_of(claim)
        try:
            # the password first: CloudNativePG reads it when the role appears in the Cluster
            password_secret, password = await self._password(shared, tenant)
            cluster = await self._apply_cluster(shared, tenant)
            database = await self._apply(core.database_object(shared, tenant), DATABASE)
            waits = core.readiness(shared, tenant, cluster, password_secret, database)
            if waits is not None:
                return core.waiting(*waits)
            secret_name = core.connection_secret_of(claim)
            live = await self.kube.get(SECRET, secret_name, claim["metadata"]["namespace"])
            secret = core.connection_secret_object(claim, shared, tenant, password)
            if not up_to_date(live, secret, self.kube.field_manager):
                await self.kube.apply(secret)
        except KubeError as e:
            if e.retryable:
                raise
            return core.waiting("WriteRefused", str(e))
        return core.provisioned(shared, tenant, secret_name)

    async def _password(self, shared: core.Shared, tenant: core.Tenant) -> tuple[dict[str, Any], str]:
        """The role's password Secret and password, generated once when the Secret is absent (or holds none)."""
        live = await self.kube.get(SECRET, tenant.object_name, shared.namespace)
        password = core.password_in(live, tenant)
        if live is not None and password is not None:
            return live, password
        if live is None:
            try:
                await self.kube.create(core.password_secret_object(shared, tenant, new_password()))
            except KubeError as e:
                if e.code != 409:  # 409: another pass made it meanwhile; read theirs
                    raise
        else:  # a Secret of that name without a usable password for this role: ours to put right
            await self.kube.apply(core.password_secret_object(shared, tenant, new_password()))
        log.info("role password secret written", extra={"controller": "claims", "namespace": shared.namespace,
                                                         "object": tenant.object_name})
        live = await self.kube.get(SECRET, tenant.object_name, shared.namespace)
        password = core.password_in(live, tenant)
        if live is None or password is None:
            raise KubeError(f"Secret {shared.namespace}/{tenant.object_name} changed while it was written", 409)
        return live, password

    async def _apply_cluster(self, shared: core.Shared, tenant: core.Tenant) -> dict[str, Any] | None:
        """The Cluster with the claim's role, applied where it differs (lazily made on the first claim)."""
        live = await self.kube.get(CLUSTER, shared.name, shared.namespace)
        wanted = core.cluster_object(shared, self.image, tenant, live)
        if up_to_date(live, wanted, self.kube.field_manager):
            return live
        applied = await self.kube.apply(wanted)
        log.info("cluster applied", extra={"controller": "claims", "namespace": shared.namespace,
                                           "object": f"Cluster {shared.name}", "role": tenant.name})
        return applied

    async def _apply(self, obj: dict[str, Any], kind: GroupVersionKind) -> dict[str, Any] | None:
        meta = obj["metadata"]
        live = await self.kube.get(kind, meta["name"], meta["namespace"])
        if up_to_date(live, obj, self.kube.field_manager):
            return live
        log.info("applied", extra={"controller": "claims", "namespace": meta["namespace"],
                                   "object": f"{obj['kind']} {meta['name']}"})
        return await self.kube.apply(obj)
