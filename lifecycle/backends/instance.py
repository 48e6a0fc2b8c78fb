"""A provider's shared server that the operator runs itself (an "integrated" instance: redis-server, versitygw) or
that an administrator runs (`spec.config.address`): where it answers, its admin Secret, its volume, Deployment and
Service, whether it can take users yet, and where the operator dials it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from controller_runtime.kinds import GroupVersionKind
from controller_runtime.quantity import whole_bytes
from lifecycle.backends.common import (
    CLAIM_ANNOTATION,
    PROVIDER_LABEL,
    b64,
    decoded,
    memory_at_least,
    positive_cpu,
    provider_name,
    retried,
    waiting,
)
from lifecycle.backends.contract import Again, Apply, CreateOnce, Hidden, Read, Seen, Step
from renderer.names import NAME_LABEL

__all__ = ["DATA", "DEPLOYMENT", "ENDPOINT_SLICE", "INSTANCE_LABELS", "PVC", "SECRET", "SERVICE", "Instance", "Storage",
           "admin_of", "admin_secret_object", "deployment", "dial", "instance_of", "kept_secret", "on_volume",
           "prepared", "reachable", "reads", "waits"]

SECRET = GroupVersionKind("v1", "Secret")
SERVICE = GroupVersionKind("v1", "Service")
DEPLOYMENT = GroupVersionKind("apps/v1", "Deployment")
ENDPOINT_SLICE = GroupVersionKind("discovery.k8s.io/v1", "EndpointSlice")
PVC = GroupVersionKind("v1", "PersistentVolumeClaim")
DATA = "/data"  # where an integrated server's volume is mounted: everything it keeps is under it
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # on each EndpointSlice: the Service it belongs to
INSTANCE_LABELS: Mapping[str, str] = {"app.kubernetes.io/managed-by": "apprafter"}
MIN_MEMORY = 64 * 2**20
T = TypeVar("T")  # below this a server of ours does not start its users' work
_ADDRESS = re.compile(r"^([A-Za-z0-9.-]+|\[[0-9a-fA-F:.]+\]):([0-9]{1,5})$")  # [::ffff:10.0.0.7] too


class Storage(NamedTuple):
    """An integrated server's volume as its provider (or its claim's size) asks for it."""

    size: str
    storage_class: str | None  # None: the cluster's default StorageClass


class Instance(NamedTuple):
    """A provider's shared server: where it answers, and (integrated) what runs it."""

    provider: str
    component: str  # what it is: redis, s3 (its objects' app.kubernetes.io/component)
    name: str  # its Deployment's and Service's name; its admin Secret is `<name>-admin`
    namespace: str
    host: str
    port: int
    integrated: bool  # False: spec.config.address names a server the administrator runs
    cpu: str
    memory: str
    claim: str = ""  # `<namespace>/<claim>` when it is one claim's own (isolation: instance), else the provider's

    @property
    def admin_secret(self) -> str:
        return f"{self.name}-admin"

    @property
    def meta(self) -> dict[str, Any]:
        """Its objects' name, namespace, labels (and the claim it is, when it is one's: the claim woken by them)."""
        return {"name": self.name, "namespace": self.namespace, "labels": self.labels,
                **({"annotations": {CLAIM_ANNOTATION: self.claim}} if self.claim else {})}

    @property
    def labels(self) -> dict[str, str]:
        return {**INSTANCE_LABELS, "app.kubernetes.io/component": self.component,
                "app.kubernetes.io/instance": self.name, NAME_LABEL: self.component, PROVIDER_LABEL: self.provider}

    @property
    def selector(self) -> dict[str, str]:
        return {"app.kubernetes.io/instance": self.name, NAME_LABEL: self.component}


