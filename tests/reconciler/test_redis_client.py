"""The integrated instance's command line run by the real redis-server (what its pod runs), and a claim's ACL user
on it (reconciler/backends/redis.py with lifecycle/backends/redis.py's rules): it reads back its own writes under its
prefix, cannot read, write, publish to or script another claim's keys and channels (their prefix guessed), cannot run
an admin or instance-wide command, a script (unless its provider allows them) or client tracking; failures say what
failed, never a password, and come within their time bound."""

from __future__ import annotations

import asyncio
import base64
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError, ResponseError

from lifecycle.backends import redis as core
from lifecycle.backends.contract import Ready, Seen, Site
from lifecycle.backends.instance import DATA, reads
from reconciler.backend_failure import BackendFailure
from reconciler.backends.redis import TOTAL_TIMEOUT, RedisClient, set_user, try_user
from tests.testbed.procs import ManagedProcess, free_port, system_tool, wait_for
from tests.testbed.redis import RedisServer, start_redis

ADMIN = secrets.token_urlsafe(24)
# what a tenant must not run: each instance-wide, or showing or touching what is not its own
FORBIDDEN = [("FLUSHALL",), ("FLUSHDB",), ("KEYS", "*"), ("SCAN", "0"), ("RANDOMKEY",), ("DBSIZE",),
             ("CONFIG", "GET", "*"), ("CONFIG", "SET", "maxmemory", "0"), ("ACL", "LIST"), ("ACL", "SETUSER", "x"),
             ("DEBUG", "SLEEP", "0"), ("MODULE", "LIST"), ("CLIENT", "LIST"), ("CLIENT", "KILL", "ID", "1"),
             ("MONITOR",), ("SHUTDOWN",), ("SAVE",), ("BGSAVE",), ("SLAVEOF", "NO", "ONE"), ("SWAPDB", "0", "1"),
             ("SELECT", "1"), ("PUBSUB", "CHANNELS"), ("SCRIPT", "FLUSH"), ("SCRIPT", "KILL"), ("FUNCTION", "LIST"),
             ("FUNCTION", "FLUSH"), ("EVAL", "return 1", "0"), ("CLIENT", "TRACKING", "ON", "BCAST"),
             ("SLOWLOG", "GET"), ("LATENCY", "DOCTOR")]


def run(client: redis.Redis, *command: str) -> Any:
    """One command as `client`'s user (redis-py's execute_command is untyped)."""
    return client.execute_command(*command)  # type: ignore[no-untyped-call]


