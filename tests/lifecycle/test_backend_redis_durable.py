"""A durable redis-server instance (issue 42 item 3): its keys in an append-only file and its users in an ACL file,
both on a volume of its own (the shared instance's from its provider's storage, a claim's own from the claim's size),
fsynced as the provider (its tier) says; the admin from the Secret at every start, never in argv; an existing
instance's Deployment gains the volume; what a provider's volume cannot become; the users saved; the drops."""

from __future__ import annotations

from typing import Any

import pytest

from controller_runtime.quantity import whole_bytes
from lifecycle.backends import instance as server
from lifecycle.backends.contract import Apply, Delete, Gone, Seen, Waiting
from lifecycle.backends.redis import CLAIM_INSTANCES, CORE, FSYNC, START, DropUser, SetUser
from lifecycle.service_provider import check
from tests.lifecycle.test_backend_redis import (
    ADMIN,
    AVAILABLE,
    FRESH,
    NS,
    SERVICE,
    SLICES,
    admin_secret,
    claim,
    config,
    provider,
    seen,
)


def applied(step_writes: Any) -> dict[str, dict[str, Any]]:
    return {w.obj["kind"]: w.obj for w in step_writes if isinstance(w, Apply)}


def container_of(deployment: dict[str, Any]) -> dict[str, Any]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def flags(container: dict[str, Any]) -> dict[str, str]:
    args = container["args"]
    return {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}


def test_the_instance_keeps_its_keys_and_users_on_a_volume_of_the_providers_storage() -> None:
    cfg = config(storage={"size": "4Gi", "storageClassName": "fast"}, appendfsync="always")
    objects = applied(CORE.provision(claim(), cfg, seen(cfg, admin_secret())).writes)
    volume, deployment = objects["PersistentVolumeClaim"], objects["Deployment"]
    assert volume["metadata"]["name"] == "redis-integrated-data" and volume["metadata"]["namespace"] == NS
    assert volume["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "4Gi"}},
                              "storageClassName": "fast"}
    assert volume["metadata"]["labels"] == deployment["metadata"]["labels"]  # the provider's, like its server
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "redis-integrated-data"}}]
    assert pod["securityContext"] == {"fsGroup": 999}  # the volume is the server's uid's to write
    container = container_of(deployment)
    assert container["volumeMounts"] == [{"name": "data", "mountPath": server.DATA}]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True  # the data dir is the volume alone
    # append-only, fsynced as the provider says, no RDB snapshots; START puts the data and the ACL file on the volume
    assert {k: v for k, v in flags(container).items() if k in ("--appendonly", "--appendfsync", "--save")} == {
        "--appendonly": "yes", "--appendfsync": "always", "--save": ""}
    assert container["command"] == ["/bin/sh", "-c", START, "redis", server.DATA]
    assert '--dir "$dir" --aclfile "$acl"' in START and "unset ADMIN_PASSWORD" in START
    # the admin reaches the server from the Secret's environment only: nothing secret in the spec
    assert "PASSWORD" not in " ".join(container["args"]) and ADMIN not in repr(objects)
    # not ready while it loads its file: the probe asks the admin's PING for PONG
    assert "PING" in " ".join(container["readinessProbe"]["exec"]["command"])
    # its volume before the server that mounts it
    assert [w.obj["kind"] for w in CORE.provision(claim(), cfg, seen(cfg, admin_secret())).writes] == [
        "PersistentVolumeClaim", "Deployment", "Service"]


def test_the_schemas_defaults_and_what_it_refuses() -> None:
    cfg = config()
    assert (cfg.storage, cfg.appendfsync) == (server.Storage("1Gi", None), "everysec")
    objects = applied(CORE.provision(claim(), cfg, seen(cfg, admin_secret())).writes)
    assert "storageClassName" not in objects["PersistentVolumeClaim"]["spec"]  # the cluster's default class
    for policy in FSYNC:
        assert check(provider(appendfsync=policy)) == []
    assert [field for field, _ in check(provider(appendfsync="sometimes"))] == ["spec.config.appendfsync"]
    assert [field for field, _ in check(provider(storage={"size": "lots"}))] == ["spec.config.storage.size"]
    assert check(provider(storage={"size": "2Gi", "iops": 3}))  # closed: a field it does not read


def test_a_claims_own_instance_has_a_volume_sized_by_its_size_of_the_providers_class() -> None:
    cfg = config(isolation="instance", storage={"size": "100Gi", "storageClassName": "fast"}, appendfsync="no")
    for size, (memory, _, volume_size) in CLAIM_INSTANCES.items():
        mine = claim("shop")
        mine["spec"]["size"] = size
        own = CORE.serving(mine, cfg)
        assert own.storage == server.Storage(volume_size, "fast") and own.appendfsync == "no"
        # room for the append-only file while it is rewritten: 4x the memory, so 3x the data at most (75 %)
        assert whole_bytes(volume_size) == 4 * (whole_bytes(memory) or 0)
        objects = applied(CORE.provision(mine, cfg, seen(own, admin_secret())).writes)
        assert objects["PersistentVolumeClaim"]["metadata"]["name"] == f"{own.instance.name}-data"
        assert objects["PersistentVolumeClaim"]["metadata"]["annotations"] == own.instance.meta["annotations"]
        assert objects["PersistentVolumeClaim"]["spec"]["resources"]["requests"]["storage"] == volume_size