def instance_of(provider: Mapping[str, Any], config: Mapping[str, Any], component: str, name_key: str,
                namespace: str, port: int) -> Instance | list[str]:
    """The provider's instance from its (defaulted) config: its name from `config[name_key]` (else the provider's),
    its namespace from config (else `namespace`, the platform's), its address from `config.address` when the
    administrator runs it (then its resources are not ours to check); or the problems."""
    name = str(config.get(name_key) or provider_name(provider))
    where = str(config.get("namespace") or namespace)
    resources = config.get("resources") if isinstance(config.get("resources"), Mapping) else {}
    assert isinstance(resources, Mapping)
    host, at = f"{name}.{where}.svc", port
    address = config.get("address")
    if address is not None:
        m = _ADDRESS.match(str(address))
        if not m or not 0 < int(m.group(2)) < 65536:
            return [f"spec.config.address: {address!r} is not host:port"]
        host, at = m.group(1).strip("[]"), int(m.group(2))
    found = Instance(provider_name(provider), component, name, where, host, at, address is None,
                     str(resources.get("cpu") or ""), str(resources.get("memory") or ""))
    if found.integrated:
        problems = [*memory_at_least(found.memory, MIN_MEMORY, "spec.config.resources.memory"),
                    *positive_cpu(found.cpu, "spec.config.resources.cpu")]
        if problems:
            return problems
    return found


def reads(instance: Instance) -> tuple[Read, ...]:
    """Its admin Secret, and for an integrated one its Deployment, Service, the Service's EndpointSlices and its
    volume (`<name>-data`)."""
    admin = Read(SECRET, instance.namespace, instance.admin_secret)
    if not instance.integrated:
        return (admin,)
    return (admin, Read(DEPLOYMENT, instance.namespace, instance.name),
            Read(SERVICE, instance.namespace, instance.name),
            Read(ENDPOINT_SLICE, instance.namespace, None, ((SERVICE_NAME_LABEL, instance.name),)),
            Read(PVC, instance.namespace, f"{instance.name}-data"))


def admin_of(instance: Instance, seen: Seen, made: Mapping[str, str], *, make: bool,
             said: str) -> dict[str, str] | Step:
    """The admin Secret's data once it holds every key of `made`. An integrated instance's is created once from
    `made` (fresh values) when there is none; else the claim waits for its administrator (`said`: what the keys are,
    never their values)."""
    secret = seen.get(reads(instance)[0])
    data = decoded(secret) or {}
    if all(data.get(key) for key in made):
        return data
    where = f"Secret {instance.namespace}/{instance.admin_secret}"
    if instance.integrated and make and secret is None:
        return Step(Again(f"{where} (the admin's credentials) created"),
                    (CreateOnce(admin_secret_object(instance, made)),))
    return waiting("AdminSecretMissing", f"{where} ({said} of the {instance.component} at {instance.host}:"
                   f"{instance.port}) does not exist or holds none: its administrator creates it")


def reachable(instance: Instance, seen: Seen) -> tuple[str, int] | Step:
    """Where the operator dials the instance (`dial`), or the wait until it can (retried: it passes by itself)."""
    if not instance.integrated:
        return instance.host, instance.port
    _, deployment, service, slices, _ = reads(instance)
    found = waits(instance, seen.get(deployment)) or dial(instance, seen.get(service), seen.list(slices))
    return retried("InstanceNotReady", found) if isinstance(found, str) else found


def prepared(instance: Instance, seen: Seen, admin: T | Step, objects: Sequence[dict[str, Any]] = ()
             ) -> tuple[T, tuple[str, int], tuple[Apply, ...]] | Step:
    """For a step on a shared server: its admin, where to dial it and its objects' writes (an integrated one's), or
    the step that waits instead (`admin` when it is one: the admin's credentials are not there yet; or the wait until
    the server answers, with those writes)."""
    if isinstance(admin, Step):
        return admin
    writes = tuple(Apply(obj) for obj in objects) if instance.integrated else ()
    address = reachable(instance, seen)
    return Step(address.then, writes) if isinstance(address, Step) else (admin, address, writes)


def kept_secret(seen: Seen, user: str) -> Hidden:
    """The claim's password: the one its own connection Secret holds for `user`, else the fresh one."""
    kept = seen.connection or {}
    return Hidden(kept["password"] if kept.get("user") == user and kept.get("password") else seen.fresh)


