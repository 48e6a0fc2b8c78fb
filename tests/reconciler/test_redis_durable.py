"""The integrated instance keeps what it holds (issue 42 item 3), run by the real redis-server as its pod runs it (its
container's command and args, its volume a directory kept between starts): a claim's keys and its ACL user survive
the server stopped (its pod deleted: SIGTERM) or killed (SIGKILL: no shutdown at all) and started again, under every
fsync policy, and the claim's same credentials read them with no one setting the user again; the admin is the
Secret's password at every start; a dropped user stays dropped; no password is written to the volume."""

from __future__ import annotations

import asyncio
import secrets
import signal
from pathlib import Path

import pytest
import redis

from lifecycle.backends import instance as server
from lifecycle.backends import redis as core
from lifecycle.backends.common import b64
from lifecycle.backends.contract import Ready, Seen, Site
from reconciler.backends.redis import RedisClient
from tests.reconciler.test_redis_client import ADMIN, claim, instance_process
from tests.testbed.procs import ManagedProcess

AVAILABLE = {"status": {"availableReplicas": 1}}
SERVICE = {"spec": {"clusterIP": "127.0.0.1"}}
SLICES = [{"endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]}]


def integrated(appendfsync: str = "everysec") -> core.Config:
    config = core.CORE.configure({"metadata": {"name": "redis-integrated"}, "spec": {
        "type": "redis", "backend": "redis-server",
        "config": {"resources": {"memory": "128Mi", "cpu": "100m"}, "appendfsync": appendfsync}}},
        Site("apprafter-redis", "localhost/redis:test"))
    assert isinstance(config, core.Config)
    return config


def carried_out(step_calls: tuple[object, ...], port: int) -> None:
    """The core's calls, as the operator's client makes them, at the instance's loopback port (the core dials the
    Service's cluster IP: here, 127.0.0.1)."""
    client = RedisClient()
    for call in step_calls:
        asyncio.run(client.call(call._replace(port=port)))  # type: ignore[attr-defined]


def provisioned(config: core.Config, namespace: str, port: int) -> dict[str, str]:
    """The claim provisioned as the operator does it (its user set and saved, then tried): its Secret's fields."""
    admin = {"data": {"password": b64(ADMIN)}}
    objects = dict(zip(server.reads(config.instance), (admin, AVAILABLE, SERVICE, SLICES), strict=False))
    step = core.CORE.provision(claim(namespace), config, Seen(objects, None, secrets.token_urlsafe(32), 0))
    assert isinstance(step.then, Ready) and step.then.secret is not None
    carried_out(step.calls, port)
    return dict(step.then.secret)


def as_user(fields: dict[str, str], port: int) -> redis.Redis:
    return redis.Redis(port=port, username=fields["user"], password=fields["password"], decode_responses=True)


def stopped(proc: ManagedProcess, how: signal.Signals) -> None:
    proc.popen.send_signal(how)
    assert proc.popen.wait(30) in (0, -how), proc.tail()
    proc.stop()


@pytest.mark.parametrize(("how", "appendfsync"), [(signal.SIGTERM, "everysec"), (signal.SIGKILL, "everysec"),
                                                  (signal.SIGKILL, "no"), (signal.SIGKILL, "always")])
def test_a_claims_keys_and_user_outlive_the_server_and_its_credentials_read_them(
        tmp_path: Path, how: signal.Signals, appendfsync: str) -> None:
    config = integrated(appendfsync)
    port, proc = instance_process(config, tmp_path)
    try:
        with redis.Redis(port=port, password=ADMIN, decode_responses=True) as admin:
            assert admin.config_get("appendfsync") == {"appendfsync": appendfsync}
        mine, theirs = provisioned(config, "team-a", port), provisioned(config, "team-b", port)
        with as_user(mine, port) as c:
            prefix = mine["prefix"]
            c.set(f"{prefix}greeting", "hello")
            c.hset(f"{prefix}cart", mapping={"apples": "3", "pears": "1"})
            c.rpush(f"{prefix}queue", *[f"job-{i}" for i in range(1000)])
            c.set(f"{prefix}session", "s", ex=3600)
        stopped(proc, how)  # SIGTERM: the pod deleted (redis-server shuts down); SIGKILL: no shutdown at all

        port, proc = instance_process(config, tmp_path)  # the same volume; no one sets any user again
        with as_user(mine, port) as c:
            assert c.get(f"{prefix}greeting") == "hello"
            assert c.hgetall(f"{prefix}cart") == {"apples": "3", "pears": "1"}
            assert c.llen(f"{prefix}queue") == 1000 and c.lindex(f"{prefix}queue", -1) == "job-999"
            assert 0 < int(c.ttl(f"{prefix}session")) <= 3600  # a key's expiry survives too
            with pytest.raises(redis.exceptions.NoPermissionError):  # its rules came back with it
                c.get(f"{theirs['prefix']}greeting")
        with as_user(theirs, port) as c:
            assert c.ping()
        with pytest.raises(redis.AuthenticationError):  # the default user is still the admin alone
            redis.Redis(port=port, password="guess").ping()
    finally:
        proc.stop()


def test_the_admin_is_the_secrets_password_at_every_start_and_no_password_is_on_the_volume(tmp_path: Path) -> None:
    config = integrated()
    port, proc = instance_process(config, tmp_path)
    try:
        fields = provisioned(config, "team-c", port)
        stopped(proc, signal.SIGTERM)
        another = secrets.token_urlsafe(24)  # the admin Secret holds another password now
        port, proc = instance_process(config, tmp_path, admin=another)
        with redis.Redis(port=port, password=another, decode_responses=True) as admin:
            assert admin.acl_getuser(fields["user"]) is not None
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port, password=ADMIN).ping()
        with as_user(fields, port) as c:
            assert c.ping()
    finally:
        proc.stop()
    written = b"".join(f.read_bytes() for f in (tmp_path / "data").rglob("*") if f.is_file())
    assert b"team-c.shop-redis" in written  # the user was kept (its name in the ACL file)
    for password in (ADMIN, another, fields["password"]):
        assert password.encode() not in written  # the ACL file holds SHA-256 hashes, never a password
    assert oct((tmp_path / "data" / "users.acl").stat().st_mode & 0o777) == "0o600"


def test_a_dropped_user_and_its_keys_stay_dropped_after_a_restart(tmp_path: Path) -> None:
    config = integrated()
    port, proc = instance_process(config, tmp_path)
    try:
        mine, theirs = provisioned(config, "team-d", port), provisioned(config, "team-e", port)
        for fields in (mine, theirs):
            with as_user(fields, port) as c:
                c.set(f"{fields['prefix']}k", "v")
        admin = {"data": {"password": b64(ADMIN)}}
        objects = dict(zip(server.reads(config.instance), (admin, AVAILABLE, SERVICE, SLICES), strict=False))
        carried_out(core.CORE.drop(claim("team-d"), config, Seen(objects, None, "unused", 0)).calls, port)
        stopped(proc, signal.SIGKILL)
        port, proc = instance_process(config, tmp_path)
        with redis.Redis(port=port, password=ADMIN, decode_responses=True) as c:
            assert c.acl_getuser(mine["user"]) is None and not c.exists(f"{mine['prefix']}k")
            assert c.acl_getuser(theirs["user"]) is not None and c.get(f"{theirs['prefix']}k") == "v"
        with pytest.raises(redis.AuthenticationError):
            as_user(mine, port).ping()
    finally:
        proc.stop()
