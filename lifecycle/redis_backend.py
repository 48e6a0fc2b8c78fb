"""The redis-server backend's decisions (issue 31 item 3): a provider's shared instance, a claim's ACL account, its
connection Secret and what its status says. No I/O: reconciler/redis_claims.py reads, calls these, writes.

One instance per ServiceProvider (lazy: made for its first claim), Guaranteed, `--maxmemory` below its memory limit.
Each claim is one ACL user confined to its key and channel prefix. Every name is derived from the claim's namespace
and name, so re-creating the same app and need re-binds to the same user and keys.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from lifecycle.binding import PROVISIONED
from lifecycle.conditions import Condition
from renderer.manifests.meta import connection_secret
from renderer.names import NAME_LABEL

__all__ = ["ADMIN_USER", "BACKEND", "DEFAULTS", "INSTANCE_LABELS", "PERMISSIONS", "PORT", "PROVIDER_LABEL",
           "Account", "Instance", "account_of", "acl_rules", "admin_password_in", "admin_secret",
           "admin_secret_object", "connection", "connection_secret_object", "connection_secret_of", "dial",
           "instance_objects", "instance_of", "instance_waits", "max_memory", "password_in", "provisioned", "serves",
           "waiting"]

BACKEND = "redis-server"  # the ServiceProvider spec.backend this module serves
PORT = 6379
ADMIN_USER = "default"  # the instance's admin: Redis' default user, with the generated password
PROVIDER_LABEL = "apprafter.io/service-provider"  # on an instance's objects: whose it is
INSTANCE_LABELS: Mapping[str, str] = {"app.kubernetes.io/component": "redis",
                                      "app.kubernetes.io/managed-by": "apprafter"}
# spec.config's keys (lifecycle/schema/serviceprovider.cue #RedisConfig) and the defaults of those a provider leaves
# out: the one place they are written down (server: the provider's name; namespace: the platform's redis services
# namespace, renderer.context provider_namespaces).
DEFAULTS: Mapping[str, Any] = {"server": "", "resources.memory": "256Mi", "resources.cpu": "250m",
                               "maxmemoryPercent": 75}
MIN_MEMORY = 64 * 2**20
MARGIN_FLOOR = 32 * 2**20
# Keys and values kept without expiry; keys with a TTL are evicted first (least recently used) when maxmemory is
# reached, then writes fail with OOM: one tenant's cache never silently evicts another's data without a TTL.
EVICTION = "volatile-lru"
_UNITS = {"": 1, "k": 1000, "M": 1000**2, "G": 1000**3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_QUANTITY = re.compile(r"^([0-9]+)(|k|M|G|Ki|Mi|Gi)$")
_CPU = re.compile(r"^([0-9]+m|[0-9]+(\.[0-9]{1,3})?)$")
_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_ADDRESS = re.compile(r"^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):([0-9]{1,5})$")

# What a claim's user may run (Redis' ACL categories, `ACL CAT`): everything on its own keys and channels, minus
# the categories that reach the whole instance or its configuration (@dangerous: KEYS, FLUSHALL, FLUSHDB, CONFIG,
# DEBUG, MODULE, ACL, CLIENT LIST/KILL, MONITOR, SORT with patterns, SHUTDOWN, ...; @admin), minus the commands that
# show other tenants' key or channel names (SCAN, RANDOMKEY, DBSIZE, PUBSUB) or switch databases (SELECT, MOVE,
# SWAPDB), minus FUNCTION (libraries are instance-wide) and SCRIPT FLUSH/KILL/DEBUG. EVAL/EVALSHA stay: a script's
# commands run with the caller's ACL. INFO comes back: queue libraries (BullMQ, Sidekiq) read the server's version
# from it at connect; it shows instance-wide counters, never a key name or value.
PERMISSIONS = ("+@all", "-@dangerous", "-@admin", "-scan", "-randomkey", "-dbsize", "-pubsub", "-select", "-move",
               "-function", "-script|flush", "-script|kill", "-script|debug", "+info")


class Instance(NamedTuple):
    """A provider's Redis: where it answers, and (integrated) what runs it."""

    provider: str
    name: str  # spec.config.server: its Deployment's and Service's name, its admin Secret's `<name>-admin`
    namespace: str  # spec.config.namespace, else the platform's redis services namespace
    host: str
    port: int
    integrated: bool  # False: spec.config.address names a Redis the administrator runs
    memory: str
    cpu: str
    max_memory: int  # bytes

    @property
    def admin_secret(self) -> str:
        return admin_secret(self.name)


class Account(NamedTuple):
    """A claim's ACL user and the prefix of its keys and channels."""

    user: str
    prefix: str


