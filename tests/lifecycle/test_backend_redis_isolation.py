"""A redis-server provider's `isolation: instance` (issue 41 item 1): each claim gets an instance of its own, named
for the claim and sized by its size (memory, maxmemory, maxclients), with its ACL user on it alone; its drop deletes
that instance whole; the shared instance keeps redis-server's own connection slots; a provider's isolation is fixed
once it exists, and an instance per claim is never one the administrator runs."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.backends import instance as server
from lifecycle.backends.common import CLAIM_ANNOTATION
from lifecycle.backends.contract import Again, Apply, CreateOnce, Delete, Gone, Ready, Seen, Site, Waiting
from lifecycle.backends.redis import CLAIM_INSTANCES, CORE, ISOLATION_MESSAGE, SHARED_MAX_CLIENTS, Config, SetUser
from lifecycle.service_provider import check
from tests.lifecycle.test_backend_redis import (
    ADMIN,
    AVAILABLE,
    FRESH,
    IMAGE,
    NS,
    SERVICE,
    SLICES,
    admin_secret,
    provider,
)
from tests.lifecycle.test_backend_redis import claim as shared_claim


def config(**given: Any) -> Config:
    found = CORE.configure(provider(isolation="instance", **given), Site(NS, IMAGE))
    assert isinstance(found, Config), found
    return found


def claim(namespace: str = "shop", size: str | None = None) -> dict[str, Any]:
    made = shared_claim(namespace)
    if size is not None:
        made["spec"]["size"] = size
    return made


def args(objects: list[dict[str, Any]]) -> dict[str, str]:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    given = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return {given[i]: given[i + 1] for i in range(len(given) - 1) if given[i].startswith("--")}


def test_each_claim_gets_its_own_instance_named_for_it_and_sized_by_its_size() -> None:
    cfg = config()
    mine, theirs = CORE.serving(claim("shop", "nano"), cfg), CORE.serving(claim("blog", "large"), cfg)
    assert mine.instance.name != theirs.instance.name and mine.instance.name.startswith("redis-")
    assert len(mine.instance.name) <= 63 and mine.instance.host == f"{mine.instance.name}.{NS}.svc"
    assert (mine.instance.memory, mine.max_clients) == ("64Mi", CLAIM_INSTANCES["nano"][1])
    assert (theirs.instance.memory, theirs.max_clients) == ("1Gi", CLAIM_INSTANCES["large"][1])
    assert mine.max_memory == 32 * 2**20 and theirs.max_memory == 768 * 2**20  # the provider's share, 32Mi below
    assert CORE.serving(claim("shop"), cfg).instance.memory == CLAIM_INSTANCES["small"][0]  # no size: small
    objects = CORE.objects(mine, Seen({}, None, FRESH, 0))
    assert args(objects)["--maxclients"] == str(CLAIM_INSTANCES["nano"][1])
    assert args(objects)["--maxmemory"] == str(32 * 2**20)
    for obj in objects:  # the claim it is woken for, and none of the shared instance's name
        assert obj["metadata"]["annotations"] == {CLAIM_ANNOTATION: "shop/cart-redis"}
        assert obj["metadata"]["name"] in (mine.instance.name, f"{mine.instance.name}-data")  # and its volume
    # the shared instance keeps redis-server's own slots, and is no claim's
    shared = CORE.configure(provider(), Site(NS, IMAGE))
    assert isinstance(shared, Config) and CORE.serving(claim(), shared) is shared
    assert args(CORE.objects(shared, Seen({}, None, FRESH, 0)))["--maxclients"] == str(SHARED_MAX_CLIENTS)
    assert all("annotations" not in o["metadata"] for o in CORE.objects(shared, Seen({}, None, FRESH, 0)))


def test_a_claims_own_instance_is_made_then_its_user_set_on_it_alone() -> None:
    cfg, mine = config(), claim("shop", "nano")
    own = CORE.serving(mine, cfg)
    reads = CORE.reads(mine, cfg)
    assert reads == server.reads(own.instance)
    first = CORE.provision(mine, cfg, Seen({}, None, FRESH, 0))
    assert isinstance(first.then, Again) and isinstance(first.writes[0], CreateOnce)
    assert first.writes[0].obj["metadata"]["name"] == f"{own.instance.name}-admin"
    waiting = CORE.provision(mine, cfg, Seen({reads[0]: admin_secret()}, None, FRESH, 0))
    assert isinstance(waiting.then, Waiting) and waiting.then.reason == "InstanceNotReady"
    assert {w.obj["metadata"]["name"] for w in waiting.writes if isinstance(w, Apply)} == {
        own.instance.name, f"{own.instance.name}-data"}  # its Deployment, Service and volume
    done = CORE.provision(mine, cfg, Seen(dict(zip(reads, (admin_secret(), AVAILABLE, SERVICE, SLICES),
                                                   strict=False)), None, FRESH, 0))
    assert isinstance(done.then, Ready) and done.then.connection["host"] == own.instance.host
    [set_user] = [c for c in done.calls if isinstance(c, SetUser)]
    assert set_user.host == "10.0.0.17" and str(set_user.admin_password) == ADMIN


def test_the_drop_deletes_the_claims_own_instance_whole() -> None:
    cfg, mine = config(), claim("shop", "nano")
    admin, deployment, service, slices, volume = CORE.reads(mine, cfg)
    live = {read: {"metadata": {"uid": f"uid-{read.kind.kind}"}} for read in (admin, deployment, service, volume)}
    step = CORE.drop(mine, cfg, Seen({**live, slices: []}, None, FRESH, 0))
    assert isinstance(step.then, Gone) and not step.calls
    # the server first, then its volume (the keys and users on it: the approved drop's), then its admin Secret
    assert step.writes == tuple(Delete(r.kind, r.namespace, str(r.name), f"uid-{r.kind.kind}")
                                for r in (deployment, service, volume, admin))
    assert volume.name == f"{CORE.serving(mine, cfg).instance.name}-data"
    assert CORE.drop(mine, cfg, Seen({}, None, FRESH, 0)).writes == ()  # never made: nothing to delete


def test_isolation_is_fixed_once_the_provider_exists_and_never_with_an_address() -> None:
    assert check(provider(isolation="instance")) == [] and check(provider(isolation="tenant"))
    old, new = provider(), provider(isolation="instance")
    assert CORE.admit(old, new) == [("spec.config.isolation", ISOLATION_MESSAGE)]
    assert CORE.admit(None, new) == [] and CORE.admit(new, provider(isolation="instance", scripting=True)) == []
    said = CORE.configure(provider(isolation="instance", address="cache.internal:6379"), Site(NS, IMAGE))
    assert said == ["spec.config.isolation: an instance per claim is one the operator runs: not with "
                    "spec.config.address"]


@pytest.mark.parametrize("size", list(CLAIM_INSTANCES))
def test_every_size_starts_a_server_that_takes_its_users_work(size: str) -> None:
    own = CORE.serving(claim("shop", size), config())
    assert own.max_memory > 0 and own.max_clients >= 32
    # the size's memory is one an instance of the operator's may have (at least its minimum)
    assert isinstance(CORE.configure(provider(resources={"memory": own.instance.memory}), Site(NS, IMAGE)), Config)
