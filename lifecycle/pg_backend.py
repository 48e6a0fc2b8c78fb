"""The cloudnative-pg backend's decisions (issue 31 item 2): a provider's shared CloudNativePG Cluster, a claim's role
and database, their password Secret, the claim's connection Secret and what its status says. No I/O:
reconciler/pg_claims.py reads, calls these, writes.

One Cluster per ServiceProvider (lazy: made for its first claim), Guaranteed, `shared_buffers` a share of its memory
limit. Each claim is one login role and one database of the same name, owned by it (CloudNativePG's managed roles and
Database resources). The Cluster's pg_hba lets a role reach only the database of its own name (`sameuser`), so no
claim reaches another's database. Every name is derived from the claim's namespace and name, so re-creating the same
app and need re-binds to the same role, password and database. When lifecycle.retention lets a deleted claim's data go,
`drop_step` says what to write next, step by step on CloudNativePG's word: the database, then the role, then their
resources.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import quote

from lifecycle.binding import PROVISIONED
from lifecycle.conditions import Condition, find_condition
from lifecycle.redis_backend import PROVIDER_LABEL, connection_secret_of
from renderer.names import NAME_LABEL

__all__ = ["BACKEND", "CLUSTER_LABELS", "CNPG", "DEFAULTS", "HBA", "KEEPER_ROLE", "NUDGE_ANNOTATION", "PORT",
           "PROVIDER_LABEL", "DropStep", "Shared", "Tenant", "cluster_object", "connection",
           "connection_secret_object", "connection_secret_of", "database_due", "database_object", "drop_step",
           "password_in", "password_secret_object", "provisioned", "readiness", "role_entry", "serves",
           "shared_buffers", "shared_of", "tenant_of", "waiting"]

BACKEND = "cloudnative-pg"  # the ServiceProvider spec.backend this module serves
CNPG = "postgresql.cnpg.io/v1"
PORT = 5432
CLUSTER_LABELS: Mapping[str, str] = {"app.kubernetes.io/component": "postgresql",
                                     "app.kubernetes.io/managed-by": "apprafter"}
CLAIM_ANNOTATION = "apprafter.io/claim"  # on a claim's password Secret and Database: `<namespace>/<claim>`
# spec.config's keys (lifecycle/schema/serviceprovider.cue #CloudNativePGConfig) and the defaults of those a provider
# leaves out: the one place they are written down (cluster: the provider's name; namespace: the platform's pg services
# namespace, renderer.context provider_namespaces).
DEFAULTS: Mapping[str, Any] = {"cluster": "", "instances": 1, "storage.size": "1Gi", "resources.cpu": "250m",
                               "resources.memory": "256Mi", "sharedBuffersPercent": 25}
MIN_MEMORY = 128 * 2**20
MIN_STORAGE = 2**20
# pg_hba.conf rules before CloudNativePG's fallback (`host all all all scram-sha-256`): a TCP login reaches only the
# database named as its role (every claim's role and database share a name), anything else over TCP is refused.
# CloudNativePG's own fixed rules come first (the local socket, streaming_replica's and the pooler's certificates).
# The entry that stands in spec.managed.roles when a drop would empty it: a role no claim can have (no dot), kept
# absent; CloudNativePG reconciles and reports no roles at all for an empty list.
KEEPER_ROLE = "apprafter_no_role"
# On the Cluster, when a drop waits on a role CloudNativePG lists pending-reconciliation: the time (epoch seconds) the
# operator touched it last. CloudNativePG's DROP ROLE writes nothing new to the Cluster's status, so its instance
# manager may not look again (and list the role reconciled) until the Cluster changes; this change is that nudge, made
# at most every NUDGE_SECONDS.
NUDGE_ANNOTATION = "apprafter.io/roles-nudged"
NUDGE_SECONDS = 10
HBA = ("host sameuser all all scram-sha-256", "host all all all reject")
IDENTIFIER_MAX = 63  # bytes of a PostgreSQL identifier (NAMEDATALEN - 1: a longer one is cut short silently)
HASH_CHARS = 20  # hex characters of SHA-256 in a hashed name: 80 bits
_UNITS = {"": 1, "k": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
          "Ti": 2**40}
_QUANTITY = re.compile(r"^([0-9]+)(|k|M|G|T|Ki|Mi|Gi|Ti)$")
_CPU = re.compile(r"^([0-9]+m|[0-9]+(\.[0-9]{1,3})?)$")
_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


class Shared(NamedTuple):
    """A provider's shared CloudNativePG Cluster."""

    provider: str
    name: str  # spec.config.cluster
    namespace: str  # spec.config.namespace, else the platform's pg services namespace
    instances: int
    storage_size: str
    storage_class: str | None
    cpu: str
    memory: str
    shared_buffers: str  # e.g. "64MB"

    @property
    def host(self) -> str:
        """Its read-write Service (CloudNativePG's `<cluster>-rw`: always the primary)."""
        return f"{self.name}-rw.{self.namespace}.svc"