def serves(claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> bool:
    """Whether this backend provisions the claim: a redis claim bound to a redis-server provider."""
    return (provider is not None and (provider.get("spec") or {}).get("backend") == BACKEND
            and (claim.get("spec") or {}).get("type") == "redis")


def admin_secret(server: str) -> str:
    """The Secret (in the instance's namespace) whose key `password` is the instance's admin password."""
    return f"{server}-admin"


def _bytes(quantity: str) -> int | None:
    m = _QUANTITY.match(quantity)
    return int(m.group(1)) * _UNITS[m.group(2)] if m else None


def max_memory(limit: int, percent: int) -> int:
    """`--maxmemory` for a container memory limit: `percent` of it, and at least 32 MiB below it (what Redis uses
    beside its data: client buffers, up to 32 MiB per pub/sub subscriber before it is cut, allocator fragmentation;
    the default 75 % leaves a quarter)."""
    return min(limit * percent // 100, limit - MARGIN_FLOOR)


def _text(config: Mapping[str, Any], *path: str) -> str:
    value: Any = config
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return str(value if value is not None else DEFAULTS[".".join(path)])


def instance_of(provider: Mapping[str, Any], namespace: str) -> Instance | list[str]:
    """The provider's instance, or what is wrong with its spec.config (each `spec.config.<key>: problem`);
    `namespace`: the platform's redis services namespace, where it runs unless spec.config.namespace says."""
    name = str((provider.get("metadata") or {}).get("name") or "")
    config = (provider.get("spec") or {}).get("config") or {}
    config = config if isinstance(config, Mapping) else {}
    server, where = _text(config, "server") or name, str(config.get("namespace") or namespace)
    memory, cpu = _text(config, "resources", "memory"), _text(config, "resources", "cpu")
    percent = config.get("maxmemoryPercent", DEFAULTS["maxmemoryPercent"])
    problems = []
    limit = _bytes(memory)
    if limit is None or limit < MIN_MEMORY:
        problems.append(f"spec.config.resources.memory: {memory!r} is not a memory quantity of at least 64Mi")
    if not _CPU.match(cpu) or cpu in ("0", "0m"):
        problems.append(f"spec.config.resources.cpu: {cpu!r} is not a CPU quantity (250m, 1, 1.5)")
    if not isinstance(percent, int) or isinstance(percent, bool) or not 10 <= percent <= 90:
        problems.append(f"spec.config.maxmemoryPercent: {percent!r} is not a whole percentage from 10 to 90")
    for key, value in (("server", server), ("namespace", where)):
        if not _LABEL.match(value):
            problems.append(f"spec.config.{key}: {value!r} is not a DNS label (a-z0-9-, 63 at most)")
    address = config.get("address")
    host, port = f"{server}.{where}.svc", PORT
    if address is not None:
        m = _ADDRESS.match(str(address))
        if not m or not 0 < int(m.group(2)) < 65536:
            problems.append(f"spec.config.address: {address!r} is not host:port")
        else:
            host, port = m.group(1).strip("[]"), int(m.group(2))
    if problems:
        return problems
    assert limit is not None and isinstance(percent, int)
    return Instance(name, server, where, host, port, address is None, memory, cpu, max_memory(limit, percent))


def _labels(instance: Instance) -> dict[str, str]:
    return {**INSTANCE_LABELS, "app.kubernetes.io/instance": instance.name, NAME_LABEL: "redis",
            PROVIDER_LABEL: instance.provider}


def instance_objects(instance: Instance, image: str) -> list[dict[str, Any]]:
    """The Deployment and Service of an integrated instance (its admin Secret is `admin_secret_object`'s)."""
    labels = _labels(instance)
    selector = {"app.kubernetes.io/instance": instance.name, NAME_LABEL: "redis"}
    meta = {"name": instance.name, "namespace": instance.namespace, "labels": labels}
    resources = {"cpu": instance.cpu, "memory": instance.memory}
    # No persistence (a cache): nothing is written, the root file system stays read-only. The admin is the default
    # user, its password from the Secret (the kubelet expands $(ADMIN_PASSWORD); argv never carries it in the spec).
    args = ["--port", str(PORT), "--bind", "*", "-::*", "--protected-mode", "no", "--save", "", "--appendonly", "no",
            "--maxmemory", str(instance.max_memory), "--maxmemory-policy", EVICTION,
            "--requirepass", "$(ADMIN_PASSWORD)"]
    container = {
        "name": "redis", "image": image, "args": args,
        "env": [{"name": "ADMIN_PASSWORD", "valueFrom": {"secretKeyRef": {"name": instance.admin_secret,
                                                                          "key": "password"}}}],
        "ports": [{"name": "redis", "containerPort": PORT, "protocol": "TCP"}],
        "resources": {"requests": resources, "limits": resources},  # Guaranteed QoS
        "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 10, "failureThreshold": 6},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
    }
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
        "replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": selector},
        "template": {"metadata": {"labels": labels}, "spec": {
            "automountServiceAccountToken": False, "enableServiceLinks": False, "containers": [container]}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {
        "selector": selector, "ports": [{"name": "redis", "port": PORT, "targetPort": "redis", "protocol": "TCP"}]}}
    return [deployment, service]


def admin_secret_object(instance: Instance, password: str) -> dict[str, Any]:
    """The instance's admin Secret, for the password the edge generated when there was none."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": instance.admin_secret, "namespace": instance.namespace, "labels": _labels(instance)},
            "data": {"password": _b64(password)}}


def instance_waits(instance: Instance, deployment: Mapping[str, Any] | None) -> str | None:
    """Why an integrated instance cannot take users yet (None: its Deployment has an available replica)."""
    if not instance.integrated:
        return None
    where = f"Deployment {instance.namespace}/{instance.name}"
    if deployment is None:
        return f"{where} is being created"
    status = deployment.get("status") or {}
    if int(status.get("availableReplicas") or 0) < 1:
        return f"{where} has no available replica yet"
    return None


def dial(instance: Instance, service: Mapping[str, Any] | None,
         endpoint_slices: Sequence[Mapping[str, Any]] = ()) -> tuple[str, int] | str:
    """Where the operator connects to the instance as its admin (`host`, `port`), or why it cannot yet. A Redis the
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
    return ip, PORT


def account_of(claim: Mapping[str, Any]) -> Account:
    """The claim's user `<namespace>.<claim>` and key prefix `<namespace>.<claim>:` (a namespace has no dot, so no
    two claims' users or prefixes can be the same, and the colon ends the prefix: `a:` never covers `a-b:`)."""
    meta = claim.get("metadata") or {}
    user = f"{meta['namespace']}.{meta['name']}"
    return Account(user, f"{user}:")


def acl_rules(account: Account, password: str) -> list[str]:
    """ACL SETUSER's rules for the account (one command: the user is replaced whole, atomically)."""
    return ["reset", "on", f">{password}", f"~{account.prefix}*", f"&{account.prefix}*", *PERMISSIONS]


def connection_secret_of(claim: Mapping[str, Any]) -> str:
    """The name of the claim's connection Secret, `{app}-{need}-conn` (the name the renderer's env refers to)."""
    meta = claim.get("metadata") or {}
    need = str((claim.get("spec") or {}).get("type") or "")
    name = str(meta.get("name") or "")
    app = (meta.get("labels") or {}).get(NAME_LABEL) or (name[: -len(need) - 1] if name.endswith(f"-{need}") else name)
    return connection_secret(str(app), need)


def connection(instance: Instance, account: Account) -> dict[str, Any]:
    """status.connection: where the claim connects, as who, under which prefix, and the Secret (never a password)."""
    return {"host": instance.host, "port": instance.port, "user": account.user, "prefix": account.prefix}


def connection_secret_object(claim: Mapping[str, Any], instance: Instance, account: Account,
                             password: str) -> dict[str, Any]:
    """The claim's connection Secret in its namespace, owned by the claim (it goes with the claim; the user and the
    keys stay in Redis)."""
    meta = claim["metadata"]
    host = f"[{instance.host}]" if ":" in instance.host else instance.host
    fields = {"url": f"redis://{account.user}:{password}@{host}:{instance.port}/0", "host": instance.host,
              "port": str(instance.port), "user": account.user, "password": password, "prefix": account.prefix}
    owner = {"apiVersion": claim["apiVersion"], "kind": claim["kind"], "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": connection_secret_of(claim), "namespace": meta["namespace"],
                         "labels": {PROVIDER_LABEL: instance.provider}, "ownerReferences": [owner]},
            "data": {k: _b64(v) for k, v in sorted(fields.items())}}


