"""The cloudnative-pg backend's objects: the shared Cluster, a claim's role, password Secret and Database, readiness.

The Cluster is made lazily for its first claim: Guaranteed, `shared_buffers` a share of its memory limit, and a pg_hba
that lets a role reach only the database of its own name (`sameuser`), so no claim reaches another's database. Each
claim is a managed role (its password in a Secret made once) and a Database owned by it, both named from the claim's
namespace and name, so re-creating the same app and need re-binds to the same role, password and database. When
lifecycle.retention lets a deleted claim's data go, lifecycle.backends.pg's `drop` says the next step. Pure.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from controller_runtime.kinds import GroupVersionKind
from controller_runtime.outcomes import Done, Requeue
from controller_runtime.quantity import whole_bytes
from lifecycle.backends.common import (
    CLAIM_ANNOTATION,
    PROVIDER_LABEL,
    b64,
    decoded,
)
from lifecycle.backends.contract import Waiting
from lifecycle.backends.pg_backup import Backups, backup_stanza, region_env
from lifecycle.backends.pg_pooler import Pooling, pooler_host
from lifecycle.conditions import find_condition
from lifecycle.rotation import ISSUED_ANNOTATION
from renderer.names import NAME_LABEL

__all__ = ["ALTERNATE_SUFFIX", "BACKEND", "CLUSTER", "CLUSTER_LABELS", "CNPG", "CONNECTIONS", "DATABASE", "HBA",
           "KEEPER_ROLE", "MAX_ROLES", "NUDGE_ANNOTATION", "NUDGE_SECONDS", "PORT", "SHARES", "TYPE", "Reservation",
           "Shared", "Tenant", "cluster_at", "cluster_object", "database_object", "generation_of", "generations",
           "kept", "listed", "major", "password_in", "password_secret_object", "readiness", "reservation", "role_entry",
           "role_waits", "roles_of", "shared_buffers", "size_of", "tenant_of", "version_wanted", "without"]

BACKEND, TYPE = "cloudnative-pg", "pg"
CNPG = "postgresql.cnpg.io/v1"
CLUSTER, DATABASE = GroupVersionKind(CNPG, "Cluster"), GroupVersionKind(CNPG, "Database")
PORT = 5432
CLUSTER_LABELS: Mapping[str, str] = {"app.kubernetes.io/component": "postgresql",
                                     "app.kubernetes.io/managed-by": "apprafter"}
MIN_MEMORY = 128 * 2**20
MIN_STORAGE = 2**20
# The entry that stands in spec.managed.roles when a drop would empty it: a role no claim can have (no dot), kept
# absent; CloudNativePG reconciles and reports no roles at all for an empty list.
KEEPER_ROLE = "apprafter_no_role"
# On the Cluster, when a drop waits on a role CloudNativePG lists pending-reconciliation: the time (epoch seconds) the
# operator touched it last. CloudNativePG's DROP ROLE writes nothing new to the Cluster's status, so its instance
# manager may not look again (and list the role reconciled) until the Cluster changes; this change is that nudge, made
# at most every NUDGE_SECONDS.
NUDGE_ANNOTATION = "apprafter.io/roles-nudged"
NUDGE_SECONDS = 10
# pg_hba.conf rules before CloudNativePG's fallback (`host all all all scram-sha-256`): a TCP login reaches only the
# database named as its role (every claim's role and database share a name) or as a role it is a member of (`samerole`:
# a claim's alternate login role, a member of its role alone: lifecycle.backends.pg_roles), anything else over TCP is
# refused.
HBA = ("host sameuser all all scram-sha-256", "host samerole all all scram-sha-256", "host all all all reject")
ALTERNATE_SUFFIX = "~b"  # a claim's alternate login role: no claim's role has it (a generation's suffix is `~<digits>`)
IDENTIFIER_MAX = 63  # bytes of a PostgreSQL identifier (NAMEDATALEN - 1: a longer one is cut short silently)
HASH_CHARS = 20  # hex characters of SHA-256 in a hashed name: 80 bits
# A role's connection limit by its need's size (none: small), CloudNativePG's `connectionLimit` (ALTER ROLE ...
# CONNECTION LIMIT): no claim can hold more than half of a Cluster's default max_connections (100; 3 of them kept
# for superusers), so one role can no longer take the shared Cluster's connections from every other.
CONNECTIONS = {"nano": 5, "small": 10, "medium": 20, "large": 30, "xlarge": 50}
# A claim's share of the Cluster's volume by its need's size: a reservation, not a quota (PostgreSQL cannot stop one
# database at a size). A role is added only while the shares of every role on the Cluster (retained ones included)
# fit in its volume, so the volume an administrator sized is never promised twice; the volume is never grown for a
# claim (a tenant would size the administrator's disk, and CloudNativePG's resize of a class that cannot expand
# fails its whole reconcile). Each role's size is read back from its connection limit (one per size).
SHARES = {"nano": "32Mi", "small": "128Mi", "medium": "512Mi", "large": "2Gi", "xlarge": "8Gi"}
DEFAULT_SIZE = "small"
CLAIM_COMMENT = "apprafter claim "  # a role's comment: `apprafter claim <namespace>/<claim>` (the claims' roles)
# The most roles one Cluster's spec.managed.roles holds, retained ones of deleted claims included: each is ≈ 250
# bytes of spec and as much of managedFields, and etcd refuses an object past 1.5 MiB (issue 41: retained roles
# piled up until a new tenant's claim failed with nothing on its status). Past it a new claim waits, saying why.
MAX_ROLES = 2000


class Shared(NamedTuple):
    """A provider's shared CloudNativePG Cluster, and the image the operator runs it from."""

    provider: str
    name: str  # spec.config.cluster, else the provider's name
    namespace: str  # spec.config.namespace, else the platform's pg services namespace
    instances: int
    storage_size: str
    storage_class: str | None
    cpu: str
    memory: str
    shared_buffers: str  # e.g. "64MB"
    image: str
    backups: Backups | None = None  # spec.config.backup, once it names a destination (lifecycle.backends.pg_backup)
    pooling: Pooling | None = None  # spec.config.pooler, unless off (lifecycle.backends.pg_pooler)

    @property
    def host(self) -> str:
        """Its read-write Service (CloudNativePG's `<cluster>-rw`: always the primary)."""
        return f"{self.name}-rw.{self.namespace}.svc"

    @property
    def pooled_host(self) -> str:
        """Where a pooled connection goes: the Pooler's Service, or with the pooler off the read-write one."""
        return pooler_host(self.name, self.namespace) if self.pooling is not None else self.host