class Tenant(NamedTuple):
    """A claim's role and database (one name), and the name of its objects in the Cluster's namespace."""

    name: str  # the role and the database
    object_name: str  # its password Secret and its Database resource
    claim: str  # `<namespace>/<claim>`


def serves(claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> bool:
    """Whether this backend provisions the claim: a pg claim bound to a cloudnative-pg provider."""
    return (provider is not None and (provider.get("spec") or {}).get("backend") == BACKEND
            and (claim.get("spec") or {}).get("type") == "pg")


def _bytes(quantity: str) -> int | None:
    m = _QUANTITY.match(quantity)
    return int(m.group(1)) * _UNITS[m.group(2)] if m else None


def shared_buffers(limit: int, percent: int) -> str:
    """`shared_buffers` for a memory limit: `percent` of it in whole MB (PostgreSQL's MB are MiB), at least 1."""
    return f"{max(limit * percent // 100 // 2**20, 1)}MB"


def _value(config: Mapping[str, Any], *path: str) -> Any:
    value: Any = config
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if value is not None else DEFAULTS[".".join(path)]


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def shared_of(provider: Mapping[str, Any], namespace: str) -> Shared | list[str]:
    """The provider's Cluster, or what is wrong with its spec.config (each `spec.config.<key>: problem`);
    `namespace`: the platform's pg services namespace, where it runs unless spec.config.namespace says."""
    name = str((provider.get("metadata") or {}).get("name") or "")
    config = (provider.get("spec") or {}).get("config") or {}
    config = config if isinstance(config, Mapping) else {}
    cluster, where = str(_value(config, "cluster") or name), str(config.get("namespace") or namespace)
    memory, cpu = str(_value(config, "resources", "memory")), str(_value(config, "resources", "cpu"))
    size = str(_value(config, "storage", "size"))
    storage = config.get("storage") if isinstance(config.get("storage"), Mapping) else {}
    assert isinstance(storage, Mapping)
    storage_class = storage.get("storageClassName")
    instances, percent = _value(config, "instances"), _value(config, "sharedBuffersPercent")
    problems = []
    limit = _bytes(memory)
    if limit is None or limit < MIN_MEMORY:
        problems.append(f"spec.config.resources.memory: {memory!r} is not a memory quantity of at least 128Mi")
    if not _CPU.match(cpu) or cpu in ("0", "0m"):
        problems.append(f"spec.config.resources.cpu: {cpu!r} is not a CPU quantity (250m, 1, 1.5)")
    if (_bytes(size) or 0) < MIN_STORAGE:
        problems.append(f"spec.config.storage.size: {size!r} is not a storage quantity of at least 1Mi")
    if not _whole(instances, 1, 9):
        problems.append(f"spec.config.instances: {instances!r} is not a whole number from 1 to 9")
    if not _whole(percent, 5, 40):
        problems.append(f"spec.config.sharedBuffersPercent: {percent!r} is not a whole percentage from 5 to 40")
    for key, value in (("cluster", cluster), ("namespace", where), ("storage.storageClassName", storage_class)):
        if value is not None and not _LABEL.match(str(value)):
            problems.append(f"spec.config.{key}: {value!r} is not a DNS label (a-z0-9-, 63 at most)")
    if problems:
        return problems
    assert limit is not None and isinstance(percent, int) and isinstance(instances, int)
    return Shared(name, cluster, where, instances, size, None if storage_class is None else str(storage_class), cpu,
                  memory, shared_buffers(limit, percent))


def tenant_of(claim: Mapping[str, Any]) -> Tenant:
    """The claim's role and database: `<namespace>.<claim>` (`shop.cart-pg`) when that is at most 62 bytes; else its
    first 42 bytes, `-` and 20 hex characters of the SHA-256 of `<namespace>/<claim>`: exactly 63 bytes. A namespace
    has no dot, so no two plain names are the same; a hashed name is longer than any plain one, so never one of
    them; two hashed names are the same only if 80 bits of SHA-256 are. No name can be one PostgreSQL or
    CloudNativePG reserves (postgres, app, pg_*, cnpg_*, streaming_replica: none has a dot). Its objects in the
    Cluster's namespace are named the same (a DNS subdomain), or `claim-<hash>` for a hashed one."""
    meta = claim.get("metadata") or {}
    namespace, name = str(meta["namespace"]), str(meta["name"])
    plain = f"{namespace}.{name}"
    if len(plain.encode()) < IDENTIFIER_MAX:
        return Tenant(plain, plain, f"{namespace}/{name}")
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:HASH_CHARS]
    return Tenant(f"{plain[:IDENTIFIER_MAX - HASH_CHARS - 1]}-{digest}", f"claim-{digest}", f"{namespace}/{name}")


