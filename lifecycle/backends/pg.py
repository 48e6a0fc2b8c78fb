"""The cloudnative-pg backend's core: one shared CloudNativePG Cluster per provider, a role and database per claim.

Provisioning makes the role's password Secret (once), the Cluster with the claim's role and the Database, and waits
for CloudNativePG's word (lifecycle.backends.pg_cluster: the objects and readiness); a rotation request
(lifecycle.rotation) switches the app to the claim's other login role (lifecycle.backends.pg_roles). When
lifecycle.retention lets a deleted claim's data go, `drop` says the next step, each on CloudNativePG's word: the
alternate role, the database, then the role, then their resources. CloudNativePG makes and drops both; the
operator never connects (the alternate's set-role Job does, as that role).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from controller_runtime.outcomes import Done, Requeue
from controller_runtime.quantity import whole_bytes
from lifecycle.backends.common import (
    PROVIDER_LABEL,
    SIZE_CONDITION,
    config_of,
    memory_at_least,
    positive_cpu,
    provider_name,
    ready,
    volume_refusals,
)
from lifecycle.backends.contract import Again, Apply, CreateOnce, Delete, Gone, Read, Seen, Site, Step, Waiting
from lifecycle.backends.instance import SECRET
from lifecycle.backends.pg_backup import backups_of, schedule_writes
from lifecycle.backends.pg_cluster import (
    BACKEND,
    CLUSTER,
    CLUSTER_LABELS,
    CONNECTIONS,
    DATABASE,
    DEFAULT_SIZE,
    MAX_ROLES,
    MIN_MEMORY,
    MIN_STORAGE,
    NUDGE_ANNOTATION,
    NUDGE_SECONDS,
    PORT,
    SHARES,
    TYPE,
    Shared,
    Tenant,
    cluster_object,
    database_object,
    generations,
    kept,
    listed,
    major,
    password_in,
    password_secret_object,
    readiness,
    reservation,
    role_entry,
    role_waits,
    roles_of,
    shared_buffers,
    size_of,
    tenant_of,
    version_wanted,
    without,
)
from lifecycle.backends.pg_pooler import POOLER, pooler_writes, pooling_of
from lifecycle.backends.pg_reads import cluster_read, job_read, pooler_read, tenant_reads
from lifecycle.backends.pg_roles import (
    alternate_entry,
    alternate_of,
    pair,
    retired,
    retired_secret,
    set_role_job,
    setting_waits,
)
from lifecycle.conditions import Condition
from lifecycle.rotation import issued

__all__ = ["CLUSTER", "CLUSTER_LABELS", "CORE", "DATABASE", "POOLER", "CloudNativePG"]  # the kinds: for the watches


class CloudNativePG:
    """The cloudnative-pg backend's core (lifecycle.backends.contract.Backend)."""

    backend, type, drop_needs_provider = BACKEND, TYPE, True

    def configure(self, provider: Mapping[str, Any], site: Site) -> Shared | list[str]:
        config = config_of(provider, TYPE, BACKEND)
        if isinstance(config, list):
            return config
        if not site.image:
            return ["the operator runs no CloudNativePG Cluster here (no PostgreSQL image for it)"]
        storage, resources = config["storage"], config["resources"]
        problems = [*memory_at_least(resources["memory"], MIN_MEMORY, "spec.config.resources.memory"),
                    *positive_cpu(resources["cpu"], "spec.config.resources.cpu"),
                    *memory_at_least(storage["size"], MIN_STORAGE, "spec.config.storage.size")]
        if problems:
            return problems
        limit = whole_bytes(resources["memory"]) or 0
        return Shared(provider_name(provider), str(config.get("cluster") or provider_name(provider)),
                      str(config.get("namespace") or site.namespace), int(config["instances"]), str(storage["size"]),
                      storage.get("storageClassName"), str(resources["cpu"]), str(resources["memory"]),
                      shared_buffers(limit, int(config["sharedBuffersPercent"])), site.image, backups_of(config),
                      pooling_of(config, site.part("pgbouncer")))

    def reads(self, claim: Mapping[str, Any], config: Shared) -> Sequence[Read]:
        """The provider's Cluster, the claim's Database and its role's password Secret, of every generation (the one
        it is at first: lifecycle.restore) and of its alternate login role (lifecycle.backends.pg_roles), the Job
        that sets the current alternate's sessions, and the Cluster's Pooler (lifecycle.backends.pg_pooler)."""
        numbers = generations(claim)
        tenants = [tenant_of(claim, number) for number in numbers]
        alternates = [alternate_of(claim, number) for number in numbers]
        return (cluster_read(config), *(read for tenant in tenants for read in tenant_reads(config, tenant)),
                pooler_read(config), *(read for tenant in alternates for read in tenant_reads(config, tenant)),
                job_read(config, alternate_of(claim)))

    def provision(self, claim: Mapping[str, Any], config: Shared, seen: Seen) -> Step:
        """The password Secret first (CloudNativePG reads it when the role appears in the Cluster), made once; then
        the Cluster with the claim's role (lazily made on the first claim; other claims' roles kept) and, with
        backups, its ScheduledBackup; the Database once CloudNativePG reconciled its owner; ready once CloudNativePG
        says all three are, the password of the Secret's version applied. A rotation request: the standby login role's
        Secret anew (marked with the request: the same one twice rotates once), the claim ready on the role it uses
        until CloudNativePG applied it and (the alternate) its set-role Job succeeded, then on the standby; once no
        pod holds the other role's password, that one replaced (retired), and `refused` once it is applied."""
        tenant = tenant_of(claim)
        database_read, secret_read = tenant_reads(config, tenant)
        cluster, database, secret = seen.get(cluster_read(config)), seen.get(database_read), seen.get(secret_read)
        held = roles_of(cluster)
        if tenant.name not in held and len(held) >= MAX_ROLES:  # nothing made for a role that cannot be added
            return Step(Waiting("RolesLimitReached", f"Cluster {config.namespace}/{config.name} holds {len(held)} "
                                "roles (retained ones of deleted claims included), its limit: no role is added (the "
                                "Cluster would grow past what etcd stores); an administrator drops retained data "
                                "or adds a provider"))
        admitted = _admitted(claim, config, tenant, cluster)
        if isinstance(admitted, Waiting):  # nothing made for a claim its provider refuses
            return Step(admitted)
        tenant, size = admitted
        rotation, given = seen.rotation, seen.connection
        alternate = alternate_of(claim)._replace(connection_limit=tenant.connection_limit, size=tenant.size)
        secrets = {tenant.name: secret, alternate.name: seen.get(tenant_reads(config, alternate)[1])}
        active, standby = pair(tenant, alternate, given, secrets)
        active_secret, standby_secret = secrets[active.name], secrets[standby.name]
        if active_secret is None:  # a new claim (its own role), the request it is made for marked if any
            return Step(Again("role password Secret created"), (CreateOnce(password_secret_object(
                config, active, seen.fresh, rotation.requested if given is None else None)),))
        if password_in(active_secret, active) is None:  # a Secret of that name without a usable password: ours
            return Step(Again("role password Secret written anew"),
                        (Apply(password_secret_object(config, active, seen.fresh, issued(active_secret))),))
        switching = rotation.due and given is not None  # a rotation: to the standby role, its new password first
        if switching and (issued(standby_secret) != rotation.requested or password_in(standby_secret, standby) is None):
            made = password_secret_object(config, standby, seen.fresh, rotation.requested)
            return Step(Again(f"role {standby.name}'s password Secret written for a rotation"),
                        (Apply(made) if standby_secret is not None else CreateOnce(made),))
        roles = roles_of(cluster)
        roles[tenant.name] = role_entry(tenant)
        if alternate.name in roles or (switching and standby is alternate):
            if alternate.name not in held and len(held) >= MAX_ROLES:  # the rotation waits; the app runs on
                return Step(ready(f"{_where(config, active, tenant)}; the rotation waits: Cluster "
                                  f"{config.namespace}/{config.name} holds {len(held)} roles, its limit",
                                  _connection(config, active, tenant), dict(given or {}),
                                  rotated=rotation.issued, conditions=(size,)))
            roles[alternate.name] = alternate_entry(alternate, tenant)
        # the ScheduledBackup (lifecycle.backends.pg_backup) before the Cluster: its deletion must precede the write
        # that takes the Cluster's backups off
        schedule = schedule_writes(config.backups, cluster, {**CLUSTER_LABELS, PROVIDER_LABEL: config.provider})
        writes: list[Apply | CreateOnce | Delete] = [*schedule, Apply(cluster_object(config, roles, cluster))]
        # the Pooler (lifecycle.backends.pg_pooler) after the Cluster: the live Cluster owns it
        writes.extend(pooler_writes(config.pooling, config.provider, cluster, seen.get(pooler_read(config))))
        login = standby if switching else active
        waits = readiness(config, tenant, cluster, secrets[login.name], None, login)
        if database is not None or (waits is not None and waits.reason == "DatabaseNotReady"):
            # written earlier than its owner is reconciled, CloudNativePG's CREATE DATABASE fails and its Database
            # controller tries again only 30 s later (measured: every further claim then took ≈ 31 s)
            writes.append(Apply(database_object(config, tenant)))
        waits = readiness(config, tenant, cluster, secrets[login.name], database, login)
        if waits is None and login is alternate:  # its sessions run as the claim's role before it is handed out
            job = seen.get(job_read(config, alternate))
            if job is None:
                writes.append(CreateOnce(set_role_job(config, alternate, tenant, secrets[alternate.name] or {})))
            waits = setting_waits(config, alternate, job)
        if (waits is not None and switching and waits.reason in ("RoleNotReady", "BackendRefused")
                and readiness(config, tenant, cluster, active_secret, database, active) is None):
            # the rotation's role not ready yet: the claim stays ready with the role its Secret names (its password
            # still valid), its pods keep running
            return Step(ready(f"{_where(config, active, tenant)}; the rotation of request {rotation.requested} "
                              f"waits: {waits.message}",
                              _connection(config, active, tenant), dict(given or {}), rotated=rotation.issued,
                              conditions=(size,)), tuple(writes))
        if waits is not None:
            return Step(waits._replace(conditions=(size,)), tuple(writes))
        login_secret, other, other_secret = secrets[login.name] or {}, active if switching else standby, \
            None if switching else standby_secret
        refused = True
        if other_secret is not None and rotation.settled and rotation.issued is not None:
            # no pod holds the other role's password any more: replaced by one no one is given (then refused)
            if retired(other_secret) != rotation.issued:
                writes.append(Apply(retired_secret(config, other, seen.fresh, rotation.issued)))
                refused = False
            else:
                refused = role_waits(config, other, cluster or {}, other_secret) is None
        password = password_in(login_secret, login) or ""
        name, secret_part, db = quote(login.name, safe=""), quote(password, safe=""), quote(tenant.name, safe="")
        url = f"postgresql://{name}:{secret_part}@{config.host}:{PORT}/{db}"
        # the pooled URL: the same role, password and database through the Pooler (its Service's port is 5432 too)
        pooled = f"postgresql://{name}:{secret_part}@{config.pooled_host}:{PORT}/{db}"
        fields = {"url": url, "pooledUrl": pooled, "host": config.host, "port": str(PORT), "user": login.name,
                  "password": password, "db": tenant.name}
        return Step(ready(_where(config, login, tenant),
                          # a role's Secret without a mark (a restore's new generation) answers what the connection
                          # did: a request is rotated once
                          _connection(config, login, tenant), fields, rotated=issued(login_secret) or rotation.issued,
                          refused=refused, conditions=(size,)), tuple(writes))

    def drop(self, claim: Mapping[str, Any], config: Shared, seen: Seen) -> Step:
        """The next step of dropping the claim's databases and roles, every generation of them (a restore's kept ones
        too: lifecycle.restore), one after the other (`drop_one`), each generation's roles as `generation_roles`
        lists them."""
        roles = [role for number in generations(claim) for role in self.generation_roles(claim, number)]
        for role in roles:
            step = self.drop_one(config, seen, role)
            if not isinstance(step.then, Gone):
                return step
            if step.writes and role != roles[-1]:
                return Step(Again(f"role {role.name} and its data dropped"), step.writes)
        return step

    def generation_roles(self, claim: Mapping[str, Any], number: int) -> tuple[Tenant, ...]:
        """The roles (each with its database, Secret) one generation of the claim's data is, in the order `drop_one`
        drops them (lifecycle.generation_drop drops one kept generation's alone): its alternate login role first (it
        owns nothing: its sessions ran as the claim's role; its setting goes with it, its Job with its Secret;
        lifecycle.backends.pg_roles), then the claim's role with its database."""
        return (alternate_of(claim, number), tenant_of(claim, number))

    def drop_one(self, config: Shared, seen: Seen, tenant: Tenant) -> Step:
        """The next step of dropping one generation's database and role on the provider's Cluster, from what exists
        and what CloudNativePG reports; every step waits for CloudNativePG's word, so a pass may stop anywhere.

        1. The Database `ensure: absent`: CloudNativePG runs DROP DATABASE and says applied at that generation.
        2. The role, after its database (it owns it): CloudNativePG's byStatus says only which list a role is in,
           and a role it dropped is `reconciled` as the live role was, so a status not yet recomputed would pass for
           done. Hence the role's entry is first taken out of spec.managed.roles, and only once CloudNativePG lists
           it `not-managed` is it put back `ensure: absent`; `reconciled` after that is the drop (a refusal in
           cannotReconcile). Then its entry goes, and the role is done once CloudNativePG lists it nowhere. While it
           lists the role pending-reconciliation, the Cluster is nudged (NUDGE_ANNOTATION) every NUDGE_SECONDS.
        3. The Database resource deleted (retained: CloudNativePG only releases it), then the password Secret."""
        database_read, secret_read = tenant_reads(config, tenant)
        cluster, database = seen.get(cluster_read(config)), seen.get(database_read)
        what = f"Database {config.namespace}/{tenant.object_name}"
        where = f"Cluster {config.namespace}/{config.name}"
        deleting = database is not None and bool((database.get("metadata") or {}).get("deletionTimestamp"))
        if cluster is None:  # never made, or deleted since (its storage with it): no database, no role left
            return _forget(config, tenant, what, database, deleting, seen.get(secret_read))
        if database is not None and not deleting:
            if (database.get("spec") or {}).get("ensure") != "absent":
                return _waits(f"{what} set to ensure: absent; CloudNativePG drops database {tenant.name}",
                              Apply(database_object(config, tenant, "absent")))
            status = database.get("status") or {}
            generation = int((database.get("metadata") or {}).get("generation") or 0)
            if status.get("applied") is not True or int(status.get("observedGeneration") or 0) < generation:
                message = f": {status['message']}" if status.get("message") else ""
                return _waits(f"CloudNativePG has not dropped database {tenant.name} on {where} yet{message}")
        roles, role = roles_of(cluster), f"role {tenant.name}"
        entry, said = roles.get(tenant.name), listed(cluster, tenant.name)
        if entry is not None and entry.get("ensure") != "absent":
            return _waits(f"{role} taken out of {where}'s managed roles; waiting for CloudNativePG to list it "
                          "not-managed", Apply(cluster_object(config, without(roles, tenant.name), cluster)))
        if entry is None:
            if said == "not-managed":
                roles[tenant.name] = {"name": tenant.name, "ensure": "absent",
                                      "comment": f"apprafter claim {tenant.claim}"}
                return _waits(f"{role} set to ensure: absent on {where}; CloudNativePG drops it",
                              Apply(cluster_object(config, roles, cluster)))
            if said is not None:
                return _waits(f"CloudNativePG still lists {role} {said} on {where}")
            return _forget(config, tenant, what, database, deleting, seen.get(secret_read))
        refused = ((((cluster.get("status") or {}).get("managedRolesStatus") or {}).get("cannotReconcile") or {})
                   .get(tenant.name))
        if refused:
            return _waits(f"{where} cannot drop {role}: {'; '.join(map(str, refused))}")
        if said != "reconciled":
            waits = f"CloudNativePG has not dropped {role} on {where} yet ({said or 'not listed'})"
            try:
                last = int(((cluster.get("metadata") or {}).get("annotations") or {}).get(NUDGE_ANNOTATION) or 0)
            except ValueError:
                last = 0
            if said == "pending-reconciliation" and seen.now - last >= NUDGE_SECONDS:
                return _waits(waits, Apply(cluster_object(config, roles, cluster, int(seen.now))))
            return _waits(waits)
        return _waits(f"{role} dropped; its entry taken out of {where}'s managed roles",
                      Apply(cluster_object(config, without(roles, tenant.name), cluster)))

    def drop_reads(self, claim: Mapping[str, Any], config: Shared, number: int) -> tuple[Read, ...]:
        """What `drop_one` reads of one generation's roles: the provider's Cluster, each role's Database and
        password Secret."""
        return (cluster_read(config), *(read for role in self.generation_roles(claim, number)
                                         for read in tenant_reads(config, role)))

    def beyond(self, claim: Mapping[str, Any], config: Shared) -> str | None:
        """A size whose share of the Cluster's volume is larger than the volume itself (the provider's: the webhook
        sees no live Cluster, whose volume is never smaller)."""
        tenant = tenant_of(claim)
        share = reservation(tenant, {}, config.storage_size)
        if share.fits:
            return None
        return (f"needs.pg.size {tenant.size}: its share of the Cluster's volume, {SHARES[tenant.size]}, is more than "
                f"the whole volume ({config.storage_size})")

    def unsized(self, claim: Mapping[str, Any], config: Shared) -> None:
        return None  # every size is a connection limit and a share of the volume (`_admitted`)

    def kept_in(self, config: Shared) -> str:
        return config.namespace  # beside the Cluster that holds the role and database

    def admit(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[tuple[str, str]]:
        """What the instances' volumes cannot take (the Cluster would keep its live size and class regardless)."""
        return volume_refusals(TYPE, BACKEND, old, new, "the Cluster")


def _admitted(claim: Mapping[str, Any], config: Shared, tenant: Tenant,
              cluster: Mapping[str, Any] | None) -> Waiting | tuple[Tenant, Condition]:
    """Whether the provider serves the claim as its need asks: its PostgreSQL major (`needs.pg.version`, against the
    major the Cluster runs or will run), and its share of the Cluster's volume (`reservation`). A new role that does
    not fit waits; a live role whose need grew past the room keeps its size (Size False), as a disk's volume does.
    Both wait for a change (a person's), never for time: no retry."""
    where = f"Cluster {config.namespace}/{config.name}"
    image, volume = kept(config, cluster)
    wanted, running = version_wanted(claim), major(image)
    if wanted is not None and wanted != running:
        return Waiting("VersionNotServed", f'needs.pg.version "{wanted}": ServiceProvider {config.provider} runs '
                       f"PostgreSQL {running} ({where}): ask for {running}, or select a provider that runs {wanted}",
                       Done())
    held = roles_of(cluster)
    share = reservation(tenant, held, volume)
    said = (f"{SHARES[tenant.size]} of {where}'s {volume} volume ({_bytes(share.others)} held by its other "
            "claims' shares, retained ones included)")
    if share.fits:
        return tenant, Condition(SIZE_CONDITION, "True", "AsRequested", f"needs.pg.size {tenant.size}: "
                                 f"{tenant.connection_limit} connections and {said}")
    room = (f"an administrator grows spec.config.storage.size of ServiceProvider {config.provider}, or drops "
            "retained data")
    if tenant.name not in held:
        return Waiting("ShareDoesNotFit", f"needs.pg.size {tenant.size}: its share does not fit: {said}; {room}, "
                       "or ask for a smaller size", Done())
    live = size_of(held[tenant.name]) or DEFAULT_SIZE
    kept_tenant = tenant._replace(size=live, connection_limit=CONNECTIONS[live])
    return kept_tenant, Condition(SIZE_CONDITION, "False", "ShareDoesNotFit", f"needs.pg.size {tenant.size}: its "
                                  f"share does not fit: {said}; the role keeps its {live} share ({SHARES[live]}, "
                                  f"{CONNECTIONS[live]} connections) until {room}")


def _where(config: Shared, login: Tenant, tenant: Tenant) -> str:
    """Where the app connects, in words: the claim's role and database, or its alternate and the database."""
    what = f"role and database {tenant.name}" if login == tenant else f"role {login.name} and database {tenant.name}"
    return f"{what} on {config.host}:{PORT}"


def _connection(config: Shared, login: Tenant, tenant: Tenant) -> dict[str, Any]:
    """status.connection: where the app connects, as which role, to which database (nothing secret)."""
    return {"host": config.host, "port": PORT, "user": login.name, "db": tenant.name}


def _bytes(count: int) -> str:
    """A byte count as a quantity: whole Gi, else whole Mi (rounded up)."""
    return f"{count // 2**30}Gi" if count % 2**30 == 0 and count else f"{-(-count // 2**20)}Mi"


def _waits(message: str, *writes: Apply | Delete) -> Step:
    """A drop step: these writes, and the drop waits (retried; CloudNativePG's status writes wake it sooner)."""
    return Step(Waiting("DataDropWaiting", message, Requeue(message)), writes)


def _forget(config: Shared, tenant: Tenant, what: str, database: Mapping[str, Any] | None, deleting: bool,
            secret: Mapping[str, Any] | None) -> Step:
    """The last steps, once neither the database nor the role is left: the Database resource, then the password
    Secret."""
    if database is not None:
        if deleting:
            return _waits(f"{what} is being deleted (CloudNativePG releases it)")
        return _waits(f"{what} deleted (CloudNativePG releases it)",
                      Delete(DATABASE, config.namespace, tenant.object_name))
    if secret is not None:
        return Step(Gone(), (Delete(SECRET, config.namespace, tenant.object_name),))
    return Step(Gone())


CORE = CloudNativePG()