def cluster_at(host: str) -> tuple[str, str] | None:
    """(name, namespace) of the Cluster whose read-write Service is `host` (Shared.host: what a claim's connection
    says), None for a host that is no such Service."""
    service, _, rest = host.partition(".")
    namespace, _, tail = rest.partition(".")
    return (service.removesuffix("-rw"), namespace) if service.endswith("-rw") and namespace and tail == "svc" \
        else None


class Tenant(NamedTuple):
    """A claim's role and database (one name), and the name of its objects in the Cluster's namespace."""

    name: str  # the role and the database
    object_name: str  # its password Secret and its Database resource
    claim: str  # `<namespace>/<claim>`
    connection_limit: int = CONNECTIONS[DEFAULT_SIZE]
    size: str = DEFAULT_SIZE  # its need's size (a size the tables do not know: the default)


class Reservation(NamedTuple):
    """A claim's share of its Cluster's volume (bytes) beside what the other roles on it hold."""

    share: int
    others: int  # the shares of every other claim's role on the Cluster, retained ones included
    volume: int  # the Cluster's volume as written (never smaller than the live one)

    @property
    def fits(self) -> bool:
        return self.others + self.share <= self.volume


def shared_buffers(limit: int, percent: int) -> str:
    """`shared_buffers` for a memory limit: `percent` of it in whole MB (PostgreSQL's MB are MiB), at least 1."""
    return f"{max(limit * percent // 100 // 2**20, 1)}MB"


def generation_of(claim: Mapping[str, Any]) -> int:
    """The generation of the claim's role and database its connection points at: 1, or the one its last completed
    restore made (status.restore.generation, lifecycle.restore)."""
    found = ((claim.get("status") or {}).get("restore") or {}).get("generation")
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 1 else 1