def _labels(shared: Shared) -> dict[str, str]:
    return {**CLUSTER_LABELS, "app.kubernetes.io/instance": shared.name, NAME_LABEL: "postgresql",
            PROVIDER_LABEL: shared.provider}


def role_entry(tenant: Tenant) -> dict[str, Any]:
    """The claim's entry in the Cluster's spec.managed.roles: a login role, its password from its Secret, no other
    attribute (no superuser, createdb, createrole, replication, bypassrls: CloudNativePG's defaults)."""
    return {"name": tenant.name, "ensure": "present", "login": True, "passwordSecret": {"name": tenant.object_name},
            "comment": f"apprafter claim {tenant.claim}"}


def cluster_object(shared: Shared, image: str, tenant: Tenant,
                   live: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The provider's Cluster with the claim's role added to the roles the live one manages (kept, sorted by name):
    a role stays when its claim goes (its data outlives the claim), and one claim's pass never drops another's.
    The live resourceVersion rides along, so a concurrent pass's roles are never overwritten unseen (409: again)."""
    roles = _roles(live)
    roles[tenant.name] = role_entry(tenant)
    return _cluster(shared, image, roles, live)


def _roles(live: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The live Cluster's spec.managed.roles by name."""
    return {str(role.get("name")): dict(role) for role in
            ((((live or {}).get("spec") or {}).get("managed") or {}).get("roles") or []) if isinstance(role, Mapping)}


def major(image: str) -> str:
    """The PostgreSQL major an image's tag carries (CloudNativePG reads it the same way): `15` of `...:15.4-1`."""
    tag = image.rsplit("/", 1)[-1].partition("@")[0].partition(":")[2]
    return re.split(r"[.\-]", tag, maxsplit=1)[0]


def kept(shared: Shared, image: str, live: Mapping[str, Any] | None) -> tuple[str, str]:
    """(image, storage size) to write: the ones asked for, but never another PostgreSQL major than the live Cluster
    runs (a major upgrade rewrites the data: an administrator's act, not a side effect of an operator's new
    default image) nor a smaller volume (a volume never shrinks): both refused, the live ones kept."""
    spec = (live or {}).get("spec") or {}
    running = spec.get("imageName")
    if isinstance(running, str) and running and major(running) != major(image):
        image = running
    size = shared.storage_size
    have = (spec.get("storage") or {}).get("size")
    if isinstance(have, str) and (_bytes(have) or 0) > (_bytes(size) or 0):
        size = have
    return image, size


def shrinks(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why a change of a cloudnative-pg ServiceProvider from `old` to `new` is refused (None when it is not): a
    smaller `storage.size` (the instances' volumes never shrink; the backend keeps the live size regardless)."""
    sizes = [_value((provider.get("spec") or {}).get("config") or {}, "storage", "size") for provider in (old, new)]
    if any((provider.get("spec") or {}).get("backend") != BACKEND for provider in (old, new)):
        return None
    before, after = (_bytes(str(size)) for size in sizes)
    if before is None or after is None or after >= before:
        return None
    return (f"{sizes[1]} is smaller than {sizes[0]}: a volume never shrinks (the Cluster keeps {sizes[0]}); move the "
            "data to a new provider to use less")


def _cluster(shared: Shared, image: str, roles: Mapping[str, Mapping[str, Any]],
             live: Mapping[str, Any] | None, nudged: int | None = None) -> dict[str, Any]:
    resources = {"cpu": shared.cpu, "memory": shared.memory}
    image, size = kept(shared, image, live)
    storage: dict[str, Any] = {"size": size}
    if shared.storage_class:
        storage["storageClass"] = shared.storage_class
    meta: dict[str, Any] = {"name": shared.name, "namespace": shared.namespace, "labels": _labels(shared)}
    version = ((live or {}).get("metadata") or {}).get("resourceVersion")
    if version:
        meta["resourceVersion"] = version
    # kept as the live Cluster has it by every other write (of ours): else a provisioning pass would take it away, a
    # change that wakes the drop to nudge again, and so on
    last = (((live or {}).get("metadata") or {}).get("annotations") or {}).get(NUDGE_ANNOTATION)
    if nudged is not None or last is not None:
        meta["annotations"] = {NUDGE_ANNOTATION: str(nudged) if nudged is not None else str(last)}
    return {"apiVersion": CNPG, "kind": "Cluster", "metadata": meta, "spec": {
        "instances": shared.instances, "imageName": image, "storage": storage,
        "resources": {"requests": resources, "limits": resources},  # Guaranteed QoS
        "enableSuperuserAccess": False,
        "postgresql": {"parameters": {"shared_buffers": shared.shared_buffers}, "pg_hba": list(HBA)},
        "managed": {"roles": [dict(roles[name]) for name in sorted(roles)]}}}


def password_secret_object(shared: Shared, tenant: Tenant, password: str) -> dict[str, Any]:
    """The role's password Secret in the Cluster's namespace (basic-auth: `username` the role, `password`), as
    CloudNativePG's passwordSecret reads it; made once, kept when the claim goes (so a re-created claim gets the same
    password), and labelled for CloudNativePG to reload it when it changes."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
            "metadata": {"name": tenant.object_name, "namespace": shared.namespace,
                         "labels": {PROVIDER_LABEL: shared.provider, "cnpg.io/reload": "true"},
                         "annotations": {CLAIM_ANNOTATION: tenant.claim}},
            "data": {"username": _b64(tenant.name), "password": _b64(password)}}


def database_object(shared: Shared, tenant: Tenant, ensure: str = "present") -> dict[str, Any]:
    """The claim's Database: owned by its role, retained in PostgreSQL when the resource is deleted; `ensure:
    absent` when its claim's data is dropped (CloudNativePG drops the database, and says so at that generation)."""
    return {"apiVersion": CNPG, "kind": "Database",
            "metadata": {"name": tenant.object_name, "namespace": shared.namespace,
                         "labels": {**CLUSTER_LABELS, PROVIDER_LABEL: shared.provider},
                         "annotations": {CLAIM_ANNOTATION: tenant.claim}},
            "spec": {"cluster": {"name": shared.name}, "name": tenant.name, "owner": tenant.name, "ensure": ensure,
                     "databaseReclaimPolicy": "retain"}}


def password_in(secret: Mapping[str, Any] | None, tenant: Tenant) -> str | None:
    """The password a role's password Secret holds (None: none, or another role's)."""
    data = (secret or {}).get("data") or {}
    try:
        user = base64.b64decode(data.get("username") or "").decode()
        password = base64.b64decode(data.get("password") or "").decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return password if user == tenant.name and password else None


def readiness(shared: Shared, tenant: Tenant, cluster: Mapping[str, Any] | None,
              password_secret: Mapping[str, Any] | None,
              database: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """Why the claim cannot connect yet, (reason, message), from what CloudNativePG reports; None: it can. The
    Cluster Ready; the role in status.managedRolesStatus.byStatus.reconciled with the password of its Secret's
    current version applied (passwordStatus); the Database applied at its generation."""
    where = f"Cluster {shared.namespace}/{shared.name}"
    if cluster is None:
        return "InstanceNotReady", f"{where} is being created"
    status = cluster.get("status") or {}
    ready = find_condition(status.get("conditions"), "Ready") or {}
    if ready.get("status") != "True":
        return "InstanceNotReady", f"{where} is not ready yet ({status.get('phase') or 'no phase yet'})"
    roles = status.get("managedRolesStatus") or {}
    refused = (roles.get("cannotReconcile") or {}).get(tenant.name)
    if refused:
        return "BackendRefused", f"{where} cannot reconcile role {tenant.name}: {'; '.join(map(str, refused))}"
    if tenant.name not in ((roles.get("byStatus") or {}).get("reconciled") or []):
        return "RoleNotReady", f"role {tenant.name} is not reconciled on {where} yet"
    applied = ((roles.get("passwordStatus") or {}).get(tenant.name) or {}).get("resourceVersion")
    if applied != ((password_secret or {}).get("metadata") or {}).get("resourceVersion"):
        return "RoleNotReady", (f"role {tenant.name}'s password (Secret {shared.namespace}/{tenant.object_name}) is "
                                f"not applied on {where} yet")
    what = f"Database {shared.namespace}/{tenant.object_name}"
    if database is None:
        return "DatabaseNotReady", f"{what} is being created"
    db_status = database.get("status") or {}
    generation = int((database.get("metadata") or {}).get("generation") or 0)
    if db_status.get("applied") is not True or int(db_status.get("observedGeneration") or 0) < generation:
        said = f": {db_status['message']}" if db_status.get("message") else ""
        return "DatabaseNotReady", f"{what} is not applied on {where} yet{said}"
    return None


def database_due(shared: Shared, tenant: Tenant, cluster: Mapping[str, Any] | None,
                 password_secret: Mapping[str, Any] | None) -> bool:
    """Whether the claim's Database may be written: once CloudNativePG reconciled its role (the database's owner),
    with its password. Written earlier, CloudNativePG's CREATE DATABASE fails for want of the owner, and its Database
    controller tries again only 30 s later (measured: every further claim then took ≈ 31 s)."""
    waits = readiness(shared, tenant, cluster, password_secret, None)
    return waits is not None and waits[0] == "DatabaseNotReady"


def connection(shared: Shared, tenant: Tenant) -> dict[str, Any]:
    """status.connection: where the claim connects, as whom, to which database (never the password)."""
    return {"host": shared.host, "port": PORT, "user": tenant.name, "db": tenant.name}


def connection_secret_object(claim: Mapping[str, Any], shared: Shared, tenant: Tenant,
                             password: str) -> dict[str, Any]:
    """The claim's connection Secret in its namespace (`url host port user password db`), owned by the claim (it goes
    with the claim; the role, its password Secret and the database stay)."""
    meta = claim["metadata"]
    url = f"postgresql://{quote(tenant.name, safe='')}:{quote(password, safe='')}@{shared.host}:{PORT}/" \
          f"{quote(tenant.name, safe='')}"
    fields = {"url": url, "host": shared.host, "port": str(PORT), "user": tenant.name, "password": password,
              "db": tenant.name}
    owner = {"apiVersion": claim["apiVersion"], "kind": claim["kind"], "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": connection_secret_of(claim), "namespace": meta["namespace"],
                         "labels": {PROVIDER_LABEL: shared.provider}, "ownerReferences": [owner]},
            "data": {k: _b64(v) for k, v in sorted(fields.items())}}


def provisioned(shared: Shared, tenant: Tenant, secret: str) -> tuple[Condition, dict[str, Any]]:
    """The Ready condition and status fields of a claim whose role and database CloudNativePG made."""
    return (Condition(PROVISIONED, "True", "Provisioned",
                      f"role and database {tenant.name} on {shared.host}:{PORT}; connection in Secret {secret}"),
            {"ready": True, "connection": {**connection(shared, tenant), "secretName": secret}})


def waiting(reason: str, message: str) -> tuple[Condition, dict[str, Any]]:
    """The Ready condition and status fields of a claim not provisioned yet (no secret material in `message`)."""
    return Condition(PROVISIONED, "False", reason, message), {"ready": False}


class DropStep(NamedTuple):
    """The next write of a claim's drop (issue 31 item 5), and why the drop is not done yet (None: done once the
    write is made)."""

    apply: dict[str, Any] | None = None  # an object to apply: the claim's Database, or the Cluster
    delete: str | None = None  # "Database" or "Secret": the claim's object of that kind (Tenant.object_name) goes
    waits: str | None = None


def _listed(cluster: Mapping[str, Any], name: str) -> str | None:
    """The list of status.managedRolesStatus.byStatus that names the role (reconciled, pending-reconciliation,
    not-managed, reserved), as CloudNativePG's instance manager last computed it from PostgreSQL."""
    by_status = (((cluster.get("status") or {}).get("managedRolesStatus") or {}).get("byStatus") or {})
    return next((str(state) for state, names in sorted(by_status.items()) if name in (names or [])), None)


def _without(roles: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, Mapping[str, Any]]:
    """The roles without `name`'s entry; never an empty list (CloudNativePG reconciles no roles then, and would never
    say what became of the one handed back): KEEPER_ROLE stands in."""
    kept = {other: role for other, role in roles.items() if other != name}
    return kept or {KEEPER_ROLE: {"name": KEEPER_ROLE, "ensure": "absent"}}


def drop_step(shared: Shared, image: str, tenant: Tenant, cluster: Mapping[str, Any] | None,
              database: Mapping[str, Any] | None, password_secret: Mapping[str, Any] | None,
              now: float = 0) -> DropStep:
    """What to write next to drop a deleted claim's database and role on the provider's Cluster, from what exists
    and what CloudNativePG reports; every step waits for CloudNativePG's word, so a pass may stop anywhere.

    1. The Database `ensure: absent`: CloudNativePG runs DROP DATABASE and says applied at that generation (until
       then its message: e.g. the database is still being accessed).
    2. The role, after its database (it owns it): CloudNativePG's byStatus says only which list a role is in, and a
       role it dropped (`ensure: absent`, no longer in PostgreSQL) is `reconciled` as the live role was, so a status
       not yet recomputed would pass for done. Hence the role's entry is first taken out of spec.managed.roles, and
       only once CloudNativePG lists the role `not-managed` (computed after that write: it still exists) is it put
       back `ensure: absent`; `reconciled` after that is the drop (DROP ROLE; a refusal in cannotReconcile). Then
       its entry goes, and the role is done once CloudNativePG lists it nowhere. While it lists the role
       pending-reconciliation, the Cluster is nudged (NUDGE_ANNOTATION) every NUDGE_SECONDS of `now`.
    3. The Database resource deleted (retained: CloudNativePG only releases it), then the role's password Secret."""
    what = f"Database {shared.namespace}/{tenant.object_name}"
    where = f"Cluster {shared.namespace}/{shared.name}"
    deleting = database is not None and bool((database.get("metadata") or {}).get("deletionTimestamp"))
    if cluster is None:  # never made, or deleted since (its instances' storage with it): no database, no role left
        return _forget(tenant, what, database, deleting, password_secret)
    if database is not None and not deleting:
        if (database.get("spec") or {}).get("ensure") != "absent":
            return DropStep(apply=database_object(shared, tenant, "absent"),
                            waits=f"{what} set to ensure: absent; CloudNativePG drops database {tenant.name}")
        status = database.get("status") or {}
        generation = int((database.get("metadata") or {}).get("generation") or 0)
        if status.get("applied") is not True or int(status.get("observedGeneration") or 0) < generation:
            said = f": {status['message']}" if status.get("message") else ""
            return DropStep(waits=f"CloudNativePG has not dropped database {tenant.name} on {where} yet{said}")
    roles = _roles(cluster)
    entry = roles.get(tenant.name)
    listed = _listed(cluster, tenant.name)
    role = f"role {tenant.name}"
    if entry is not None and entry.get("ensure") != "absent":
        return DropStep(apply=_cluster(shared, image, _without(roles, tenant.name), cluster),
                        waits=f"{role} taken out of {where}'s managed roles; waiting for CloudNativePG to list it "
                              "not-managed")
    if entry is None:
        if listed == "not-managed":
            roles[tenant.name] = {"name": tenant.name, "ensure": "absent", "comment": f"apprafter claim {tenant.claim}"}
            return DropStep(apply=_cluster(shared, image, roles, cluster),
                            waits=f"{role} set to ensure: absent on {where}; CloudNativePG drops it")
        if listed is not None:
            return DropStep(waits=f"CloudNativePG still lists {role} {listed} on {where}")
        return _forget(tenant, what, database, deleting, password_secret)
    refused = ((((cluster.get("status") or {}).get("managedRolesStatus") or {}).get("cannotReconcile") or {})
               .get(tenant.name))
    if refused:
        return DropStep(waits=f"{where} cannot drop {role}: {'; '.join(map(str, refused))}")
    if listed != "reconciled":
        waits = f"CloudNativePG has not dropped {role} on {where} yet ({listed or 'not listed'})"
        annotations = (cluster.get("metadata") or {}).get("annotations") or {}
        try:
            last = int(annotations.get(NUDGE_ANNOTATION) or 0)
        except ValueError:
            last = 0
        if listed == "pending-reconciliation" and now - last >= NUDGE_SECONDS:
            return DropStep(apply=_cluster(shared, image, roles, cluster, int(now)), waits=waits)
        return DropStep(waits=waits)
    return DropStep(apply=_cluster(shared, image, _without(roles, tenant.name), cluster),
                    waits=f"{role} dropped; its entry taken out of {where}'s managed roles")


def _forget(tenant: Tenant, what: str, database: Mapping[str, Any] | None, deleting: bool,
            password_secret: Mapping[str, Any] | None) -> DropStep:
    """The last steps, once neither the database nor the role is left: the Database resource, then the password
    Secret."""
    if database is not None:
        if deleting:
            return DropStep(waits=f"{what} is being deleted (CloudNativePG releases it)")
        return DropStep(delete="Database", waits=f"{what} deleted (CloudNativePG releases it)")
    if password_secret is not None:
        return DropStep(delete="Secret")
    return DropStep()


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()
