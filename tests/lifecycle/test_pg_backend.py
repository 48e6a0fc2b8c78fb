"""The cloudnative-pg backend's decisions (lifecycle/pg_backend.py): the Cluster a provider's config gives (sizes,
Guaranteed, shared_buffers below the limit, the pg_hba that confines each role to its own database), a claim's
deterministic role and database name (no two claims the same, at most 63 bytes, never a reserved name), its
objects, its connection Secret, and what its status says from what CloudNativePG reports."""

from __future__ import annotations

import base64
import itertools
import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from lifecycle import pg_backend as core
from lifecycle.binding import Binding, status_of, waiting_reason
from lifecycle.conditions import Condition

NS = "apprafter-pg"
IMAGE = "localhost/postgresql:15"


def provider(name: str = "pg-integrated", **config: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"type": "pg", "backend": "cloudnative-pg",
                                                 **({"config": config} if config else {})}}


def claim(namespace: str = "shop", name: str = "cart-pg", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ResourceClaim",
            "metadata": {"namespace": namespace, "name": name, "uid": "0a1b", "labels": labels},
            "spec": {"type": "pg", "selector": {}}}


def shared(**config: Any) -> core.Shared:
    found = core.shared_of(provider(**config), NS)
    assert isinstance(found, core.Shared), found
    return found


SHIPPED = {"cluster": "platform-postgres", "namespace": "apprafter-pg", "instances": 2,
           "storage": {"size": "20Gi"}, "resources": {"cpu": "1", "memory": "2Gi"}, "sharedBuffersPercent": 25}


def test_the_shipped_config_gives_the_cluster_its_name_namespace_and_sizes() -> None:
    found = shared(**SHIPPED)
    assert found == core.Shared("pg-integrated", "platform-postgres", "apprafter-pg", 2, "20Gi", None, "1", "2Gi",
                                "512MB")
    assert found.host == "platform-postgres-rw.apprafter-pg.svc"


def test_a_provider_without_config_gets_the_defaults_in_the_platforms_pg_namespace() -> None:
    found = core.shared_of(provider(), "elsewhere")
    assert found == core.Shared("pg-integrated", "pg-integrated", "elsewhere", 1, "1Gi", None, "250m", "256Mi",
                                "64MB")


@pytest.mark.parametrize(("memory", "percent", "buffers"), [
    ("128Mi", 25, "32MB"), ("256Mi", 25, "64MB"), ("1Gi", 25, "256MB"), ("8Gi", 25, "2048MB"), ("1G", 25, "238MB"),
    ("2Gi", 40, "819MB"), ("128Mi", 5, "6MB"), ("1Gi", 5, "51MB")])
def test_shared_buffers_is_the_share_of_the_memory_limit_in_whole_mb(memory: str, percent: int,
                                                                      buffers: str) -> None:
    found = shared(resources={"cpu": "1", "memory": memory}, sharedBuffersPercent=percent)
    assert found.shared_buffers == buffers
    limit_mb = int(re.sub(r"\D", "", buffers))
    assert limit_mb * 2**20 < {"Mi": 2**20, "Gi": 2**30, "G": 10**9}[re.sub(r"\d", "", memory)] * int(
        re.sub(r"\D", "", memory))


def test_a_config_that_does_not_hold_says_each_problem() -> None:
    assert core.shared_of(provider(cluster="Bad_Name", namespace="ok", instances=0, storage={
        "size": "lots", "storageClassName": "UPPER"}, resources={"cpu": "0", "memory": "64Mi"},
        sharedBuffersPercent=60), NS) == [
        "spec.config.resources.memory: '64Mi' is not a memory quantity of at least 128Mi",
        "spec.config.resources.cpu: '0' is not a CPU quantity (250m, 1, 1.5)",
        "spec.config.storage.size: 'lots' is not a storage quantity of at least 1Mi",
        "spec.config.instances: 0 is not a whole number from 1 to 9",
        "spec.config.sharedBuffersPercent: 60 is not a whole percentage from 5 to 40",
        "spec.config.cluster: 'Bad_Name' is not a DNS label (a-z0-9-, 63 at most)",
        "spec.config.storage.storageClassName: 'UPPER' is not a DNS label (a-z0-9-, 63 at most)"]
    assert core.shared_of(provider(instances=True, sharedBuffersPercent="25"), NS) == [
        "spec.config.instances: True is not a whole number from 1 to 9",
        "spec.config.sharedBuffersPercent: '25' is not a whole percentage from 5 to 40"]