def password_in(secret: Mapping[str, Any] | None, account: Account) -> str | None:
    """The password a connection Secret already holds for this account (None: none, or another user's)."""
    data = (secret or {}).get("data") or {}
    try:
        user = base64.b64decode(data.get("user") or "").decode()
        password = base64.b64decode(data.get("password") or "").decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return password if user == account.user and password else None


def admin_password_in(secret: Mapping[str, Any] | None) -> str | None:
    """The admin password an admin Secret holds (None: no Secret, or no usable `password` key)."""
    raw = ((secret or {}).get("data") or {}).get("password")
    try:
        password = base64.b64decode(raw or "").decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return password or None


def provisioned(instance: Instance, account: Account, secret: str) -> tuple[Condition, dict[str, Any]]:
    """The Ready condition and status fields of a claim whose user works and whose Secret is written."""
    return (Condition(PROVISIONED, "True", "Provisioned",
                      f"ACL user {account.user} on {instance.host}:{instance.port}, keys and channels under "
                      f"{account.prefix}; connection in Secret {secret}"),
            {"ready": True, "connection": {**connection(instance, account), "secretName": secret}})


def waiting(reason: str, message: str) -> tuple[Condition, dict[str, Any]]:
    """The Ready condition and status fields of a claim the backend could not provision yet (no secret material in
    `message`: the callers say what failed, never a password)."""
    return Condition(PROVISIONED, "False", reason, message), {"ready": False}


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()
