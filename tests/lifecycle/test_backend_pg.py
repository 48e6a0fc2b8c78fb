"""The cloudnative-pg backend's core (lifecycle/backends/pg.py, pg_cluster.py): the Cluster a provider's config gives
(sizes, Guaranteed, shared_buffers below the limit, the pg_hba that confines each role to its own database), a
claim's deterministic role and database name (no two claims the same, at most 63 bytes, never a reserved name), the
provisioning steps (the password Secret once, the Cluster, the Database once its owner is reconciled), readiness from
what CloudNativePG reports, and the drop, step by step on CloudNativePG's word; what no step does (write the
claim's connection Secret, take a fresh password it has no use for, say a secret); and a claim's whole life, provisioned
and dropped, against a CloudNativePG played here (at once, or reporting one pass late)."""

from __future__ import annotations

import base64
import copy
import itertools
import re
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import pytest

from controller_runtime.outcomes import Requeue
from lifecycle.backends import pg
from lifecycle.backends import pg_cluster as core
from lifecycle.backends.common import CLAIM_ANNOTATION, PROVIDER_LABEL, connection_secret_of
from lifecycle.backends.contract import Again, Apply, CreateOnce, Delete, Gone, Read, Ready, Seen, Site, Step, Waiting
from lifecycle.backends.pg import CORE

NS = "apprafter-pg"
IMAGE = "localhost/postgresql:15"
FRESH = "a-fresh-password"


def provider(name: str = "pg-integrated", **config: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"type": "pg", "backend": "cloudnative-pg",
                                                 **({"config": config} if config else {})}}


def claim(namespace: str = "shop", name: str = "cart-pg", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ResourceClaim",
            "metadata": {"namespace": namespace, "name": name, "uid": "0a1b", "labels": labels},
            "spec": {"type": "pg", "selector": {}}}


def shared(**config: Any) -> core.Shared:
    found = CORE.configure(provider(**config), Site(NS, IMAGE))
    assert isinstance(found, core.Shared), found
    return found


def with_role(found: core.Shared, tenant: core.Tenant, live: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Cluster a provisioning pass applies: the live roles kept, the claim's added."""
    roles = core.roles_of(live)
    roles[tenant.name] = core.role_entry(tenant)
    return core.cluster_object(found, roles, live)


def seen(cluster: dict[str, Any] | None = None, database: dict[str, Any] | None = None,
         secret: dict[str, Any] | None = None, now: float = 0, of: dict[str, Any] | None = None) -> Seen:
    reads = CORE.reads(of or claim(), shared())
    return Seen(dict(zip(reads, (cluster, database, secret, None), strict=False)), None, FRESH, now)


SHIPPED = {"cluster": "platform-postgres", "namespace": "apprafter-pg", "instances": 2,
           "storage": {"size": "20Gi"}, "resources": {"cpu": "1", "memory": "2Gi"}, "sharedBuffersPercent": 25}


def test_the_shipped_config_gives_the_cluster_its_name_namespace_and_sizes() -> None:
    found = shared(**SHIPPED)
    assert found == core.Shared("pg-integrated", "platform-postgres", "apprafter-pg", 2, "20Gi", None, "1", "2Gi",
                                "512MB", IMAGE)
    assert found.host == "platform-postgres-rw.apprafter-pg.svc"


def test_a_provider_without_config_gets_the_schemas_defaults_in_the_platforms_pg_namespace() -> None:
    found = CORE.configure(provider(), Site("elsewhere", IMAGE))
    assert found == core.Shared("pg-integrated", "pg-integrated", "elsewhere", 1, "1Gi", None, "250m", "256Mi",
                                "64MB", IMAGE)
    assert CORE.configure(provider(), Site("elsewhere", None)) == [
        "the operator runs no CloudNativePG Cluster here (no PostgreSQL image for it)"]


@pytest.mark.parametrize(("memory", "percent", "buffers"), [
    ("128Mi", 25, "32MB"), ("256Mi", 25, "64MB"), ("1Gi", 25, "256MB"), ("8Gi", 25, "2048MB"), ("1G", 25, "238MB"),
    ("2Gi", 40, "819MB"), ("128Mi", 5, "6MB"), ("1Gi", 5, "51MB")])
def test_shared_buffers_is_the_share_of_the_memory_limit_in_whole_mb(memory: str, percent: int,
                                                                      buffers: str) -> None:
    assert shared(resources={"cpu": "1", "memory": memory}, sharedBuffersPercent=percent).shared_buffers == buffers


def test_a_config_that_does_not_hold_says_each_problem_the_schema_first() -> None:
    # what the schema says (the webhook's own words), before anything of the core's own
    said = CORE.configure(provider(cluster="Bad_Name", instances=0, sharedBuffersPercent=60), Site(NS, IMAGE))
    assert isinstance(said, list) and len(said) == 3
    assert any(p.startswith("spec.config.cluster:") for p in said)
    assert any(p.startswith("spec.config.instances: 0 is less than the minimum of 1") for p in said)
    # what only the core checks: sizes the schema's quantity pattern lets through
    assert CORE.configure(provider(resources={"cpu": "0", "memory": "64Mi"}, storage={"size": "1k"}),
                          Site(NS, IMAGE)) == [
        "spec.config.resources.memory: '64Mi' is not a memory quantity of at least 128Mi",
        "spec.config.resources.cpu: '0' is not a CPU quantity (250m, 1, 1.5)",
        "spec.config.storage.size: '1k' is not a memory quantity of at least 1Mi"]


def test_the_cluster_is_guaranteed_confines_each_role_and_manages_the_claims_role() -> None:
    found = shared(**{**SHIPPED, "storage": {"size": "20Gi", "storageClassName": "local-path"}})
    cluster = with_role(found, core.tenant_of(claim()))
    assert (cluster["apiVersion"], cluster["kind"], cluster["metadata"]["name"], cluster["metadata"]["namespace"]) == (
        "postgresql.cnpg.io/v1", "Cluster", "platform-postgres", "apprafter-pg")
    spec = cluster["spec"]
    assert spec["resources"]["requests"] == spec["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert (spec["instances"], spec["imageName"], spec["storage"]) == (2, IMAGE, {"size": "20Gi",
                                                                               "storageClass": "local-path"})
    assert spec["postgresql"] == {"parameters": {"shared_buffers": "512MB"},
                                  "pg_hba": ["host sameuser all all scram-sha-256",
                                                 "host samerole all all scram-sha-256", "host all all all reject"]}
    assert spec["enableSuperuserAccess"] is False
    assert spec["managed"]["roles"] == [{"name": "shop.cart-pg", "ensure": "present", "login": True,
                                         "passwordSecret": {"name": "shop.cart-pg"}, "connectionLimit": 10,
                                         "comment": "apprafter claim shop/cart-pg"}]
    assert "resourceVersion" not in cluster["metadata"]