def generations(claim: Mapping[str, Any]) -> tuple[int, ...]:
    """Every generation of the claim's role and database that may exist, the one it is at first: a restore's new one
    (status.restore.restoring) and the ones kept from before it, down to 1."""
    restore = (claim.get("status") or {}).get("restore") or {}
    restoring = restore.get("restoring")
    live = generation_of(claim)
    top = max(live, restoring if isinstance(restoring, int) and not isinstance(restoring, bool) else 1)
    return (live, *(g for g in range(top, 0, -1) if g != live))


def tenant_of(claim: Mapping[str, Any], generation: int | None = None, alternate: bool = False) -> Tenant:
    """The claim's role and database at `generation` (None: the one it is at, `generation_of`): `<namespace>.<claim>`
    (`shop.cart-pg`), a restore's generation N `<namespace>.<claim>~N`, when that is at most 62 bytes; else its
    first 42 bytes, `-` and 20 hex characters of the SHA-256 of `<namespace>/<claim>` (`~N` appended for N > 1):
    exactly 63 bytes. A namespace has no dot, so no two plain names are the same; a hashed name is longer than any
    plain one, so never one of them; two hashed names are the same only if 80 bits of SHA-256 are. No name can be one
    PostgreSQL or CloudNativePG reserves (postgres, app, pg_*, cnpg_*, streaming_replica: none has a dot). Its
    objects in the Cluster's namespace are named the same (a DNS subdomain), or `claim-<hash>` for a hashed one and
    for every generation past the first (`~` is no character of a Kubernetes name). `alternate`: the generation's
    alternate login role (lifecycle.backends.pg_roles), ALTERNATE_SUFFIX after the generation's, named the same way
    (its objects `claim-<hash>`)."""
    meta = claim.get("metadata") or {}
    namespace, name = str(meta["namespace"]), str(meta["name"])
    size = str((claim.get("spec") or {}).get("size") or DEFAULT_SIZE)
    size = size if size in CONNECTIONS else DEFAULT_SIZE
    number = generation_of(claim) if generation is None else generation
    suffix = (f"~{number}" if number > 1 else "") + (ALTERNATE_SUFFIX if alternate else "")
    plain = f"{namespace}.{name}{suffix}"
    digest = hashlib.sha256(f"{namespace}/{name}{suffix}".encode()).hexdigest()[:HASH_CHARS]
    if len(plain.encode()) < IDENTIFIER_MAX:
        return Tenant(plain, plain if not suffix else f"claim-{digest}", f"{namespace}/{name}", CONNECTIONS[size],
                      size)
    return Tenant(f"{plain[:IDENTIFIER_MAX - HASH_CHARS - 1]}-{digest}", f"claim-{digest}", f"{namespace}/{name}",
                  CONNECTIONS[size], size)


def size_of(role: Mapping[str, Any]) -> str | None:
    """The need's size a claim's role was made for, read back from its connection limit (None: a role that is not a
    claim's, or one being dropped)."""
    if not str(role.get("comment") or "").startswith(CLAIM_COMMENT) or role.get("ensure") == "absent":
        return None
    limit = role.get("connectionLimit")
    return next((size for size, connections in CONNECTIONS.items() if connections == limit), DEFAULT_SIZE)


def reservation(tenant: Tenant, roles: Mapping[str, Mapping[str, Any]], volume: str) -> Reservation:
    """The tenant's share of a Cluster holding `roles` (its live spec.managed.roles) on a volume of `volume`."""
    sizes = (size_of(role) for name, role in roles.items() if name != tenant.name)
    others = sum(whole_bytes(SHARES[size]) or 0 for size in sizes if size is not None)
    return Reservation(whole_bytes(SHARES[tenant.size]) or 0, others, whole_bytes(volume) or 0)


def version_wanted(claim: Mapping[str, Any]) -> str | None:
    """The PostgreSQL major the claim's need names (`needs.pg.version`), None: any."""
    wanted = ((claim.get("spec") or {}).get("parameters") or {}).get("version")
    return str(wanted) if wanted not in (None, "") else None


def major(image: str) -> str:
    """The PostgreSQL major an image's tag carries (CloudNativePG reads it the same way): `15` of `...:15.4-1`."""
    tag = image.rsplit("/", 1)[-1].partition("@")[0].partition(":")[2]
    return re.split(r"[.\-]", tag, maxsplit=1)[0]


