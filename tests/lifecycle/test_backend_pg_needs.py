"""What the cloudnative-pg core makes of a pg need's `size` and `version` (issue 42 item 4): the PostgreSQL major the
Cluster runs or a refusal that names both, and the claim's share of the Cluster's volume, a reservation that a new
role must fit in and a grown one keeps until it does; said on the claim's Size condition, and at the webhook's door
for a share larger than the whole volume."""

from __future__ import annotations

from typing import Any

from controller_runtime.outcomes import Done
from lifecycle.backends import pg_cluster as core
from lifecycle.backends.contract import Again, Apply, Ready, Step, Waiting
from lifecycle.backends.pg import CORE
from lifecycle.conditions import Condition
from tests.lifecycle.test_backend_pg import NS, claim, cnpg_cluster, live_cluster, password_secret, seen, shared

WHERE = f"Cluster {NS}/pg-integrated"


def need(size: str | None = None, version: str | None = None, name: str = "cart-pg") -> dict[str, Any]:
    made = claim(name=name)
    if size is not None:
        made["spec"]["size"] = size
    if version is not None:
        made["spec"]["parameters"] = {"version": version}
    return made


def role(name: str, size: str | None = "small", ensure: str = "present") -> dict[str, Any]:
    """A claim's role on the live Cluster (size None: one that is not a claim's, an administrator's)."""
    entry: dict[str, Any] = {"name": name, "ensure": ensure, "login": True}
    if size is not None:
        entry.update(connectionLimit=core.CONNECTIONS[size], comment=f"apprafter claim other/{name}")
    return entry


def provisioned(claim_: dict[str, Any], cluster: dict[str, Any] | None, **config: Any) -> Step:
    return CORE.provision(claim_, shared(**config), seen(cluster, None, password_secret(), of=claim_))


def size_condition(found: Step) -> Condition:
    then = found.then
    assert isinstance(then, Ready | Waiting), then
    [said] = [c for c in then.conditions if c.type == "Size"]
    return said


def test_a_version_the_cluster_does_not_run_is_refused_naming_both_and_nothing_is_made() -> None:
    for cluster in (None, live_cluster()):  # the image's major on a new Cluster, the live one's otherwise
        refused = provisioned(need(version="16"), cluster)
        assert refused == Step(Waiting("VersionNotServed", 'needs.pg.version "16": ServiceProvider pg-integrated '
                                       f"runs PostgreSQL 15 ({WHERE}): ask for 15, or select a provider that runs 16",
                                       Done()))
    # before anything else: no password Secret, no role, not retried (a person changes the need or the provider)
    assert CORE.provision(need(version="16"), shared(), seen()).writes == ()
    for served in (None, "15"):
        made = provisioned(need(version=served), None)  # the Cluster is made, with the claim's role
        assert [w.obj["kind"] for w in made.writes if isinstance(w, Apply)] == ["Cluster"]
        assert isinstance(made.then, Waiting) and made.then.reason == "InstanceNotReady"


def test_the_live_clusters_major_decides_not_a_newer_default_image() -> None:
    """A Cluster stays on its major when the operator's image moves on (pg_cluster.kept): a claim is served what it
    runs."""
    live = live_cluster()
    live["spec"]["imageName"] = "ghcr.io/apprafter/postgresql:15"
    newer = shared()._replace(image="ghcr.io/apprafter/postgresql:16")
    on_15 = CORE.provision(need(version="15"), newer, seen(live, None, password_secret(), of=need(version="15")))
    assert not isinstance(on_15.then, Waiting) or on_15.then.reason != "VersionNotServed"
    on_16 = CORE.provision(need(version="16"), newer, seen(live, None, password_secret(), of=need(version="16")))
    assert isinstance(on_16.then, Waiting) and on_16.then.reason == "VersionNotServed"
    assert "runs PostgreSQL 15" in on_16.then.message


def test_each_size_has_its_share_and_a_claim_shows_it_with_its_connections() -> None:
    shares = [core.reservation(core.tenant_of(need(size)), {}, "1Ti").share for size in core.CONNECTIONS]
    assert shares == sorted(shares) and len(set(shares)) == len(shares)  # every size more than the one below
    said = size_condition(provisioned(need("medium"), live_cluster(role("other.a-pg", "large")),
                                      storage={"size": "10Gi"}))
    assert said == Condition("Size", "True", "AsRequested", "needs.pg.size medium: 20 connections and 512Mi of "
                             f"{WHERE}'s 10Gi volume (2Gi held by its other claims' shares, retained ones included)")