def test_the_cluster_keeps_every_role_it_manages_and_adds_the_claims() -> None:
    found = shared(**SHIPPED)
    first, second = core.tenant_of(claim("a", "x-pg")), core.tenant_of(claim("b", "x-pg"))
    admins = {"name": "reporting", "login": True, "connectionLimit": -1, "inherit": True, "ensure": "present"}
    live = with_role(found, second)
    live["spec"]["managed"]["roles"].append(admins)
    live["metadata"]["resourceVersion"] = "41"
    merged = with_role(found, first, live)
    assert [r["name"] for r in merged["spec"]["managed"]["roles"]] == ["a.x-pg", "b.x-pg", "reporting"]
    assert merged["spec"]["managed"]["roles"][2] == admins  # kept as it is
    assert merged["metadata"]["resourceVersion"] == "41"  # applied only over what was read
    assert with_role(found, first, merged)["spec"]["managed"]["roles"] == merged["spec"]["managed"]["roles"]


def test_a_claims_role_and_database_are_its_namespace_and_name() -> None:
    tenant = core.tenant_of(claim())
    assert tenant == core.Tenant("shop.cart-pg", "shop.cart-pg", "shop/cart-pg", 10)
    assert core.tenant_of(claim("shop", "cart-pg")) == tenant  # the same app and need: the same role and data


@pytest.mark.parametrize(("size", "limit"), [(None, 10), ("nano", 5), ("small", 10), ("medium", 20), ("large", 30),
                                           ("xlarge", 50)])
def test_a_claims_role_may_hold_the_connections_its_needs_size_gives_and_no_more(size: str | None,
                                                                                 limit: int) -> None:
    sized = claim()
    if size is not None:
        sized["spec"]["size"] = size
    entry = core.role_entry(core.tenant_of(sized))
    assert entry["connectionLimit"] == limit
    assert limit <= 100 // 2  # at most half of the Cluster's default max_connections, whatever the size


def test_a_name_too_long_for_postgres_is_cut_and_hashed_to_exactly_63_bytes() -> None:
    namespace = "n" * 63
    long = core.tenant_of(claim(namespace, "an-app-with-a-long-name-pg"))
    assert len(long.name.encode()) == 63 and long.name.startswith("n" * 42 + "-")
    assert re.fullmatch(r"claim-[0-9a-f]{20}", long.object_name)
    assert long.name[-20:] == long.object_name[-20:]
    # the longest plain name is 62 bytes; 63 is always hashed
    assert core.tenant_of(claim("a" * 30, "b" * 31)).name == "a" * 30 + "." + "b" * 31
    assert len(core.tenant_of(claim("a" * 30, "b" * 32)).name) == 63
    assert core.tenant_of(claim("a" * 30, "b" * 32)).object_name.startswith("claim-")


NAMESPACES = ["a", "a-b", "shop", "pg", "cnpg", "streaming", "postgres", "current", "x" * 40, "y" * 63]
CLAIMS = ["b", "b-c", "c", "cart-pg", "replica", "user", "app", "pg", "a.b", "z" * 20, "z" * 21, "q" * 200]


def test_no_two_claims_get_the_same_role_database_or_object_and_none_is_reserved() -> None:
    tenants = [core.tenant_of(claim(n, c)) for n, c in itertools.product(NAMESPACES, CLAIMS)]
    assert len({t.name for t in tenants}) == len({t.object_name for t in tenants}) == len(tenants)
    dns_subdomain = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    for tenant in tenants:
        assert len(tenant.name.encode()) <= 63
        # never a name PostgreSQL or CloudNativePG reserves, nor the Cluster's own app database and owner
        assert tenant.name not in ("postgres", "app", "template0", "template1", "streaming_replica", "public",
                                   "none", "current_user", "session_user", "current_role")
        assert not tenant.name.startswith(("pg_", "cnpg_"))
        assert dns_subdomain.match(tenant.object_name) and len(tenant.object_name) <= 253
    # the separators alone never make two the same: a-b/c, a/b-c and a/b.c
    assert len({core.tenant_of(claim(n, c)).name for n, c in (("a-b", "c"), ("a", "b-c"), ("a", "b.c"))}) == 3


def test_the_core_serves_pg_on_cloudnative_pg_and_needs_the_provider_to_drop() -> None:
    assert (CORE.type, CORE.backend, CORE.drop_needs_provider) == ("pg", "cloudnative-pg", True)
    cnpg = "postgresql.cnpg.io/v1"
    assert (tuple(pg.CLUSTER), tuple(pg.DATABASE)) == ((cnpg, "Cluster"), (cnpg, "Database"))


def test_the_password_secret_is_basic_auth_in_the_clusters_namespace_labelled_for_its_provider_and_claim() -> None:
    found, tenant = shared(**SHIPPED), core.tenant_of(claim())
    [made] = CORE.provision(claim(), found, Seen({}, None, "pw", 0)).writes
    assert isinstance(made, CreateOnce)
    secret = made.obj
    assert (secret["type"], secret["metadata"]["namespace"], secret["metadata"]["name"]) == (
        "kubernetes.io/basic-auth", "apprafter-pg", "shop.cart-pg")
    assert secret["metadata"]["labels"] == {PROVIDER_LABEL: "pg-integrated", "cnpg.io/reload": "true"}
    assert secret["metadata"]["annotations"] == {CLAIM_ANNOTATION: "shop/cart-pg"}
    assert core.password_in(secret, tenant) == "pw"
    assert core.password_in(secret, core.tenant_of(claim("other"))) is None
    assert core.password_in(None, tenant) is None
    assert core.password_in({"data": {"username": "%%%"}}, tenant) is None