def test_the_cluster_is_guaranteed_confines_each_role_and_manages_the_claims_role() -> None:
    found = shared(**{**SHIPPED, "storage": {"size": "20Gi", "storageClassName": "local-path"}})
    tenant = core.tenant_of(claim())
    cluster = core.cluster_object(found, IMAGE, tenant)
    assert (cluster["apiVersion"], cluster["kind"], cluster["metadata"]["name"], cluster["metadata"]["namespace"]) == (
        "postgresql.cnpg.io/v1", "Cluster", "platform-postgres", "apprafter-pg")
    spec = cluster["spec"]
    assert spec["resources"]["requests"] == spec["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert (spec["instances"], spec["imageName"], spec["storage"]) == (2, IMAGE, {"size": "20Gi",
                                                                               "storageClass": "local-path"})
    assert spec["postgresql"] == {"parameters": {"shared_buffers": "512MB"},
                                  "pg_hba": ["host sameuser all all scram-sha-256", "host all all all reject"]}
    assert spec["enableSuperuserAccess"] is False
    assert spec["managed"]["roles"] == [{"name": "shop.cart-pg", "ensure": "present", "login": True,
                                         "passwordSecret": {"name": "shop.cart-pg"},
                                         "comment": "apprafter claim shop/cart-pg"}]
    assert cluster["metadata"]["labels"][core.PROVIDER_LABEL] == "pg-integrated"
    assert "resourceVersion" not in cluster["metadata"]
    assert "storageClass" not in core.cluster_object(shared(**SHIPPED), IMAGE, tenant)["spec"]["storage"]


def test_the_cluster_keeps_every_role_it_manages_and_adds_the_claims() -> None:
    found = shared(**SHIPPED)
    first, second = core.tenant_of(claim("a", "x-pg")), core.tenant_of(claim("b", "x-pg"))
    admins = {"name": "reporting", "login": True, "connectionLimit": -1, "inherit": True, "ensure": "present"}
    live = core.cluster_object(found, IMAGE, second)
    live["spec"]["managed"]["roles"].append(admins)
    live["metadata"]["resourceVersion"] = "41"
    merged = core.cluster_object(found, IMAGE, first, live)
    assert [r["name"] for r in merged["spec"]["managed"]["roles"]] == ["a.x-pg", "b.x-pg", "reporting"]
    assert merged["spec"]["managed"]["roles"][2] == admins  # kept as it is
    assert merged["metadata"]["resourceVersion"] == "41"  # applied only over what was read
    # the same claim again: the same list (its entry rewritten, not doubled)
    again = core.cluster_object(found, IMAGE, first, merged)
    assert again["spec"]["managed"]["roles"] == merged["spec"]["managed"]["roles"]


def test_a_claims_role_and_database_are_its_namespace_and_name() -> None:
    tenant = core.tenant_of(claim())
    assert tenant == core.Tenant("shop.cart-pg", "shop.cart-pg", "shop/cart-pg")
    assert core.tenant_of(claim("shop", "cart-pg")) == tenant  # the same app and need: the same role and data


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


def test_the_password_secret_is_basic_auth_in_the_clusters_namespace_for_its_role() -> None:
    found, tenant = shared(**SHIPPED), core.tenant_of(claim())
    secret = core.password_secret_object(found, tenant, "pw")
    assert (secret["type"], secret["metadata"]["namespace"], secret["metadata"]["name"]) == (
        "kubernetes.io/basic-auth", "apprafter-pg", "shop.cart-pg")
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {"username": "shop.cart-pg",
                                                                                    "password": "pw"}
    assert "ownerReferences" not in secret["metadata"]  # it outlives the claim
    assert secret["metadata"]["labels"]["cnpg.io/reload"] == "true"
    assert core.password_in(secret, tenant) == "pw"
    assert core.password_in(secret, core.tenant_of(claim("other"))) is None
    assert core.password_in(None, tenant) is None
    assert core.password_in({"data": {"username": "%%%"}}, tenant) is None


def test_the_database_is_owned_by_the_role_and_retained() -> None:
    found, tenant = shared(**SHIPPED), core.tenant_of(claim())
    database = core.database_object(found, tenant)
    assert (database["kind"], database["metadata"]["namespace"], database["metadata"]["name"]) == (
        "Database", "apprafter-pg", "shop.cart-pg")
    assert database["spec"] == {"cluster": {"name": "platform-postgres"}, "name": "shop.cart-pg",
                                "owner": "shop.cart-pg", "ensure": "present", "databaseReclaimPolicy": "retain"}