def test_a_new_role_whose_share_does_not_fit_waits_and_nothing_is_made() -> None:
    """The volume holds 1Gi; eight small claims (128Mi each) fill it: a ninth is not promised room that is gone."""
    full = live_cluster(*(role(f"other.app{i}-pg") for i in range(8)))
    refused = provisioned(need(), full)
    assert refused == Step(Waiting(
        "ShareDoesNotFit", f"needs.pg.size small: its share does not fit: 128Mi of {WHERE}'s 1Gi volume (1Gi held by "
        "its other claims' shares, retained ones included); an administrator grows spec.config.storage.size of "
        "ServiceProvider pg-integrated, or drops retained data, or ask for a smaller size", Done()))
    assert CORE.provision(need(), shared(), seen(full)).writes == ()  # not even its password Secret
    # a role being dropped, and roles that are not claims' (an administrator's), hold no share
    freed = live_cluster(*(role(f"other.app{i}-pg") for i in range(7)), role("other.gone-pg", ensure="absent"),
                         role("admin", None), role(core.KEEPER_ROLE, None, "absent"))
    assert size_condition(provisioned(need(), freed)).reason == "AsRequested"
    # the administrator grows the volume: it fits
    assert size_condition(provisioned(need(), full, storage={"size": "2Gi"})).reason == "AsRequested"
    # a smaller size fits where small did not: 7 small and 3 nano hold 992Mi, a nano claim's 32Mi still fits
    crowded = live_cluster(*(role(f"other.app{i}-pg") for i in range(7)), *(role(f"other.n{i}-pg", "nano")
                                                                           for i in range(3)))
    assert size_condition(provisioned(need("nano"), crowded)).reason == "AsRequested"
    assert provisioned(need(), crowded).then.reason == "ShareDoesNotFit"  # type: ignore[union-attr]


def test_a_live_role_whose_need_grew_past_the_room_keeps_its_size_and_says_so() -> None:
    mine = core.role_entry(core.tenant_of(need("small")))
    crowded = live_cluster(mine, *(role(f"other.app{i}-pg") for i in range(7)))
    grown = provisioned(need("large"), crowded)
    said = size_condition(grown)
    assert said == Condition("Size", "False", "ShareDoesNotFit", (
        f"needs.pg.size large: its share does not fit: 2Gi of {WHERE}'s 1Gi volume (896Mi held by its other claims' "
        "shares, retained ones included); the role keeps its small share (128Mi, 10 connections) until an "
        "administrator grows spec.config.storage.size of ServiceProvider pg-integrated, or drops retained data"))
    [written] = [w.obj for w in grown.writes if isinstance(w, Apply) and w.obj["kind"] == "Cluster"]
    [kept] = [r for r in written["spec"]["managed"]["roles"] if r["name"] == "shop.cart-pg"]
    assert kept["connectionLimit"] == 10  # the live role as it was: its database stays usable
    # with room, the growth applies
    roomy = provisioned(need("large"), crowded, storage={"size": "4Gi"})
    [written] = [w.obj for w in roomy.writes if isinstance(w, Apply) and w.obj["kind"] == "Cluster"]
    assert [r["connectionLimit"] for r in written["spec"]["managed"]["roles"] if r["name"] == "shop.cart-pg"] == [30]
    assert size_condition(roomy).reason == "AsRequested"


def test_a_ready_claim_carries_its_size_condition() -> None:
    database = {"metadata": {"generation": 1}, "status": {"applied": True, "observedGeneration": 1}}
    found = CORE.provision(need("nano"), shared(), seen(cnpg_cluster(), database, password_secret(), of=need("nano")))
    assert isinstance(found.then, Ready)
    assert size_condition(found).message.startswith("needs.pg.size nano: 5 connections and 32Mi of ")


def test_the_webhook_refuses_a_share_larger_than_the_whole_volume() -> None:
    assert CORE.beyond(need("xlarge"), shared(storage={"size": "4Gi"})) == (
        "needs.pg.size xlarge: its share of the Cluster's volume, 8Gi, is more than the whole volume (4Gi)")
    assert CORE.beyond(need("large"), shared(storage={"size": "4Gi"})) is None
    assert CORE.beyond(need(), shared()) is None  # small on the default 1Gi
    assert isinstance(CORE.provision(need(), shared(), seen()).then, Again)  # its password Secret, then on