def test_the_database_is_owned_by_the_role_retained_and_labelled_for_its_provider_and_claim() -> None:
    found = shared(**SHIPPED)
    step = CORE.provision(claim(), found, Seen(dict(zip(CORE.reads(claim(), found), (
        cnpg_cluster(), None, password_secret(), None), strict=False)), None, FRESH, 0))
    [database] = [w.obj for w in step.writes if isinstance(w, Apply) and w.obj["kind"] == "Database"]
    assert (database["apiVersion"], database["metadata"]["namespace"], database["metadata"]["name"]) == (
        "postgresql.cnpg.io/v1", "apprafter-pg", "shop.cart-pg")
    assert database["spec"] == {"cluster": {"name": "platform-postgres"}, "name": "shop.cart-pg",
                                "owner": "shop.cart-pg", "ensure": "present", "databaseReclaimPolicy": "retain"}
    assert database["metadata"]["labels"] == {**pg.CLUSTER_LABELS, PROVIDER_LABEL: "pg-integrated"}
    assert database["metadata"]["annotations"] == {CLAIM_ANNOTATION: "shop/cart-pg"}
    [cluster] = [w.obj for w in step.writes if isinstance(w, Apply) and w.obj["kind"] == "Cluster"]
    assert cluster["metadata"]["labels"][PROVIDER_LABEL] == "pg-integrated"
    assert pg.CLUSTER_LABELS.items() <= cluster["metadata"]["labels"].items()  # what the watch selects on