def roles_of(live: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The live Cluster's spec.managed.roles by name."""
    return {str(role.get("name")): dict(role) for role in
            ((((live or {}).get("spec") or {}).get("managed") or {}).get("roles") or []) if isinstance(role, Mapping)}


def without(roles: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, Mapping[str, Any]]:
    """The roles without `name`'s entry; never an empty list (CloudNativePG reconciles no roles then, and would never
    say what became of the one handed back): KEEPER_ROLE stands in."""
    kept = {other: role for other, role in roles.items() if other != name}
    return kept or {KEEPER_ROLE: {"name": KEEPER_ROLE, "ensure": "absent"}}


def listed(cluster: Mapping[str, Any], name: str) -> str | None:
    """The list of status.managedRolesStatus.byStatus that names the role (reconciled, pending-reconciliation,
    not-managed, reserved), as CloudNativePG's instance manager last computed it from PostgreSQL."""
    by_status = (((cluster.get("status") or {}).get("managedRolesStatus") or {}).get("byStatus") or {})
    return next((str(state) for state, names in sorted(by_status.items()) if name in (names or [])), None)


def kept(shared: Shared, live: Mapping[str, Any] | None) -> tuple[str, str]:
    """(image, storage size) to write: the ones asked for, but never another PostgreSQL major than the live Cluster
    runs (a major upgrade rewrites the data: an administrator's act, not a side effect of an operator's new default
    image) nor a smaller volume (a volume never shrinks): both refused, the live ones kept."""
    spec = (live or {}).get("spec") or {}
    image, running = shared.image, spec.get("imageName")
    if isinstance(running, str) and running and major(running) != major(image):
        image = running
    size, have = shared.storage_size, (spec.get("storage") or {}).get("size")
    if isinstance(have, str) and (whole_bytes(have) or 0) > (whole_bytes(size) or 0):
        size = have
    return image, size


def cluster_object(shared: Shared, roles: Mapping[str, Mapping[str, Any]], live: Mapping[str, Any] | None,
                   nudged: int | None = None) -> dict[str, Any]:
    """The provider's Cluster with these managed roles (sorted by name). The live resourceVersion rides along, so a
    concurrent pass's roles are never overwritten unseen (409: again)."""
    resources = {"cpu": shared.cpu, "memory": shared.memory}
    image, size = kept(shared, live)
    storage: dict[str, Any] = {"size": size, **({"storageClass": shared.storage_class} if shared.storage_class else {})}
    labels = {**CLUSTER_LABELS, "app.kubernetes.io/instance": shared.name, NAME_LABEL: "postgresql",
              PROVIDER_LABEL: shared.provider}
    meta: dict[str, Any] = {"name": shared.name, "namespace": shared.namespace, "labels": labels}
    version = ((live or {}).get("metadata") or {}).get("resourceVersion")
    if version:
        meta["resourceVersion"] = version
    # kept as the live Cluster has it by every other write (of ours): else a provisioning pass would take it away, a
    # change that wakes the drop to nudge again, and so on
    last = (((live or {}).get("metadata") or {}).get("annotations") or {}).get(NUDGE_ANNOTATION)
    if nudged is not None or last is not None:
        meta["annotations"] = {NUDGE_ANNOTATION: str(nudged) if nudged is not None else str(last)}
    spec: dict[str, Any] = {
        "instances": shared.instances, "imageName": image, "storage": storage,
        "resources": {"requests": resources, "limits": resources},  # Guaranteed QoS
        "enableSuperuserAccess": False,
        "postgresql": {"parameters": {"shared_buffers": shared.shared_buffers}, "pg_hba": list(HBA)},
        "managed": {"roles": [dict(roles[name]) for name in sorted(roles)]}}
    if shared.backups is not None:  # WAL archived and base backups to the provider's object store
        spec["backup"] = backup_stanza(shared.backups, shared.namespace)
        if env := region_env(shared.backups):
            spec["env"] = env
    return {"apiVersion": CNPG, "kind": "Cluster", "metadata": meta, "spec": spec}


def role_entry(tenant: Tenant) -> dict[str, Any]:
    """The claim's entry in the Cluster's spec.managed.roles: a login role, its password from its Secret, its
    connection limit, no other attribute (no superuser, createdb, createrole, replication, bypassrls: CloudNativePG's
    defaults)."""
    return {"name": tenant.name, "ensure": "present", "login": True, "passwordSecret": {"name": tenant.object_name},
            "connectionLimit": tenant.connection_limit, "comment": f"{CLAIM_COMMENT}{tenant.claim}"}


def password_secret_object(shared: Shared, tenant: Tenant, password: str,
                           rotation: str | None = None) -> dict[str, Any]:
    """The role's password Secret in the Cluster's namespace (basic-auth: `username` the role, `password`), as
    CloudNativePG's passwordSecret reads it; made once, kept when the claim goes (so a re-created claim gets the same
    password), and labelled for CloudNativePG to reload it when it changes (`rotation`: the request a new password
    answers, lifecycle.rotation.ISSUED_ANNOTATION)."""
    annotations = {CLAIM_ANNOTATION: tenant.claim, **({ISSUED_ANNOTATION: rotation} if rotation else {})}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
            "metadata": {"name": tenant.object_name, "namespace": shared.namespace,
                         "labels": {PROVIDER_LABEL: shared.provider, "cnpg.io/reload": "true"},
                         "annotations": annotations},
            "data": {"username": b64(tenant.name), "password": b64(password)}}


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
    data = decoded(secret) or {}
    return data["password"] if data.get("username") == tenant.name and data.get("password") else None


