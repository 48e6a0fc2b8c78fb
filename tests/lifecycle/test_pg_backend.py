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