def test_a_volume_is_never_asked_smaller_than_it_is() -> None:
    """A claim's own instance after its size went down (small to nano): the volume keeps its size (the API server
    refuses a smaller request, and the data is on it); a bigger size grows it."""
    cfg = config(isolation="instance")
    mine = claim("shop")
    mine["spec"]["size"] = "nano"
    own = CORE.serving(mine, cfg)

    def asked(live_size: str) -> str:
        live = {"spec": {"resources": {"requests": {"storage": live_size}}}}
        objects = applied(CORE.provision(mine, cfg, seen(own, admin_secret(), None, None, None, live)).writes)
        return str(objects["PersistentVolumeClaim"]["spec"]["resources"]["requests"]["storage"])
    assert asked("512Mi") == "512Mi"  # was small's: kept
    assert asked("128Mi") == CLAIM_INSTANCES["nano"][2]  # smaller than nano's: grown


def test_an_instance_that_ran_without_a_volume_gets_one() -> None:
    """An existing provider's instance (the Deployment the operator made before it persisted): the next step applies
    the volume first and the Deployment with it mounted and the append-only file on (its pod is made anew once:
    what it held in memory alone is not carried over), then sets the user as before."""
    cfg = config()
    old = {"metadata": {"name": "redis-integrated"}, **AVAILABLE}
    step = CORE.provision(claim(), cfg, seen(cfg, admin_secret(), old, SERVICE, SLICES, None))
    assert [w.obj["kind"] for w in step.writes] == ["PersistentVolumeClaim", "Deployment", "Service"]
    assert flags(container_of(applied(step.writes)["Deployment"]))["--appendonly"] == "yes"
    assert isinstance(step.calls[0], SetUser)


def test_the_operators_own_instance_saves_its_users_one_the_administrator_runs_does_not() -> None:
    cfg = config()
    step = CORE.provision(claim(), cfg, seen(cfg, admin_secret(), AVAILABLE, SERVICE, SLICES))
    set_user = step.calls[0]
    assert isinstance(set_user, SetUser) and set_user.save is True
    [drop] = CORE.drop(claim(), cfg, seen(cfg, admin_secret(), AVAILABLE, SERVICE, SLICES)).calls
    assert isinstance(drop, DropUser) and drop.save is True
    own = config(address="10.0.0.7:6380")  # its ACL file, if any, is its administrator's
    set_user = CORE.provision(claim(), own, seen(own, admin_secret())).calls[0]
    assert isinstance(set_user, SetUser) and set_user.save is False
    [drop] = CORE.drop(claim(), own, seen(own, admin_secret())).calls
    assert isinstance(drop, DropUser) and drop.save is False


def test_a_drop_is_done_at_once_only_where_no_volume_holds_anything() -> None:
    """No admin Secret, no Deployment: before, nothing could hold the claim's keys; now its volume may (the pod and
    its Deployment gone, the data on the volume), so the drop waits for the instance instead of saying Gone."""
    cfg = config()
    admin, deployment, _, _, volume = server.reads(cfg.instance)
    assert CORE.drop(claim(), cfg, Seen({}, None, FRESH, 0)).then == Gone()
    kept = CORE.drop(claim(), cfg, Seen({volume: {"metadata": {"uid": "v"}}}, None, FRESH, 0))
    assert isinstance(kept.then, Waiting) and not kept.writes and not kept.calls
    assert (admin.name, deployment.name) == ("redis-integrated-admin", "redis-integrated")


@pytest.mark.parametrize(("old", "new", "refused"), [
    ({"storage": {"size": "4Gi"}}, {"storage": {"size": "2Gi"}}, ["spec.config.storage.size"]),
    ({"storage": {"size": "4Gi"}}, {"storage": {"size": "8Gi"}}, []),
    ({}, {"storage": {"size": "16Gi"}}, []),  # an existing provider from before: the default 1Gi, grown
    ({}, {"storage": {"storageClassName": "fast"}}, ["spec.config.storage.storageClassName"]),
    ({"appendfsync": "everysec"}, {"appendfsync": "always"}, []),  # a restart, no data moved
    ({"isolation": "instance", "storage": {"size": "4Gi"}}, {"isolation": "instance", "storage": {"size": "1Gi"}},
     []),  # a claim's own volume is sized by the claim
    ({"isolation": "instance"}, {"isolation": "instance", "storage": {"storageClassName": "fast"}},
     ["spec.config.storage.storageClassName"]),
    ({"address": "10.0.0.7:6379", "storage": {"size": "4Gi"}},
     {"address": "10.0.0.7:6379", "storage": {"size": "1Gi"}}, []),  # the administrator's Redis: no volume of ours
])
def test_what_a_providers_volume_cannot_become(old: dict[str, Any], new: dict[str, Any], refused: list[str]) -> None:
    said = CORE.admit(provider(**old), provider(**new))
    assert [field for field, _ in said] == refused
    assert all("move the data to a new provider" in why for _, why in said)
    assert CORE.admit(None, provider(**new)) == []


def test_the_drop_of_a_claims_own_instance_takes_its_volume_and_a_kept_one_keeps_it() -> None:
    cfg = config(isolation="instance")
    own = CORE.serving(claim(), cfg)
    admin, deployment, service, _, volume = server.reads(own.instance)
    live = {read: {"metadata": {"uid": read.kind.kind}} for read in (admin, deployment, service, volume)}
    step = CORE.drop(claim(), cfg, Seen(live, None, FRESH, 0))
    assert Delete(volume.kind, NS, f"{own.instance.name}-data", "PersistentVolumeClaim") in step.writes
    # retention keeps a claim's data by never asking the core to drop: nothing in provision deletes anything
    kept = CORE.provision(claim(), cfg, Seen(live, None, FRESH, 0))
    assert not [w for w in kept.writes if isinstance(w, Delete)]