def readiness(shared: Shared, tenant: Tenant, cluster: Mapping[str, Any] | None,
              password_secret: Mapping[str, Any] | None, database: Mapping[str, Any] | None,
              login: Tenant | None = None) -> Waiting | None:
    """Why the claim cannot connect yet, from what CloudNativePG reports (None: it can). The Cluster Ready; the role
    (`login`, else the tenant's own) in status.managedRolesStatus.byStatus.reconciled with the password of its
    Secret's current version applied (passwordStatus: `role_waits`); the tenant's Database applied at its generation.
    Each passes by itself (retried; CloudNativePG's status writes wake the claim sooner), but a role CloudNativePG
    cannot reconcile (waits for a change)."""
    where = f"Cluster {shared.namespace}/{shared.name}"
    if cluster is None:
        return Waiting("InstanceNotReady", f"{where} is being created", Requeue("Cluster being created"))
    status = cluster.get("status") or {}
    if (find_condition(status.get("conditions"), "Ready") or {}).get("status") != "True":
        said = f"{where} is not ready yet ({status.get('phase') or 'no phase yet'})"
        return Waiting("InstanceNotReady", said, Requeue(said))
    waits = role_waits(shared, login or tenant, cluster, password_secret)
    if waits is not None:
        return waits
    what = f"Database {shared.namespace}/{tenant.object_name}"
    if database is None:
        return Waiting("DatabaseNotReady", f"{what} is being created", Requeue("Database being created"))
    db_status = database.get("status") or {}
    generation = int((database.get("metadata") or {}).get("generation") or 0)
    if db_status.get("applied") is not True or int(db_status.get("observedGeneration") or 0) < generation:
        said = f"{what} is not applied on {where} yet" + (f": {db_status['message']}" if db_status.get("message")
                                                          else "")
        return Waiting("DatabaseNotReady", said, Requeue(said))
    return None



def role_waits(shared: Shared, role: Tenant, cluster: Mapping[str, Any],
               password_secret: Mapping[str, Any] | None) -> Waiting | None:
    """Why a login role cannot log in with its Secret's password yet (None: it can): CloudNativePG lists it
    reconciled, with the password of the Secret's current version applied (passwordStatus); one it cannot reconcile
    waits for a change."""
    where = f"Cluster {shared.namespace}/{shared.name}"
    roles = (cluster.get("status") or {}).get("managedRolesStatus") or {}
    refused = (roles.get("cannotReconcile") or {}).get(role.name)
    if refused:
        return Waiting("BackendRefused", f"{where} cannot reconcile role {role.name}: "
                       f"{'; '.join(map(str, refused))}", Done())
    if role.name not in ((roles.get("byStatus") or {}).get("reconciled") or []):
        said = f"role {role.name} is not reconciled on {where} yet"
        return Waiting("RoleNotReady", said, Requeue(said))
    applied = ((roles.get("passwordStatus") or {}).get(role.name) or {}).get("resourceVersion")
    if applied != ((password_secret or {}).get("metadata") or {}).get("resourceVersion"):
        said = (f"role {role.name}'s password (Secret {shared.namespace}/{role.object_name}) is not applied on "
                f"{where} yet")
        return Waiting("RoleNotReady", said, Requeue(said))
    return None