def admin_secret_object(instance: Instance, data: Mapping[str, str]) -> dict[str, Any]:
    """The instance's admin Secret, for the credentials the edge generated when there was none."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {**instance.meta, "name": instance.admin_secret},
            "data": {k: b64(v) for k, v in sorted(data.items())}}


def deployment(instance: Instance, container: Mapping[str, Any],
               volumes: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The Deployment (one replica, recreated: one writer of its data) and the Service of an integrated instance
    running `container` (its resources made Guaranteed here, its security context locked down)."""
    meta = instance.meta
    resources = {"cpu": instance.cpu, "memory": instance.memory}
    locked = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
              "runAsUser": 999, "runAsGroup": 999, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}
    pod: dict[str, Any] = {"automountServiceAccountToken": False, "enableServiceLinks": False,
                           "containers": [{**container, "resources": {"requests": resources, "limits": resources},
                                           "securityContext": locked}]}
    if volumes:
        pod["volumes"] = [dict(v) for v in volumes]
        pod["securityContext"] = {"fsGroup": 999}
    ports = [{"name": p["name"], "port": p["containerPort"], "targetPort": p["name"], "protocol": "TCP"}
             for p in container.get("ports") or []]
    return [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
                "replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": instance.selector},
                "template": {"metadata": {"labels": instance.labels}, "spec": pod}}},
            {"apiVersion": "v1", "kind": "Service", "metadata": meta,
             "spec": {"selector": instance.selector, "ports": ports}}]


def on_volume(instance: Instance, container: Mapping[str, Any], storage: Storage,
              live: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The volume of an integrated server that keeps data (its PersistentVolumeClaim `<name>-data`, ReadWriteOnce,
    made before the pod that mounts it), then its Deployment and Service with the volume at DATA. The request is
    never below the `live` volume's (a volume never shrinks: the API server refuses that): a smaller `storage`
    leaves it as it is."""
    volume = reads(instance)[-1]
    have = str(((live or {}).get("spec") or {}).get("resources", {}).get("requests", {}).get("storage") or "")
    size = have if (whole_bytes(have) or 0) > (whole_bytes(storage.size) or 0) else storage.size
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
            **({"storageClassName": storage.storage_class} if storage.storage_class else {})}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {**instance.meta, "name": volume.name},
           "spec": spec}
    mounted = {**container, "volumeMounts": [{"name": "data", "mountPath": DATA}]}
    claimed = {"name": "data", "persistentVolumeClaim": {"claimName": volume.name}}
    return [pvc, *deployment(instance, mounted, [claimed])]


def waits(instance: Instance, live: Mapping[str, Any] | None) -> str | None:
    """Why an integrated instance cannot take users yet (None: its Deployment has an available replica)."""
    if not instance.integrated:
        return None
    where = f"Deployment {instance.namespace}/{instance.name}"
    if live is None:
        return f"{where} is being created"
    if int((live.get("status") or {}).get("availableReplicas") or 0) < 1:
        return f"{where} has no available replica yet"
    return None


def dial(instance: Instance, service: Mapping[str, Any] | None,
         endpoint_slices: Sequence[Mapping[str, Any]] = ()) -> tuple[str, int] | str:
    """Where the operator connects to the instance as its admin (`host`, `port`), or why it cannot yet. A server the
    administrator runs: its `address`. An integrated instance: the cluster IP of the Service the operator made (read
    back from that Service), not its DNS name: the operator needs no cluster DNS, only to be where Services answer,
    which every pod is (the apps' Secrets keep the DNS name, `instance.host`: in a cluster both reach the same pod).
    Only once one of the Service's endpoints (its EndpointSlices) is ready: before that nothing would answer, and a
    cluster IP with no endpoint is dialled into the void until the connect times out."""
    if not instance.integrated:
        return instance.host, instance.port
    ip = str(((service or {}).get("spec") or {}).get("clusterIP") or "")
    if ip in ("", "None"):
        return f"Service {instance.namespace}/{instance.name} has no cluster IP yet"
    if not any((endpoint.get("conditions") or {}).get("ready") for piece in endpoint_slices
               for endpoint in piece.get("endpoints") or []):
        return f"Service {instance.namespace}/{instance.name} has no ready endpoint yet"
    return ip, instance.port
