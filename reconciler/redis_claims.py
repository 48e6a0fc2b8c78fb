"""The redis-server backend, the edge: for a claim bound to a redis-server ServiceProvider, read what exists (the
provider's instance, its admin Secret, the claim's connection Secret), ask lifecycle.redis_backend what should, write
it (the instance lazily, the ACL user through reconciler.redis_acl, the connection Secret), and hand the claim's
Ready condition and status fields back to the claim binder, which writes the claim's status once."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from typing import Any

from controller_runtime.client import Kube
from controller_runtime.compare import up_to_date
from controller_runtime.errors import KubeError
from controller_runtime.kinds import GroupVersionKind, gvk_of
from lifecycle import redis_backend as core
from lifecycle.conditions import Condition
from reconciler.redis_acl import RedisFailure, drop_user, set_user, try_user

__all__ = ["DEPLOYMENT", "RedisBackend"]

log = logging.getLogger("apprafter.claims")

SECRET = GroupVersionKind("v1", "Secret")
ENDPOINT_SLICE = GroupVersionKind("discovery.k8s.io/v1", "EndpointSlice")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # on each EndpointSlice: the Service it belongs to
DEPLOYMENT = GroupVersionKind("apps/v1", "Deployment")
SERVICE = GroupVersionKind("v1", "Service")
PASSWORD_BYTES = 32  # secrets.token_urlsafe: 43 URL-safe characters, fit for a redis:// URL as they are

Provisioned = tuple[Condition, dict[str, Any]]


def new_password() -> str:
    return secrets.token_urlsafe(PASSWORD_BYTES)


class RedisBackend:
    """Provisions claims bound to redis-server providers: instances (in `namespace` unless a provider names
    another) running `image`."""

    backend = core.BACKEND

    def __init__(self, kube: Kube, namespace: str, image: str) -> None:
        self.kube, self.namespace, self.image = kube, namespace, image

    def serves(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> bool:
        return core.serves(claim, provider)

    async def drop(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> str | None:
        """Drop the claim's data: ACL DELUSER its user and UNLINK the keys under its prefix, as the instance's admin.
        None once done; else why not yet (the claim's deletion waits, retried)."""
        if provider is None:
            return "its ServiceProvider is gone: nothing can reach its Redis (create the provider again)"
        instance = core.instance_of(provider, self.namespace)
        if isinstance(instance, list):
            return f"ServiceProvider {provider['metadata']['name']}: " + "; ".join(instance)
        admin = core.admin_password_in(await self.kube.get(SECRET, instance.admin_secret, instance.namespace))
        if admin is None:
            return f"Secret {instance.namespace}/{instance.admin_secret} (the admin password) does not exist"
        service = None
        slices: list[dict[str, Any]] = []
        if instance.integrated:
            service = await self.kube.get(SERVICE, instance.name, instance.namespace)
            slices, _ = await self.kube.list(ENDPOINT_SLICE, instance.namespace,
                                             labels={SERVICE_NAME_LABEL: instance.name})
        address = core.dial(instance, service, slices)
        if isinstance(address, str):
            return address
        account = core.account_of(claim)
        try:
            gone = await drop_user(address[0], address[1], admin, account.user, account.prefix)
        except RedisFailure as e:
            return str(e)
        log.info("data dropped", extra={"controller": "claims", "namespace": claim["metadata"]["namespace"],
                                        "object": claim["metadata"]["name"], "user": account.user, "keys": gone})
        return None

    async def provision(self, claim: Mapping[str, Any], provider: Mapping[str, Any]) -> Provisioned:
        """The claim's Ready condition and status fields, after making what it needs (nothing secret is said)."""
        instance = core.instance_of(provider, self.namespace)
        if isinstance(instance, list):
            return core.waiting("InvalidConfig", f"ServiceProvider {provider['metadata']['name']}: "
                                                 + "; ".join(instance))
        try:
            admin = await self._admin_password(instance)
            if admin is None:
                return core.waiting("AdminSecretMissing", f"Secret {instance.namespace}/{instance.admin_secret} (key "
                                    f"password: the admin password of the Redis at {instance.host}:{instance.port})"
                                    " does not exist: its administrator creates it")
            service = None
            slices: list[dict[str, Any]] = []
            if instance.integrated:
                waits, service = await self._ensure_instance(instance)
                if waits:
                    return core.waiting("InstanceNotReady", waits)
                slices, _ = await self.kube.list(ENDPOINT_SLICE, instance.namespace,
                                                 labels={SERVICE_NAME_LABEL: instance.name})
            address = core.dial(instance, service, slices)
            if isinstance(address, str):
                return core.waiting("InstanceNotReady", address)
            host, port = address
            account = core.account_of(claim)
            secret_name = core.connection_secret_of(claim)
            live_secret = await self.kube.get(SECRET, secret_name, claim["metadata"]["namespace"])
            password = core.password_in(live_secret, account) or new_password()
            try:
                await set_user(host, port, admin, account.user, core.acl_rules(account, password))
                await try_user(host, port, account.user, password)
            except RedisFailure as e:
                if host == instance.host:
                    raise
                # the message names the Service too, not only the cluster IP dialled
                raise RedisFailure(e.reason, f"Service {instance.host}, at its cluster IP: {e}") from e
            secret = core.connection_secret_object(claim, instance, account, password)
            if not up_to_date(live_secret, secret, self.kube.field_manager):
                await self.kube.apply(secret)
        except RedisFailure as e:
            return core.waiting(e.reason, str(e))
        except KubeError as e:
            if e.retryable:
                raise
            return core.waiting("WriteRefused", str(e))
        return core.provisioned(instance, account, secret_name)

    async def _admin_password(self, instance: core.Instance) -> str | None:
        """The instance's admin password; an integrated instance's is generated (once) when its Secret is absent."""
        live = await self.kube.get(SECRET, instance.admin_secret, instance.namespace)
        password = core.admin_password_in(live)
        if password is not None or not instance.integrated:
            return password
        try:
            await self.kube.create(core.admin_secret_object(instance, new_password()))
        except KubeError as e:
            if e.code != 409:  # 409: another pass made it meanwhile; read theirs
                raise
        log.info("admin secret created", extra={"controller": "claims", "namespace": instance.namespace,
                                                "object": instance.admin_secret})
        return core.admin_password_in(await self.kube.get(SECRET, instance.admin_secret, instance.namespace))

    async def _ensure_instance(self, instance: core.Instance) -> tuple[str | None, dict[str, Any] | None]:
        """Apply the instance's Deployment and Service where they differ; why it cannot take users yet (None: it
        can), and its Service as the API server has it (its cluster IP)."""
        deployment: dict[str, Any] | None = None
        service: dict[str, Any] | None = None
        for obj in core.instance_objects(instance, self.image):
            live = await self.kube.get(gvk_of(obj), obj["metadata"]["name"], instance.namespace)
            if not up_to_date(live, obj, self.kube.field_manager):
                live = await self.kube.apply(obj)
                log.info("instance applied", extra={"controller": "claims", "namespace": instance.namespace,
                                                    "object": f"{obj['kind']} {obj['metadata']['name']}"})
            if obj["kind"] == "Deployment":
                deployment = live
            else:
                service = live
        return core.instance_waits(instance, deployment), service
