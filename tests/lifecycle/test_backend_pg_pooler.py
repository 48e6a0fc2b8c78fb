"""The cloudnative-pg backend's pooler (lifecycle/backends/pg_pooler.py): the Pooler a provider's config gives (rw,
transaction pooling by default, the per-claim and client bounds as PgBouncer parameters, our PgBouncer image,
Guaranteed, owned by the live Cluster), when a pass writes it (after the Cluster, once the Cluster exists; deleted
when a provider turns it off), its name (a DNS label whatever the Cluster's name), and a ready claim's pooled URL:
its own role, password and database through the Pooler's Service."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from lifecycle.backends import pg_cluster as core
from lifecycle.backends.common import PROVIDER_LABEL
from lifecycle.backends.contract import Apply, Delete, Ready, Seen, Site
from lifecycle.backends.pg import CORE
from lifecycle.backends.pg_pooler import pooler_name
from lifecycle.service_provider import check
from tests.lifecycle.test_backend_pg import FRESH, IMAGE, NS, claim, cnpg_cluster, password_secret, provider

PGBOUNCER = "localhost/pgbouncer:0.1.0"
DATABASE = {"metadata": {"generation": 1}, "status": {"applied": True, "observedGeneration": 1}}


def shared(image: str | None = PGBOUNCER, **config: Any) -> core.Shared:
    found = CORE.configure(provider(**config), Site(NS, IMAGE, (("pgbouncer", image),) if image else ()))
    assert isinstance(found, core.Shared), found
    return found


def live(uid: str | None = "c-1") -> dict[str, Any]:
    cluster = cnpg_cluster()
    if uid:
        cluster["metadata"]["uid"] = uid
    return cluster


def step(found: core.Shared, cluster: dict[str, Any] | None, pooler: dict[str, Any] | None = None,
         database: dict[str, Any] | None = DATABASE) -> Any:
    reads = CORE.reads(claim(), found)
    return CORE.provision(claim(), found, Seen(dict(zip(reads, (cluster, database, password_secret("p/w"), pooler),
                                                        strict=False)), None, FRESH, 0))


def written(result: Any) -> list[str]:
    return [w.obj["kind"] if isinstance(w, Apply) else f"delete {w.kind.kind}" for w in result.writes]


def test_the_default_pooler_is_rw_transaction_pooled_bounded_per_claim_and_guaranteed() -> None:
    result = step(shared(), live())
    [pooler] = [w.obj for w in result.writes if isinstance(w, Apply) and w.obj["kind"] == "Pooler"]
    assert pooler["metadata"]["name"] == "pg-integrated-pooler" and pooler["metadata"]["namespace"] == NS
    assert pooler["metadata"]["labels"][PROVIDER_LABEL] == "pg-integrated"
    assert pooler["metadata"]["ownerReferences"] == [{"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
                                                      "name": "pg-integrated", "uid": "c-1", "controller": True}]
    spec = pooler["spec"]
    assert (spec["cluster"], spec["type"], spec["instances"]) == ({"name": "pg-integrated"}, "rw", 1)
    assert spec["pgbouncer"] == {"poolMode": "transaction", "parameters": {
        "default_pool_size": "4", "max_user_connections": "4", "max_db_connections": "4", "max_client_conn": "1000",
        "server_idle_timeout": "10"}}
    [container] = spec["template"]["spec"]["containers"]
    assert (container["name"], container["image"]) == ("pgbouncer", PGBOUNCER)
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": "100m",
                                                                                      "memory": "128Mi"}


def test_the_provider_config_sets_the_mode_the_bounds_and_the_instances() -> None:
    found = shared(pooler={"poolMode": "session", "poolSize": 3, "maxClientConn": 200, "instances": 2,
                           "resources": {"cpu": "200m", "memory": "256Mi"}})
    [pooler] = [w.obj for w in step(found, live()).writes if isinstance(w, Apply) and w.obj["kind"] == "Pooler"]
    assert pooler["spec"]["instances"] == 2 and pooler["spec"]["pgbouncer"]["poolMode"] == "session"
    assert pooler["spec"]["pgbouncer"]["parameters"] == {"default_pool_size": "3", "max_user_connections": "3",
                                                         "max_db_connections": "3", "max_client_conn": "200",
                                                         "server_idle_timeout": "10"}


@pytest.mark.parametrize(("pooler", "said"), [
    ({"poolMode": "statement"}, "spec.config.pooler.poolMode"),
    ({"poolSize": 0}, "spec.config.pooler.poolSize"),
    ({"maxClientConn": 5}, "spec.config.pooler.maxClientConn"),
    ({"size": 3}, "spec.config.pooler.size"),
])
def test_the_webhook_refuses_a_pooler_config_out_of_bounds_naming_the_field(pooler: dict[str, Any],
                                                                            said: str) -> None:
    problems = check(provider(pooler=pooler))
    assert [field for field, _ in problems] == [said], problems


def test_the_pooler_comes_after_the_cluster_and_only_once_the_cluster_exists() -> None:
    assert "Pooler" not in written(step(shared(), None, database=None))  # the Cluster is being made: no owner yet
    assert "Pooler" not in written(step(shared(), live(uid=None)))
    kinds = written(step(shared(), live()))
    assert kinds.count("Pooler") == 1 and kinds.index("Cluster") < kinds.index("Pooler")


def test_a_ready_claims_pooled_url_is_its_own_role_and_database_through_the_poolers_service() -> None:
    result = step(shared(), live())
    assert isinstance(result.then, Ready) and result.then.secret is not None
    direct, pooled = urlsplit(result.then.secret["url"]), urlsplit(result.then.secret["pooledUrl"])
    assert pooled.hostname == f"pg-integrated-pooler.{NS}.svc" and pooled.port == 5432
    assert (pooled.username, pooled.password, pooled.path) == (direct.username, direct.password, direct.path) == (
        "shop.cart-pg", "p%2Fw", "/shop.cart-pg")
    assert direct.hostname == f"pg-integrated-rw.{NS}.svc"


def test_a_provider_that_turns_the_pooler_off_deletes_its_pooler_and_gives_the_direct_url_as_the_pooled_one() -> None:
    off = shared(pooler={"enabled": False})
    ours = {"metadata": {"name": "pg-integrated-pooler", "labels": {PROVIDER_LABEL: "pg-integrated"}}}
    result = step(off, live(), pooler=ours)
    deletes = [w for w in result.writes if isinstance(w, Delete)]
    assert [(d.kind.kind, d.namespace, d.name) for d in deletes] == [("Pooler", NS, "pg-integrated-pooler")]
    assert isinstance(result.then, Ready) and result.then.secret is not None
    assert result.then.secret["pooledUrl"] == result.then.secret["url"]
    # a Pooler someone else made under that name is left alone; none there, nothing to delete
    theirs = {"metadata": {"name": "pg-integrated-pooler", "labels": {}}}
    assert not [w for w in step(off, live(), pooler=theirs).writes if isinstance(w, Delete)]
    assert not [w for w in step(off, live()).writes if isinstance(w, Delete)]
    # and an operator without a PgBouncer image runs none
    assert "Pooler" not in written(step(shared(image=None), live()))


def test_the_poolers_name_is_a_dns_label_whatever_the_clusters_name() -> None:
    assert pooler_name("platform-postgres") == "platform-postgres-pooler"
    long_a, long_b = "a" * 56 + "x", "a" * 56 + "y"
    names = {pooler_name(long_a), pooler_name(long_b), pooler_name("a" * 63)}
    assert len(names) == 3 and all(len(n) <= 63 and n.endswith("-pooler") and "--" not in n for n in names)