def cnpg_cluster(ready: bool = True, reconciled: tuple[str, ...] = ("shop.cart-pg",), version: str = "7",
                 cannot: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """A Cluster as CloudNativePG reports it (status.conditions Ready, status.managedRolesStatus)."""
    return {"metadata": {"name": "pg-integrated", "namespace": NS, "resourceVersion": "3"},
            "status": {"phase": "Cluster in healthy state" if ready else "Setting up primary",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "managedRolesStatus": {
                           "byStatus": {"reconciled": list(reconciled), "reserved": ["postgres", "streaming_replica"]},
                           **({"cannotReconcile": cannot} if cannot else {}),
                           "passwordStatus": {name: {"transactionID": 750, "resourceVersion": version}
                                              for name in reconciled}}}}


def password_secret(password: str = "pw", version: str = "7") -> dict[str, Any]:
    made = core.password_secret_object(shared(), core.tenant_of(claim()), password)
    made["metadata"]["resourceVersion"] = version
    return made


def test_the_password_secret_comes_first_made_once_from_the_fresh_password() -> None:
    first = CORE.provision(claim(), shared(), seen())
    assert isinstance(first.then, Again) and len(first.writes) == 1
    [made] = first.writes
    assert isinstance(made, CreateOnce) and made.obj["type"] == "kubernetes.io/basic-auth"
    assert {k: base64.b64decode(v).decode() for k, v in made.obj["data"].items()} == {
        "username": "shop.cart-pg", "password": FRESH}
    assert "ownerReferences" not in made.obj["metadata"]  # it outlives the claim
    # a Secret of that name without this role's password: written anew (an apply), from the fresh one
    other = core.password_secret_object(shared(), core.tenant_of(claim("other")), "x")
    again = CORE.provision(claim(), shared(), seen(secret=other))
    assert isinstance(again.then, Again) and isinstance(again.writes[0], Apply)
    # once it holds one, never again: the fresh password is not used
    kept = CORE.provision(claim(), shared(), seen(secret=password_secret("pw")))
    assert all(FRESH not in str(w) for w in kept.writes) and not isinstance(kept.then, Again)


def test_the_database_is_written_only_once_cloudnative_pg_reconciled_its_owner_with_its_password() -> None:
    def kinds(cluster: dict[str, Any] | None) -> list[str]:
        step = CORE.provision(claim(), shared(), seen(cluster, None, password_secret()))
        return [w.obj["kind"] for w in step.writes if isinstance(w, Apply)]
    assert kinds(None) == ["Cluster"]  # made lazily, with the claim's role
    assert kinds(cnpg_cluster(ready=False)) == ["Cluster"]
    assert kinds(cnpg_cluster(reconciled=())) == ["Cluster"]
    assert kinds(cnpg_cluster(version="6")) == ["Cluster"]  # its password not applied yet
    assert kinds(cnpg_cluster()) == ["Cluster", "Database"]


def test_readiness_follows_the_cluster_the_role_and_the_database_in_that_order() -> None:
    found, tenant = shared(**SHIPPED), core.tenant_of(claim())
    secret = {"metadata": {"resourceVersion": "7"}}
    database = {"metadata": {"generation": 1}, "status": {"applied": True, "observedGeneration": 1}}
    where = "Cluster apprafter-pg/platform-postgres"

    def said(cluster: dict[str, Any] | None, db: dict[str, Any] | None = database) -> tuple[str, str, bool] | None:
        waits = core.readiness(found, tenant, cluster, secret, db)
        return None if waits is None else (waits.reason, waits.message, isinstance(waits.retry, Requeue))
    assert said(None) == ("InstanceNotReady", f"{where} is being created", True)
    assert said(cnpg_cluster(ready=False)) == ("InstanceNotReady", f"{where} is not ready yet (Setting up primary)",
                                               True)
    assert said({"status": {}}) == ("InstanceNotReady", f"{where} is not ready yet (no phase yet)", True)
    assert said(cnpg_cluster(reconciled=("other",))) == (
        "RoleNotReady", f"role shop.cart-pg is not reconciled on {where} yet", True)
    # a refusal does not pass by itself: not retried (a change of the Cluster wakes the claim)
    assert said(cnpg_cluster(reconciled=(), cannot={"shop.cart-pg": ["wrong username"]})) == (
        "BackendRefused", f"{where} cannot reconcile role shop.cart-pg: wrong username", False)
    assert said(cnpg_cluster(version="6")) == (
        "RoleNotReady", f"role shop.cart-pg's password (Secret apprafter-pg/shop.cart-pg) is not applied on {where} "
                        "yet", True)
    assert said(cnpg_cluster(), None) == ("DatabaseNotReady", "Database apprafter-pg/shop.cart-pg is being created",
                                          True)
    refused = {"metadata": {"generation": 1}, "status": {"applied": False, "message": 'role "x" does not exist'}}
    assert said(cnpg_cluster(), refused) == (
        "DatabaseNotReady", f'Database apprafter-pg/shop.cart-pg is not applied on {where} yet: role "x" does not '
                            "exist", True)
    stale = {"metadata": {"generation": 2}, "status": {"applied": True, "observedGeneration": 1}}
    assert said(cnpg_cluster(), stale) == (
        "DatabaseNotReady", f"Database apprafter-pg/shop.cart-pg is not applied on {where} yet", True)
    assert said(cnpg_cluster()) is None


def test_a_ready_claim_gets_every_connection_field_and_its_status_no_password() -> None:
    database = {"metadata": {"generation": 1}, "status": {"applied": True, "observedGeneration": 1}}
    step = CORE.provision(claim(), shared(**SHIPPED), Seen(dict(zip(CORE.reads(claim(), shared(**SHIPPED)), (
        cnpg_cluster(), database, password_secret("p/w@:x"), None), strict=False)), None, FRESH, 0))
    assert isinstance(step.then, Ready)
    host = "platform-postgres-rw.apprafter-pg.svc"
    url = f"postgresql://shop.cart-pg:p%2Fw%40%3Ax@{host}:5432/shop.cart-pg"
    # no pooler (the operator has no PgBouncer image here): the pooled URL is the direct one
    assert step.then.secret == {"url": url, "pooledUrl": url, "host": host, "port": "5432", "user": "shop.cart-pg",
                                "password": "p/w@:x", "db": "shop.cart-pg"}
    parts = urlsplit(step.then.secret["url"])
    assert (parts.hostname, parts.port, parts.path, parts.password) == (host, 5432, "/shop.cart-pg", "p%2Fw%40%3Ax")
    assert step.then.connection == {"host": host, "port": 5432, "user": "shop.cart-pg", "db": "shop.cart-pg"}
    assert "p/w@:x" not in step.then.message
    # the connection Secret is the reconciler's to write, never a step's
    assert all(w.obj["metadata"]["namespace"] == "apprafter-pg" for w in step.writes if isinstance(w, Apply))


def test_the_reads_are_the_cluster_the_database_and_the_password_secret() -> None:
    cluster, database, secret, pooler, alt_database, alt_secret, job = CORE.reads(claim(), shared(**SHIPPED))
    assert (pooler.kind.kind, pooler.namespace, pooler.name) == ("Pooler", "apprafter-pg", "platform-postgres-pooler")
    alternate = core.tenant_of(claim(), alternate=True)  # the alternate login role (lifecycle.backends.pg_roles)
    assert alternate.name == "shop.cart-pg~b" and alternate.object_name.startswith("claim-")
    assert (alt_database.name, alt_secret.name, job.kind.kind, job.name) == (
        alternate.object_name, alternate.object_name, "Job", f"{alternate.object_name}-set-role")
    assert (cluster.kind.kind, cluster.namespace, cluster.name) == ("Cluster", "apprafter-pg", "platform-postgres")
    assert (database.kind.kind, database.name, secret.kind.kind, secret.name) == (
        "Database", "shop.cart-pg", "Secret", "shop.cart-pg")
    assert all(isinstance(r, Read) for r in (cluster, database, secret))


# --- the drop (lifecycle.retention let the deleted claim's data go) -----------------------------------------------

ROLE = "shop.cart-pg"
OTHER = {"name": "shop.orders-pg", "ensure": "present", "login": True, "passwordSecret": {"name": "shop.orders-pg"}}


def live_cluster(*roles: dict[str, Any], listed: dict[str, list[str]] | None = None,
                 refused: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The Cluster as the API server holds it: its managed roles, and what CloudNativePG last said of them."""
    spec = with_role(shared(), core.tenant_of(claim()))["spec"]
    spec["managed"]["roles"] = list(roles)
    return {"apiVersion": core.CNPG, "kind": "Cluster",
            "metadata": {"name": "pg-integrated", "namespace": NS, "resourceVersion": "77"}, "spec": spec,
            "status": {"managedRolesStatus": {"byStatus": listed or {}, **({"cannotReconcile": refused}
                                                                           if refused else {})}}}


def live_database(ensure: str = "present", generation: int = 1, applied: bool | None = True,
                  observed: int = 1, message: str = "", deleting: bool = False) -> dict[str, Any]:
    database = core.database_object(shared(), core.tenant_of(claim()), ensure)
    database["metadata"].update({"generation": generation, **({"deletionTimestamp": "2026-12-05T05:00:00Z"}
                                                               if deleting else {})})
    database["status"] = {"observedGeneration": observed, **({"applied": applied} if applied is not None else {}),
                          **({"message": message} if message else {})}
    return database


PASSWORD = {"metadata": {"name": ROLE, "namespace": NS}}


class DropStep(NamedTuple):
    """A drop step as the old tests read it: the object applied, the kind deleted, why it waits (None: done)."""

    apply: dict[str, Any] | None = None
    delete: str | None = None
    waits: str | None = None


def read_step(found: Step) -> DropStep:
    applied = [w.obj for w in found.writes if isinstance(w, Apply)]
    deleted = [w.kind.kind for w in found.writes if isinstance(w, Delete)]
    assert len(applied) + len(deleted) <= 1 and not found.calls
    if isinstance(found.then, Waiting):
        assert isinstance(found.then.retry, Requeue)  # a drop step passes by itself: retried
        waits: str | None = found.then.message
    else:
        assert isinstance(found.then, Gone)
        waits = None
    return DropStep(applied[0] if applied else None, deleted[0] if deleted else None, waits)


def step(cluster: dict[str, Any] | None, database: dict[str, Any] | None,
         secret: dict[str, Any] | None = PASSWORD, now: float = 0) -> DropStep:
    return read_step(CORE.drop(claim(), shared(), seen(cluster, database, secret, now)))


def roles_of(obj: dict[str, Any] | None) -> list[dict[str, Any]]:
    assert obj is not None and obj["kind"] == "Cluster"
    assert obj["metadata"]["resourceVersion"] == "77"  # written under the live version: a concurrent pass is seen
    roles: list[dict[str, Any]] = obj["spec"]["managed"]["roles"]
    return roles


def test_the_drop_first_sets_the_database_absent_and_waits_for_cloudnative_pg_to_drop_it() -> None:
    mine = core.role_entry(core.tenant_of(claim()))
    cluster = live_cluster(mine, OTHER, listed={"reconciled": [ROLE, "shop.orders-pg"]})
    first = step(cluster, live_database())
    assert first.apply == core.database_object(shared(), core.tenant_of(claim()), "absent")
    assert first.apply["kind"] == "Database" and first.apply["spec"]["ensure"] == "absent"
    assert first.apply["spec"]["databaseReclaimPolicy"] == "retain" and first.delete is None
    assert first.waits == (f"Database {NS}/{ROLE} set to ensure: absent; CloudNativePG drops database {ROLE}")
    # written, not yet applied at that generation (the earlier generation's applied says nothing of it)
    assert step(cluster, live_database("absent", generation=2, observed=1)) == DropStep(
        waits=f"CloudNativePG has not dropped database {ROLE} on Cluster {NS}/pg-integrated yet")
    # CloudNativePG could not drop it: its words
    assert step(cluster, live_database("absent", generation=2, applied=False, observed=1, message=(
        f'while dropping database "{ROLE}": database "{ROLE}" is being accessed by other users'))).waits == (
        f"CloudNativePG has not dropped database {ROLE} on Cluster {NS}/pg-integrated yet: while dropping database "
        f'"{ROLE}": database "{ROLE}" is being accessed by other users')


def test_then_the_role_leaves_the_managed_roles_and_comes_back_absent_once_listed_not_managed() -> None:
    mine = core.role_entry(core.tenant_of(claim()))
    dropped_db = live_database("absent", generation=2, observed=2)
    handed_back = step(live_cluster(mine, OTHER, listed={"reconciled": [ROLE, "shop.orders-pg"]}), dropped_db)
    assert roles_of(handed_back.apply) == [OTHER]  # the other claim's role untouched
    assert handed_back.waits == (f"role {ROLE} taken out of Cluster {NS}/pg-integrated's managed roles; waiting for "
                                 "CloudNativePG to list it not-managed")
    # the status CloudNativePG computed before that write still says reconciled: nothing is decided on it
    stale = step(live_cluster(OTHER, listed={"reconciled": [ROLE, "shop.orders-pg"]}), dropped_db)
    assert stale == DropStep(waits=f"CloudNativePG still lists role {ROLE} reconciled on Cluster "
                                        f"{NS}/pg-integrated")
    absent = step(live_cluster(OTHER, listed={"reconciled": ["shop.orders-pg"], "not-managed": ["app", ROLE]}),
                  dropped_db)
    assert roles_of(absent.apply) == [{"name": ROLE, "ensure": "absent", "comment": "apprafter claim shop/cart-pg"},
                                      OTHER]  # sorted by name
    assert absent.waits == f"role {ROLE} set to ensure: absent on Cluster {NS}/pg-integrated; CloudNativePG drops it"


def test_the_role_is_dropped_once_cloudnative_pg_says_reconciled_after_not_managed_then_its_entry_goes() -> None:
    gone = {"name": ROLE, "ensure": "absent", "comment": "apprafter claim shop/cart-pg"}
    where = f"Cluster {NS}/pg-integrated"
    # the status from before (not-managed), then CloudNativePG at work (pending-reconciliation)
    for listed in ({"not-managed": [ROLE]}, {"pending-reconciliation": [ROLE]}):
        state = next(iter(listed))
        assert step(live_cluster(gone, OTHER, listed=listed), None) == DropStep(
            waits=f"CloudNativePG has not dropped role {ROLE} on {where} yet ({state})")
    refused = step(live_cluster(gone, OTHER, listed={"pending-reconciliation": [ROLE]}, refused={ROLE: [
        f"could not perform DELETE on role {ROLE}: owner of database x"]}), None)
    assert refused == DropStep(waits=f"{where} cannot drop role {ROLE}: could not perform DELETE on role "
                                          f"{ROLE}: owner of database x")
    dropped = step(live_cluster(OTHER, gone, listed={"reconciled": ["shop.orders-pg", ROLE]}), None)
    assert roles_of(dropped.apply) == [OTHER]
    assert dropped.waits == f"role {ROLE} dropped; its entry taken out of {where}'s managed roles"


def test_a_drop_never_empties_the_managed_roles_a_keeper_stands_in() -> None:
    mine = core.role_entry(core.tenant_of(claim()))
    keeper = {"name": core.KEEPER_ROLE, "ensure": "absent"}
    assert roles_of(step(live_cluster(mine, listed={"reconciled": [ROLE]}), None).apply) == [keeper]
    back = step(live_cluster(keeper, listed={"reconciled": [core.KEEPER_ROLE], "not-managed": [ROLE]}), None)
    assert [r["name"] for r in roles_of(back.apply)] == [core.KEEPER_ROLE, ROLE]
    gone = {"name": ROLE, "ensure": "absent"}
    assert roles_of(step(live_cluster(gone, keeper, listed={"reconciled": [ROLE, core.KEEPER_ROLE]}),
                         None).apply) == [keeper]
    assert "." not in core.KEEPER_ROLE  # no claim's role: every one has a dot
    # a claim that comes later keeps it (harmless: CloudNativePG keeps it absent) and adds its own role
    later = with_role(shared(), core.tenant_of(claim("shop", "new-pg")), live_cluster(keeper))
    assert [r["name"] for r in later["spec"]["managed"]["roles"]] == [core.KEEPER_ROLE, "shop.new-pg"]


def test_once_the_role_is_listed_nowhere_its_database_resource_then_its_password_secret_go() -> None:
    cluster = live_cluster(OTHER, listed={"reconciled": ["shop.orders-pg"]})
    dropped_db = live_database("absent", generation=2, observed=2)
    assert step(cluster, dropped_db) == DropStep(
        delete="Database", waits=f"Database {NS}/{ROLE} deleted (CloudNativePG releases it)")
    assert step(cluster, live_database("absent", generation=3, observed=2, deleting=True)) == DropStep(
        waits=f"Database {NS}/{ROLE} is being deleted (CloudNativePG releases it)")
    assert step(cluster, None) == DropStep(delete="Secret")
    assert step(cluster, None, None) == DropStep()  # done


def test_without_a_cluster_there_is_no_database_or_role_left_only_their_resources_go() -> None:
    assert step(None, live_database()).delete == "Database"
    assert step(None, None) == DropStep(delete="Secret")
    assert step(None, None, None) == DropStep()


def test_a_claim_whose_role_cloudnative_pg_never_made_is_done_once_its_entry_is_out() -> None:
    mine = core.role_entry(core.tenant_of(claim()))
    first = step(live_cluster(mine, OTHER, listed={"pending-reconciliation": [ROLE]}), None)
    assert roles_of(first.apply) == [OTHER]
    assert step(live_cluster(OTHER, listed={"reconciled": ["shop.orders-pg"]}), None) == DropStep(
        delete="Secret")


def test_a_role_listed_pending_gets_the_cluster_nudged_at_most_every_ten_seconds() -> None:
    """CloudNativePG's DROP ROLE writes nothing new to the Cluster, so its instance manager may not list the role
    again until the Cluster changes: the drop touches it (an annotation), never more often than NUDGE_SECONDS."""
    gone = {"name": ROLE, "ensure": "absent"}
    pending = live_cluster(gone, OTHER, listed={"pending-reconciliation": [ROLE]})
    waits = f"CloudNativePG has not dropped role {ROLE} on Cluster {NS}/pg-integrated yet (pending-reconciliation)"
    nudge = step_at(pending, 1_700_000_000.5)
    assert nudge.waits == waits and nudge.apply is not None
    assert nudge.apply["metadata"]["annotations"] == {core.NUDGE_ANNOTATION: "1700000000"}
    assert roles_of(nudge.apply) == [gone, OTHER]  # the roles as they are
    pending["metadata"]["annotations"] = {core.NUDGE_ANNOTATION: "1700000000"}
    assert step_at(pending, 1_700_000_009) == DropStep(waits=waits)
    assert step_at(pending, 1_700_000_010).apply is not None
    # only while CloudNativePG lists it pending: a stale not-managed waits for its own write's recomputation
    stale = live_cluster(gone, OTHER, listed={"not-managed": [ROLE]})
    assert step_at(stale, 1_700_000_000).apply is None
    # another claim's pass keeps it (else it would take it away, and wake the drop to nudge again)
    kept = with_role(shared(), core.tenant_of(claim("shop", "new-pg")), pending)
    assert kept["metadata"]["annotations"] == {core.NUDGE_ANNOTATION: "1700000000"}


def step_at(cluster: dict[str, Any], now: float) -> DropStep:
    return step(cluster, None, PASSWORD, now)


def test_the_major_is_read_from_the_tag_as_cloudnative_pg_reads_it() -> None:
    assert core.major("ghcr.io/apprafter/postgresql:15") == "15"
    assert core.major("registry.example.com:5000/pg/postgresql:16.4-3@sha256:" + "a" * 64) == "16"
    assert core.major("localhost/postgresql:17-bookworm") == "17"


def test_a_new_default_image_never_moves_the_live_cluster_to_another_major_nor_shrinks_its_volume() -> None:
    live = {"spec": {"imageName": "ghcr.io/apprafter/postgresql:15", "storage": {"size": "20Gi"}}}
    # another major: the live image stays (a major upgrade is an administrator's act); a bigger volume: the live one
    newer = shared()._replace(image="ghcr.io/apprafter/postgresql:16")
    assert core.kept(newer, live) == ("ghcr.io/apprafter/postgresql:15", "20Gi")
    # the same major (a minor update) and a larger size apply
    grown = shared(storage={"size": "40Gi"})._replace(image="ghcr.io/apprafter/postgresql:15.8")
    assert core.kept(grown, live) == ("ghcr.io/apprafter/postgresql:15.8", "40Gi")
    assert core.kept(newer, None) == ("ghcr.io/apprafter/postgresql:16", "1Gi")  # a new Cluster
    cluster = with_role(newer, core.tenant_of(claim()), live)
    assert (cluster["spec"]["imageName"], cluster["spec"]["storage"]["size"]) == ("ghcr.io/apprafter/postgresql:15",
                                                                                  "20Gi")


def test_a_provider_whose_volumes_would_shrink_is_refused_and_growing_is_not() -> None:
    small, big = provider(storage={"size": "10Gi"}), provider(storage={"size": "20Gi"})
    assert CORE.admit(big, small) == [("spec.config.storage.size", "10Gi is smaller than 20Gi: a volume never shrinks "
                                       "(the Cluster keeps 20Gi); move the data to a new provider to use less")]
    assert CORE.admit(small, big) == [] and CORE.admit(big, big) == [] and CORE.admit(None, small) == []
    # the default size is the schema's (1Gi), and the class its volumes were made with stays
    assert [f for f, _ in CORE.admit(provider(), provider(storage={"size": "512Mi"}))] == ["spec.config.storage.size"]
    assert CORE.admit(provider(), provider(storage={"storageClassName": "fast"})) == [(
        "spec.config.storage.storageClassName", "the Cluster keeps the class its volumes were made with (the "
        "default); move the data to a new provider to use another")]
    redis = {"spec": {"type": "redis", "backend": "redis-server", "config": {}}}
    assert CORE.admit(redis, redis) == []


# --- what no step does: write the connection Secret, take a fresh password it has no use for --------------------

DATABASES = (None, {"metadata": {"generation": 1}, "status": {"applied": True, "observedGeneration": 1}},
             {"metadata": {"generation": 2}, "spec": {"ensure": "absent"}, "status": {}})
CLUSTERS = (None, cnpg_cluster(ready=False), cnpg_cluster(reconciled=()), cnpg_cluster(version="6"), cnpg_cluster(),
            live_cluster(core.role_entry(core.tenant_of(claim())), OTHER, listed={"reconciled": [ROLE]}),
            live_cluster(OTHER, listed={"not-managed": [ROLE]}))
UNUSABLE = {"another role's": core.password_secret_object(shared(), core.tenant_of(claim("other")), "x"),
            "not base64": {"metadata": {"name": ROLE}, "data": {"username": "%%%", "password": "%%%"}},
            "no password": {"metadata": {"name": ROLE}, "data": {"username": base64.b64encode(ROLE.encode()).decode()}},
            "no data": {"metadata": {"name": ROLE}}}


def every_step() -> list[tuple[str, Step]]:
    """Each provisioning and drop step over every combination of what the edge may have read."""
    steps = []
    secrets = (None, password_secret(), *UNUSABLE.values())
    for cluster, database, secret in itertools.product(CLUSTERS, DATABASES, secrets):
        for name, answer in (("provision", CORE.provision), ("drop", CORE.drop)):
            steps.append((name, answer(claim(), shared(), seen(cluster, database, secret, 1_700_000_000))))
    return steps


def test_no_step_ever_writes_the_claims_connection_secret_or_anything_in_the_claims_namespace() -> None:
    conn = connection_secret_of(claim(**{"app.kubernetes.io/name": "cart"}))
    assert conn == "cart-pg-conn"
    for _, found in every_step():
        for write in found.writes:
            obj = write.obj if isinstance(write, Apply | CreateOnce) else None
            namespace = obj["metadata"]["namespace"] if obj is not None else getattr(write, "namespace", None)
            name = obj["metadata"]["name"] if obj is not None else getattr(write, "name", None)
            assert namespace == NS and name != conn, write  # only the Cluster's namespace, never the claim's
            assert obj is None or "ownerReferences" not in obj["metadata"]


@pytest.mark.parametrize("why", list(UNUSABLE))
def test_the_fresh_password_is_taken_only_when_the_password_secret_is_absent_or_unusable(why: str) -> None:
    for cluster, database in itertools.product(CLUSTERS, DATABASES):
        absent = CORE.provision(claim(), shared(), seen(cluster, database, None))
        [created] = absent.writes
        assert isinstance(absent.then, Again) and isinstance(created, CreateOnce)
        assert core.password_in(created.obj, core.tenant_of(claim())) == FRESH
        unusable = CORE.provision(claim(), shared(), seen(cluster, database, UNUSABLE[why]))
        [written] = unusable.writes
        assert isinstance(unusable.then, Again) and isinstance(written, Apply)
        assert core.password_in(written.obj, core.tenant_of(claim())) == FRESH
        assert "resourceVersion" not in written.obj["metadata"]
    for kind, found in every_step():
        if kind == "drop" or not isinstance(found.then, Again):
            assert FRESH not in repr(found), (kind, found.then)  # nowhere: no write, no message, no Secret data


def test_nothing_secret_is_said_in_any_message() -> None:
    for _, found in every_step():
        if isinstance(found.then, Waiting | Ready | Again):
            said = found.then.why if isinstance(found.then, Again) else found.then.message
            assert "pw" not in said and FRESH not in said and "%%%" not in said


# --- a claim's whole life against CloudNativePG played here -------------------------------------------------------

CLUSTER_NAME = "pg-integrated"


class Bed:
    """The API server's objects in the Cluster's namespace and PostgreSQL behind them, with CloudNativePG played: it
    makes and drops roles and databases as the Cluster and the Databases say, and reports it on their status, at once
    or (`lag`) one pass late, as a CloudNativePG that has not recomputed its status yet would."""

    def __init__(self, lag: bool = False) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.roles: set[str] = set()
        self.databases: dict[str, str] = {}  # PostgreSQL's databases and their owners
        self.version, self.lag = 0, lag
        self.unsaid: dict[str, Any] = {"phase": "Setting up primary"}  # lag: what CloudNativePG has not said yet
        self.log: list[str] = []
        self.clusters: list[dict[str, Any]] = []  # every Cluster written

    def seen(self, of: dict[str, Any], fresh: str = FRESH, now: float = 0) -> Seen:
        reads = CORE.reads(of, shared())
        assert all(read.namespace == NS and read.name for read in reads)
        return Seen({r: copy.deepcopy(self.objects.get((r.kind.kind, str(r.name)))) for r in reads}, None, fresh,
                    now)

    def _bump(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)

    def write(self, found: Step) -> None:
        for write in found.writes:
            if isinstance(write, Delete):
                assert write.namespace == NS
                live = self.objects.get((write.kind.kind, write.name))
                if live is not None and write.kind.kind == "Database":  # CloudNativePG's finalizer: released later
                    live["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
                elif live is not None:
                    del self.objects[(write.kind.kind, write.name)]
                self.log.append(f"{write.kind.kind} deleted")
                continue
            obj, key = copy.deepcopy(write.obj), (write.obj["kind"], write.obj["metadata"]["name"])
            assert obj["metadata"]["namespace"] == NS
            live = self.objects.get(key)
            if live is not None and isinstance(write, CreateOnce):
                continue
            if live is not None and "resourceVersion" in obj["metadata"]:  # else a 409
                assert obj["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
            if obj["kind"] == "Cluster":
                assert obj["spec"]["managed"]["roles"], "never an empty list of managed roles"
                self.clusters.append(obj)
            generation = int(((live or {}).get("metadata") or {}).get("generation") or 0)
            if live is None or live.get("spec") != obj.get("spec"):
                generation += 1
            obj["metadata"]["generation"] = generation
            obj["status"] = (live or {}).get("status") or {}
            self._bump(obj)
            self.objects[key] = obj

    def cloudnative_pg(self) -> None:
        for key, database in list(self.objects.items()):
            if key[0] != "Database":
                continue
            meta, spec = database["metadata"], database["spec"]
            if meta.get("deletionTimestamp"):
                del self.objects[key]  # retained: PostgreSQL's database is left as it is
                continue
            done = {"applied": True, "observedGeneration": meta["generation"]}
            if spec["ensure"] == "absent":
                if self.databases.pop(spec["name"], None) is not None:
                    self.log.append("database dropped")
            elif spec["owner"] in self.roles:
                self.databases[spec["name"]] = spec["owner"]
            else:
                done = {"applied": False, "message": f'role "{spec["owner"]}" does not exist'}
            database["status"] = done
        cluster = self.objects.get(("Cluster", CLUSTER_NAME))
        if cluster is None:
            return
        wanted = {role["name"]: role for role in cluster["spec"]["managed"]["roles"]}
        cannot: dict[str, list[str]] = {}
        passwords: dict[str, dict[str, str]] = {}
        for name, role in wanted.items():
            if role.get("ensure") == "absent" and name in self.roles:
                if name in self.databases.values():
                    cannot[name] = [f"could not perform DELETE on role {name}: owner of a database"]
                else:
                    self.roles.discard(name)
                    self.log.append("role dropped")
            elif role.get("ensure") != "absent":
                secret = self.objects[("Secret", role["passwordSecret"]["name"])]
                self.roles.add(name)
                passwords[name] = {"resourceVersion": secret["metadata"]["resourceVersion"]}
        by_status = {"reconciled": sorted(set(wanted) - set(cannot)),
                     "not-managed": sorted(self.roles - set(wanted)), "reserved": ["postgres", "streaming_replica"]}
        status: dict[str, Any] = {"phase": "Cluster in healthy state",
                                  "conditions": [{"type": "Ready", "status": "True"}],
                                  "managedRolesStatus": {"byStatus": {k: v for k, v in by_status.items() if v},
                                                         "cannotReconcile": cannot, "passwordStatus": passwords}}
        if self.lag:
            status, self.unsaid = self.unsaid, status
        if cluster["status"] != status:
            cluster["status"] = status
            self._bump(cluster)

    def provision(self, of: dict[str, Any], label: str = "fresh", passes: int = 12) -> Ready:
        """Provisioning passes (each with a new fresh password `<label>-<claim>-<pass>`), CloudNativePG at work
        between them, until ready; the password it is ready with: its password Secret's, else the first pass's."""
        fresh, tenant = f"{label}-{of['metadata']['name']}-", core.tenant_of(of)
        had = core.password_in(self.objects.get(("Secret", tenant.object_name)), tenant)
        for i in range(passes):
            found = CORE.provision(of, shared(), self.seen(of, f"{fresh}{i}"))
            if any(isinstance(w, Apply) and w.obj["kind"] == "Database" for w in found.writes):
                assert tenant.name in self.roles, "the Database is written only once CloudNativePG made its owner"
            for other in range(0 if had else 1, i + 1):  # only the first pass's password is ever taken, if any
                assert f"{fresh}{other}" not in repr(found)
            self.write(found)
            if isinstance(found.then, Ready):
                assert found.then.secret is not None and found.then.secret["password"] == (had or f"{fresh}0")
                return found.then
            waits = isinstance(found.then, Waiting) and isinstance(found.then.retry, Requeue)
            assert isinstance(found.then, Again) or waits, found.then  # everything here passes by itself
            if not isinstance(found.then, Again):  # Again: read and asked again at once
                self.cloudnative_pg()
        raise AssertionError(f"not ready after {passes} passes")

    def drop(self, of: dict[str, Any], passes: int = 20) -> list[str]:
        """Drop passes until Gone; the messages it waited with."""
        said: list[str] = []
        for i in range(passes):
            found = CORE.drop(of, shared(), self.seen(of, now=1_700_000_000 + 20 * i))
            assert FRESH not in repr(found) and not found.calls
            self.write(found)
            if isinstance(found.then, Gone):
                return said
            assert isinstance(found.then, Waiting) and isinstance(found.then.retry, Requeue), found.then
            said.append(found.then.message)
            self.cloudnative_pg()
        raise AssertionError(f"not gone after {passes} passes: {said}")


@pytest.mark.parametrize("lag", [False, True], ids=["cnpg-at-once", "cnpg-one-pass-late"])
@pytest.mark.parametrize("others", [False, True], ids=["alone", "beside-another-claim"])
def test_a_claim_is_provisioned_then_dropped_database_first_then_role_then_resources_then_gone(
        lag: bool, others: bool) -> None:
    bed, mine, orders = Bed(lag), claim(), claim("shop", "orders-pg")
    if others:
        first = bed.provision(orders)
    ready = bed.provision(mine)
    assert ready.connection == {"host": "pg-integrated-rw.apprafter-pg.svc", "port": 5432, "user": ROLE, "db": ROLE}
    assert ROLE in bed.roles and bed.databases[ROLE] == ROLE
    assert bed.provision(mine, "later") == ready  # provisioned: the same password again, nothing new taken
    bed.log.clear()

    said = bed.drop(mine)
    assert bed.log == ["database dropped", "role dropped", "Database deleted", "Secret deleted"], (bed.log, said)
    assert ROLE not in bed.roles and ROLE not in bed.databases
    assert ("Database", ROLE) not in bed.objects and ("Secret", ROLE) not in bed.objects
    roles = {r["name"]: r for r in bed.objects[("Cluster", CLUSTER_NAME)]["spec"]["managed"]["roles"]}
    assert ROLE not in roles
    assert said[0] == f"Database {NS}/{ROLE} set to ensure: absent; CloudNativePG drops database {ROLE}"
    assert f"Database {NS}/{ROLE} deleted (CloudNativePG releases it)" in said
    if others:  # the other claim's role, database and password untouched: it is ready as it was
        assert roles == {"shop.orders-pg": core.role_entry(core.tenant_of(orders))}
        assert bed.provision(orders, "later") == first
    else:
        assert roles == {core.KEEPER_ROLE: {"name": core.KEEPER_ROLE, "ensure": "absent"}}
    # dropped: asked again, nothing is left to do
    assert CORE.drop(mine, shared(), bed.seen(mine)) == Step(Gone())
    # a claim of the same name made again gets a new role, database and password
    again = bed.provision(mine, "anew")
    assert again.secret is not None and again.secret["password"] == "anew-cart-pg-0" and ROLE in bed.databases


def test_a_new_claim_waits_saying_why_once_the_cluster_holds_its_most_roles_and_nothing_is_made() -> None:
    """Issue 41: retained roles piled up in the one Cluster until etcd refused it, and a new claim failed with
    nothing on its status; past MAX_ROLES a new role is not added, and the claim says why."""
    others = [{"name": f"old{i}.app-pg", "ensure": "present", "login": True} for i in range(core.MAX_ROLES)]
    full = live_cluster(*others)
    step = CORE.provision(claim(), shared(), seen(full))
    assert isinstance(step.then, Waiting) and step.then.reason == "RolesLimitReached"
    assert step.then.message.startswith(f"Cluster {NS}/pg-integrated holds {core.MAX_ROLES} roles (retained ones")
    assert not step.writes and not step.calls
    # a claim whose role is among them already goes on as before
    mine = live_cluster(*others[1:], core.role_entry(core.tenant_of(claim())))
    going_on = CORE.provision(claim(), shared(), seen(mine)).then
    assert getattr(going_on, "reason", None) != "RolesLimitReached"