def test_the_connection_secret_holds_every_field_and_is_owned_by_the_claim() -> None:
    found, tenant = shared(**SHIPPED), core.tenant_of(claim(**{"app.kubernetes.io/name": "cart"}))
    secret = core.connection_secret_object(claim(**{"app.kubernetes.io/name": "cart"}), found, tenant, "p/w@:x")
    fields = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    host = "platform-postgres-rw.apprafter-pg.svc"
    assert fields == {"url": f"postgresql://shop.cart-pg:p%2Fw%40%3Ax@{host}:5432/shop.cart-pg", "host": host,
                      "port": "5432", "user": "shop.cart-pg", "password": "p/w@:x", "db": "shop.cart-pg"}
    parts = urlsplit(fields["url"])
    assert (parts.hostname, parts.port, parts.path) == (host, 5432, "/shop.cart-pg")
    assert secret["metadata"]["name"] == "cart-pg-conn" and secret["metadata"]["namespace"] == "shop"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "0a1b"


def cnpg_cluster(ready: bool = True, reconciled: tuple[str, ...] = ("shop.cart-pg",), version: str = "7",
                 cannot: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """A Cluster as CloudNativePG reports it (status.conditions Ready, status.managedRolesStatus)."""
    return {"status": {"phase": "Cluster in healthy state" if ready else "Setting up primary",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "managedRolesStatus": {
                           "byStatus": {"reconciled": list(reconciled), "reserved": ["postgres", "streaming_replica"]},
                           **({"cannotReconcile": cannot} if cannot else {}),
                           "passwordStatus": {name: {"transactionID": 750, "resourceVersion": version}
                                              for name in reconciled}}}}


def test_readiness_follows_the_cluster_the_role_and_the_database_in_that_order() -> None:
    found, tenant = shared(**SHIPPED), core.tenant_of(claim())
    secret = {"metadata": {"resourceVersion": "7"}}
    database = {"metadata": {"generation": 1}, "status": {"applied": True, "observedGeneration": 1}}
    where = "Cluster apprafter-pg/platform-postgres"
    assert core.readiness(found, tenant, None, secret, database) == ("InstanceNotReady", f"{where} is being created")
    assert core.readiness(found, tenant, cnpg_cluster(ready=False), secret, database) == (
        "InstanceNotReady", f"{where} is not ready yet (Setting up primary)")
    assert core.readiness(found, tenant, {"status": {}}, secret, database) == (
        "InstanceNotReady", f"{where} is not ready yet (no phase yet)")
    assert core.readiness(found, tenant, cnpg_cluster(reconciled=("other",)), secret, database) == (
        "RoleNotReady", f"role shop.cart-pg is not reconciled on {where} yet")
    assert core.readiness(found, tenant, cnpg_cluster(reconciled=(), cannot={
        "shop.cart-pg": ["wrong username 'x' in secret, expected 'shop.cart-pg'"]}), secret, database) == (
        "BackendRefused", f"{where} cannot reconcile role shop.cart-pg: wrong username 'x' in secret, expected "
                          "'shop.cart-pg'")
    assert core.readiness(found, tenant, cnpg_cluster(version="6"), secret, database) == (
        "RoleNotReady", f"role shop.cart-pg's password (Secret apprafter-pg/shop.cart-pg) is not applied on {where} "
                        "yet")
    assert core.readiness(found, tenant, cnpg_cluster(), secret, None) == (
        "DatabaseNotReady", "Database apprafter-pg/shop.cart-pg is being created")
    assert core.readiness(found, tenant, cnpg_cluster(), secret, {
        "metadata": {"generation": 1}, "status": {"applied": False, "message": 'role "shop.cart-pg" does not exist'}}) \
        == ("DatabaseNotReady", f"Database apprafter-pg/shop.cart-pg is not applied on {where} yet: role "
                                '"shop.cart-pg" does not exist')
    stale = {"metadata": {"generation": 2}, "status": {"applied": True, "observedGeneration": 1}}
    assert core.readiness(found, tenant, cnpg_cluster(), secret, stale) == (
        "DatabaseNotReady", f"Database apprafter-pg/shop.cart-pg is not applied on {where} yet")
    assert core.readiness(found, tenant, cnpg_cluster(), secret, database) is None


def test_the_claims_status_never_holds_the_password_and_its_application_says_why_it_waits() -> None:
    found, tenant = shared(**SHIPPED), core.tenant_of(claim())
    binding = Binding("pg-integrated", Condition("Bound", "True", "Bound", "bound to ServiceProvider pg-integrated"))
    ready = status_of(binding, claim(), "2026-12-05T00:00:00Z", core.provisioned(found, tenant, "cart-pg-conn"))
    assert ready["ready"] is True and ready["connection"] == {
        "host": "platform-postgres-rw.apprafter-pg.svc", "port": 5432, "user": "shop.cart-pg", "db": "shop.cart-pg",
        "secretName": "cart-pg-conn"}
    assert [c["type"] for c in ready["conditions"]] == ["Bound", "Ready"]
    waits = status_of(binding, claim(), "2026-12-05T00:00:00Z",
                      core.waiting("InstanceNotReady", "Cluster apprafter-pg/platform-postgres is being created"))
    assert waits["ready"] is False
    assert waiting_reason({"status": waits}) == (
        "bound to ServiceProvider pg-integrated: InstanceNotReady: Cluster apprafter-pg/platform-postgres is being "
        "created")


def test_it_serves_pg_claims_of_cloudnative_pg_providers_alone() -> None:
    assert core.serves(claim(), provider())
    assert not core.serves(claim(), None)
    assert not core.serves({**claim(), "spec": {"type": "redis"}}, provider())
    assert not core.serves(claim(), {"spec": {"type": "pg", "backend": "other"}})


# --- the drop (lifecycle.retention let the deleted claim's data go) -----------------------------------------------

ROLE = "shop.cart-pg"
OTHER = {"name": "shop.orders-pg", "ensure": "present", "login": True, "passwordSecret": {"name": "shop.orders-pg"}}


def live_cluster(*roles: dict[str, Any], listed: dict[str, list[str]] | None = None,
                 refused: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The Cluster as the API server holds it: its managed roles, and what CloudNativePG last said of them."""
    spec = core.cluster_object(shared(), IMAGE, core.tenant_of(claim()))["spec"]
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


def step(cluster: dict[str, Any] | None, database: dict[str, Any] | None,
         secret: dict[str, Any] | None = PASSWORD) -> core.DropStep:
    return core.drop_step(shared(), IMAGE, core.tenant_of(claim()), cluster, database, secret)


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
    assert step(cluster, live_database("absent", generation=2, observed=1)) == core.DropStep(
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
    assert stale == core.DropStep(waits=f"CloudNativePG still lists role {ROLE} reconciled on Cluster "
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
        assert step(live_cluster(gone, OTHER, listed=listed), None) == core.DropStep(
            waits=f"CloudNativePG has not dropped role {ROLE} on {where} yet ({state})")
    refused = step(live_cluster(gone, OTHER, listed={"pending-reconciliation": [ROLE]}, refused={ROLE: [
        f"could not perform DELETE on role {ROLE}: owner of database x"]}), None)
    assert refused == core.DropStep(waits=f"{where} cannot drop role {ROLE}: could not perform DELETE on role "
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
    later = core.cluster_object(shared(), IMAGE, core.tenant_of(claim("shop", "new-pg")), live_cluster(keeper))
    assert [r["name"] for r in later["spec"]["managed"]["roles"]] == [core.KEEPER_ROLE, "shop.new-pg"]


def test_once_the_role_is_listed_nowhere_its_database_resource_then_its_password_secret_go() -> None:
    cluster = live_cluster(OTHER, listed={"reconciled": ["shop.orders-pg"]})
    dropped_db = live_database("absent", generation=2, observed=2)
    assert step(cluster, dropped_db) == core.DropStep(
        delete="Database", waits=f"Database {NS}/{ROLE} deleted (CloudNativePG releases it)")
    assert step(cluster, live_database("absent", generation=3, observed=2, deleting=True)) == core.DropStep(
        waits=f"Database {NS}/{ROLE} is being deleted (CloudNativePG releases it)")
    assert step(cluster, None) == core.DropStep(delete="Secret")
    assert step(cluster, None, None) == core.DropStep()  # done


def test_without_a_cluster_there_is_no_database_or_role_left_only_their_resources_go() -> None:
    assert step(None, live_database()).delete == "Database"
    assert step(None, None) == core.DropStep(delete="Secret")
    assert step(None, None, None) == core.DropStep()


def test_a_claim_whose_role_cloudnative_pg_never_made_is_done_once_its_entry_is_out() -> None:
    mine = core.role_entry(core.tenant_of(claim()))
    first = step(live_cluster(mine, OTHER, listed={"pending-reconciliation": [ROLE]}), None)
    assert roles_of(first.apply) == [OTHER]
    assert step(live_cluster(OTHER, listed={"reconciled": ["shop.orders-pg"]}), None) == core.DropStep(
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
    assert step_at(pending, 1_700_000_009) == core.DropStep(waits=waits)
    assert step_at(pending, 1_700_000_010).apply is not None
    # only while CloudNativePG lists it pending: a stale not-managed waits for its own write's recomputation
    stale = live_cluster(gone, OTHER, listed={"not-managed": [ROLE]})
    assert step_at(stale, 1_700_000_000).apply is None
    # another claim's pass keeps it (else it would take it away, and wake the drop to nudge again)
    kept = core.cluster_object(shared(), IMAGE, core.tenant_of(claim("shop", "new-pg")), pending)
    assert kept["metadata"]["annotations"] == {core.NUDGE_ANNOTATION: "1700000000"}


def step_at(cluster: dict[str, Any], now: float) -> core.DropStep:
    return core.drop_step(shared(), IMAGE, core.tenant_of(claim()), cluster, None, PASSWORD, now)


def test_the_database_is_due_only_once_cloudnative_pg_reconciled_its_owner_with_its_password() -> None:
    tenant = core.tenant_of(claim())
    secret = {"metadata": {"name": ROLE, "resourceVersion": "5"}}
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}

    def cluster(**roles: Any) -> dict[str, Any]:
        return {"status": {**ready, "managedRolesStatus": roles}}
    assert not core.database_due(shared(), tenant, None, secret)
    assert not core.database_due(shared(), tenant, {"status": {}}, secret)  # not Ready
    assert not core.database_due(shared(), tenant, cluster(byStatus={"pending-reconciliation": [ROLE]}), secret)
    stale = cluster(byStatus={"reconciled": [ROLE]}, passwordStatus={ROLE: {"resourceVersion": "4"}})
    assert not core.database_due(shared(), tenant, stale, secret)  # its password not applied yet
    done = cluster(byStatus={"reconciled": [ROLE]}, passwordStatus={ROLE: {"resourceVersion": "5"}})
    assert core.database_due(shared(), tenant, done, secret)


def test_the_major_is_read_from_the_tag_as_cloudnative_pg_reads_it() -> None:
    assert core.major("ghcr.io/apprafter/postgresql:15") == "15"
    assert core.major("registry.example.com:5000/pg/postgresql:16.4-3@sha256:" + "a" * 64) == "16"
    assert core.major("localhost/postgresql:17-bookworm") == "17"


def test_a_new_default_image_never_moves_the_live_cluster_to_another_major_nor_shrinks_its_volume() -> None:
    asked = shared()
    live = {"spec": {"imageName": "ghcr.io/apprafter/postgresql:15", "storage": {"size": "20Gi"}}}
    # another major: the live image stays (a major upgrade is an administrator's act); a bigger volume: the live one
    assert core.kept(asked, "ghcr.io/apprafter/postgresql:16", live) == ("ghcr.io/apprafter/postgresql:15", "20Gi")
    # the same major (a minor update) and a larger size apply
    grown = shared(storage={"size": "40Gi"})
    assert core.kept(grown, "ghcr.io/apprafter/postgresql:15.8", live) == ("ghcr.io/apprafter/postgresql:15.8", "40Gi")
    assert core.kept(asked, "x/postgresql:16", None) == ("x/postgresql:16", asked.storage_size)  # a new Cluster
    cluster = core.cluster_object(asked, "ghcr.io/apprafter/postgresql:16", core.tenant_of(claim()), live)
    assert (cluster["spec"]["imageName"], cluster["spec"]["storage"]["size"]) == ("ghcr.io/apprafter/postgresql:15",
                                                                                  "20Gi")


def test_a_provider_whose_volumes_would_shrink_is_refused_and_growing_is_not() -> None:
    small, big = provider(storage={"size": "10Gi"}), provider(storage={"size": "20Gi"})
    assert core.shrinks(big, small) == ("10Gi is smaller than 20Gi: a volume never shrinks (the Cluster keeps 20Gi); "
                                        "move the data to a new provider to use less")
    assert core.shrinks(small, big) is None and core.shrinks(big, big) is None
    redis = {"spec": {"type": "redis", "backend": "redis-server", "config": {}}}
    assert core.shrinks(redis, redis) is None