def claim(namespace: str, name: str = "shop-redis") -> dict[str, object]:
    return {"apiVersion": "apprafter.io/v1alpha1", "kind": "ResourceClaim",
            "metadata": {"namespace": namespace, "name": name, "uid": "u"}, "spec": {"type": "redis"}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    started = start_redis(Path(tmp_path_factory.mktemp("redis")), password=ADMIN)
    yield started
    started.stop()


def provisioned(server: RedisServer, namespace: str, scripting: bool = False) -> tuple[core.Account, redis.Redis]:
    """The claim's user as the backend sets it (on a provider with `scripting` as given), and a client logged in as it
    (as the app's Secret would)."""
    account, password = core.account_of(claim(namespace)), secrets.token_urlsafe(32)
    rules = core.acl_rules(account, password, scripting)
    asyncio.run(set_user("127.0.0.1", server.port, ADMIN, account.user, rules))
    asyncio.run(try_user("127.0.0.1", server.port, account.user, password))
    return account, redis.Redis(port=server.port, username=account.user, password=password, decode_responses=True)


def test_a_claim_reads_its_own_keys_and_reaches_nothing_else(server: RedisServer) -> None:
    a, as_a = provisioned(server, "team-a")
    b, as_b = provisioned(server, "team-b")
    assert (a.user, a.prefix) == ("team-a.shop-redis", "team-a.shop-redis:")
    as_b.set(f"{b.prefix}cart", "b's")
    as_a.set(f"{a.prefix}cart", "a's")
    assert as_a.get(f"{a.prefix}cart") == "a's" and as_b.get(f"{b.prefix}cart") == "b's"
    assert as_a.incr(f"{a.prefix}visits") == 1 and as_a.hset(f"{a.prefix}h", "f", "v") == 1

    # B's keys, its prefix guessed: A can neither read, write, rename into, copy nor delete them
    for command in [("GET", f"{b.prefix}cart"), ("SET", f"{b.prefix}cart", "x"), ("DEL", f"{b.prefix}cart"),
                    ("EXISTS", f"{b.prefix}cart"), ("RENAME", f"{a.prefix}cart", f"{b.prefix}mine"),
                    ("COPY", f"{b.prefix}cart", f"{a.prefix}copy"), ("GET", "team-b.other:cart"),
                    ("SET", "unprefixed", "x"), ("PUBLISH", f"{b.prefix}events", "x"),
                    ("EVAL", "return redis.call('GET', KEYS[1])", "1", f"{b.prefix}cart"),
                    ("EVAL", f"return redis.call('GET', '{b.prefix}cart')", "0")]:
        with pytest.raises((NoPermissionError, ResponseError), match=r"(?i)permission|can't access"):
            run(as_a, *command)
    admin = redis.Redis(port=server.port, password=ADMIN, decode_responses=True)
    for command in FORBIDDEN:  # the ACL refuses each (DEBUG and MODULE are also off server-wide: ask the ACL too)
        assert "no permissions" in run(admin, "ACL", "DRYRUN", a.user, *command), command
        with pytest.raises((NoPermissionError, ResponseError)):
            run(as_a, *command)
    assert run(admin, "ACL", "DRYRUN", a.user, "GET", f"{a.prefix}cart") == "OK"
    # what a queue library needs stays: INFO, pub/sub on its own channels
    assert "redis_version" in as_a.info("server")
    assert as_a.publish(f"{a.prefix}events", "x") == 0
    assert as_b.get(f"{b.prefix}cart") == "b's"  # untouched by all of the above


BUSY = "local i = 0 while true do i = i + 1 end"  # alone on the server's one thread until killed
LIBRARY = "#!lua name=hog\nredis.register_function('hog', function() local t = {} while true do t[#t+1] = 1 end end)"


def test_a_hostile_claim_can_neither_stall_the_shared_instance_nor_watch_another_claims_keys(
        server: RedisServer) -> None:
    victim, as_victim = provisioned(server, "team-v")
    _, as_hostile = provisioned(server, "team-h")
    as_victim.set(f"{victim.prefix}order", "42")
    sha = run(redis.Redis(port=server.port, password=ADMIN), "SCRIPT", "LOAD", BUSY).decode()
    # a busy script (every other tenant would read BUSY; once it wrote, only a SHUTDOWN ends it), a function
    # library, client-side tracking of the victim's prefix or of every key (broadcast mode: key names as they change)
    for command in [("EVAL", BUSY, "0"), ("EVAL_RO", BUSY, "0"), ("EVALSHA", sha, "0"), ("SCRIPT", "LOAD", BUSY),
                    ("FUNCTION", "LOAD", LIBRARY), ("FCALL", "hog", "0"),
                    ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", victim.prefix),
                    ("CLIENT", "TRACKING", "ON", "BCAST"), ("CLIENT", "TRACKING", "ON")]:
        with pytest.raises(NoPermissionError, match="no permissions to run"):
            run(as_hostile, *command)
    as_victim.set(f"{victim.prefix}order", "43")  # and no invalidation of it reached the hostile connection
    assert as_victim.get(f"{victim.prefix}order") == "43"
    assert as_hostile.ping()


def test_a_provider_that_allows_scripting_runs_a_claims_scripts_on_its_own_keys_only(server: RedisServer) -> None:
    """`scripting: true` (a provider whose claims are one team's: BullMQ needs it): EVAL and EVALSHA on its own
    keys; another claim's keys, a function library and tracking stay refused."""
    own, as_own = provisioned(server, "team-s", scripting=True)
    other, as_other = provisioned(server, "team-o")
    as_own.set(f"{own.prefix}job", "1")
    as_other.set(f"{other.prefix}job", "theirs")
    assert as_own.eval("return redis.call('INCR', KEYS[1])", 1, f"{own.prefix}job") == 2
    sha = as_own.script_load("return redis.call('GET', KEYS[1])")
    assert as_own.evalsha(sha, 1, f"{own.prefix}job") == "2"
    for command in [("EVAL", "return redis.call('GET', KEYS[1])", "1", f"{other.prefix}job"),
                    ("EVAL", f"return redis.call('GET', '{other.prefix}job')", "0"), ("FUNCTION", "LOAD", LIBRARY),
                    ("SCRIPT", "FLUSH"), ("SCRIPT", "KILL"), ("CLIENT", "TRACKING", "ON", "BCAST")]:
        with pytest.raises((NoPermissionError, ResponseError), match=r"(?i)permission|can't access"):
            run(as_own, *command)
    assert as_other.get(f"{other.prefix}job") == "theirs"


def test_setting_the_user_again_keeps_its_keys_and_takes_the_new_password(server: RedisServer) -> None:
    account, first = provisioned(server, "team-c")
    first.set(f"{account.prefix}kept", "1")
    _, second = provisioned(server, "team-c")
    assert second.get(f"{account.prefix}kept") == "1"
    with pytest.raises(redis.AuthenticationError):
        first.connection_pool.disconnect()
        first.ping()


def test_failures_name_what_failed_never_a_password(server: RedisServer) -> None:
    account, password = core.account_of(claim("team-d")), secrets.token_urlsafe(32)
    wrong = secrets.token_urlsafe(24)
    with pytest.raises(BackendFailure) as refused:
        asyncio.run(set_user("127.0.0.1", server.port, wrong, account.user, core.acl_rules(account, password)))
    assert refused.value.reason == "BackendRefused"
    assert str(refused.value) == (f"127.0.0.1:{server.port} refused the password of the admin's ACL SETUSER "
                                  "team-d.shop-redis")
    bad_rules = [*core.acl_rules(account, password), "+nosuchcommand"]
    with pytest.raises(BackendFailure) as bad:
        asyncio.run(set_user("127.0.0.1", server.port, ADMIN, account.user, bad_rules))
    assert bad.value.reason == "BackendRefused" and "nosuchcommand" in str(bad.value)
    for said in (str(refused.value), str(bad.value)):
        assert password not in said and ADMIN not in said and wrong not in said


def test_a_silent_server_is_unreachable_within_the_bound() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(BackendFailure) as unreachable:
            asyncio.run(try_user("127.0.0.1", port, "u", "p"))
        assert time.monotonic() - started < TOTAL_TIMEOUT + 2
    assert unreachable.value.reason == "BackendUnreachable" and f"127.0.0.1:{port}" in str(unreachable.value)


def test_the_instances_command_line_runs_redis_server_with_its_maxmemory_and_admin_password(tmp_path: Path) -> None:
    config = core.CORE.configure({"metadata": {"name": "redis-integrated"}, "spec": {
        "type": "redis", "backend": "redis-server", "config": {"resources": {"memory": "128Mi", "cpu": "100m"}}}},
        Site("apprafter-redis", "localhost/redis:test"))
    assert isinstance(config, core.Config)
    port, proc = instance_process(config, tmp_path)
    try:
        admin = redis.Redis(port=port, password=ADMIN, decode_responses=True)
        settings = {k: v for key in ("maxmemory", "maxmemory-policy", "save", "appendonly", "appendfsync", "dir",
                                     "aclfile") for k, v in admin.config_get(key).items()}
        data = tmp_path / "data"
        assert settings == {"maxmemory": str(96 * 2**20), "maxmemory-policy": "volatile-lru", "save": "",
                            "appendonly": "yes", "appendfsync": "everysec", "dir": str(data),
                            "aclfile": str(data / "users.acl")}
        with pytest.raises(redis.AuthenticationError):  # the default user is the admin: nobody else gets in
            redis.Redis(port=port, password="guess").ping()
        account, password = core.account_of(claim("team-e")), secrets.token_urlsafe(32)
        asyncio.run(set_user("127.0.0.1", port, ADMIN, account.user, core.acl_rules(account, password)))
        asyncio.run(try_user("127.0.0.1", port, account.user, password))
    finally:
        proc.stop()


def instance_process(config: core.Config, workdir: Path, admin: str = ADMIN,
                     port: int | None = None) -> tuple[int, ManagedProcess]:
    """An instance's redis-server as its pod runs it (its container's command and args, the admin Secret's password
    as its environment, as the kubelet gives it; its volume `workdir/data`, kept between starts; another port, on
    loopback), answering its admin: (its port, the process)."""
    deployment = next(o for o in core.instance_objects(config) if o["kind"] == "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    port, args = port or free_port(), list(container["args"])
    args[args.index("--port") + 1] = str(port)
    args[args.index("--bind") + 1: args.index("--bind") + 3] = ["127.0.0.1", "-::1"]
    command = [part if part != DATA else str(workdir / "data") for part in container["command"]]
    system_tool("redis-server", "run `make setup` (tools/setup-gitops.sh installs it)")
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    proc = ManagedProcess("redis-instance", [*command, *args], workdir / "redis.log",
                          env={"PATH": "/usr/bin:/bin", "ADMIN_PASSWORD": admin}, cwd=workdir)
    try:
        client = redis.Redis(port=port, password=admin, decode_responses=True)
        wait_for("the instance to answer", lambda: _answers(client), 20, proc)
    except BaseException:
        proc.stop()
        raise
    return port, proc


def _answers(client: redis.Redis) -> bool | None:
    try:
        return bool(client.ping()) or None
    except redis.ConnectionError:  # BusyLoadingError too: not while it loads its append-only file
        return None


def test_the_client_carries_out_the_cores_calls_and_the_drop_takes_the_user_and_its_keys(server: RedisServer) -> None:
    """The calls the core says for a claim on a Redis the administrator runs, carried out by RedisClient: the user
    works, then the drop deletes it and its keys, and no other user's."""
    config = core.CORE.configure({"metadata": {"name": "own"}, "spec": {
        "type": "redis", "backend": "redis-server", "config": {"address": f"127.0.0.1:{server.port}"}}},
        Site("apprafter-redis", None))
    assert isinstance(config, core.Config)
    admin_secret = {"data": {"password": base64.b64encode(ADMIN.encode()).decode()}}
    client = RedisClient()

    def seen() -> Seen:
        return Seen({reads(config.instance)[0]: admin_secret}, None, secrets.token_urlsafe(32), 0)
    mine, theirs = claim("team-f"), claim("team-g")
    fields: dict[str, dict[str, str]] = {}
    for who in (mine, theirs):
        step = core.CORE.provision(who, config, seen())
        for call in step.calls:
            asyncio.run(client.call(call))
        assert isinstance(step.then, Ready) and step.then.secret is not None
        fields[who["metadata"]["namespace"]] = step.then.secret
        with redis.Redis.from_url(step.then.secret["url"], decode_responses=True) as c:
            c.set(f"{step.then.secret['prefix']}k", "v")
    for call in core.CORE.drop(mine, config, seen()).calls:
        asyncio.run(client.call(call))
    with redis.Redis(port=server.port, password=ADMIN, decode_responses=True) as admin:
        assert admin.acl_getuser(fields["team-f"]["user"]) is None
        assert not admin.exists(f"{fields['team-f']['prefix']}k")
        assert admin.acl_getuser(fields["team-g"]["user"]) is not None
        assert admin.get(f"{fields['team-g']['prefix']}k") == "v"
    with pytest.raises(TypeError):
        asyncio.run(client.call(object()))
