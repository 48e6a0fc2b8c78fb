"""Redis shares, on the real redis-server (issue 41 item 1). A shared instance held by one claim's script (the
operator restores service, never at the price of other claims' data), with a provider that lets its claims run
scripts: a busy script that has written nothing is killed by the operator's next call as the admin, which then goes
through (another claim provisioned; the script's caller told it was killed); one that has written cannot be killed,
and the operator says InstanceWedged, leaving the server, and every claim's keys, to its administrator. And a claim
of its own instance (`isolation: instance`) holds only its own connections."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.exceptions import ResponseError

from lifecycle.backends import redis as core
from lifecycle.backends.contract import Site
from reconciler.backend_failure import WEDGED, BackendFailure
from reconciler.backends.redis import set_user
from tests.reconciler.test_redis_client import ADMIN, claim, instance_process, provisioned
from tests.testbed.procs import ManagedProcess, wait_for
from tests.testbed.redis import RedisServer, start_redis

SPIN = "local i = 0 while true do i = i + 1 end"
WRITE_THEN_SPIN = f"redis.call('SET', KEYS[1], 'x') {SPIN}"


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of its own (one test leaves it wedged): BUSY after 100 ms of a script, not redis' 5 s."""
    started = start_redis(tmp_path / "redis", password=ADMIN, extra=("--busy-reply-threshold", "100"))
    yield started
    started.stop()


def held(client: redis.Redis, script: str, *keys: str) -> tuple[threading.Thread, list[BaseException]]:
    """`script` run by `client` in a thread (it returns only once the script ends); what it raised."""
    raised: list[BaseException] = []

    def spin() -> None:
        try:
            client.execute_command("EVAL", script, str(len(keys)), *keys)  # type: ignore[no-untyped-call]
        except BaseException as e:
            raised.append(e)
    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    return thread, raised


def busy(server: RedisServer) -> bool | None:
    """Whether the server answers BUSY (a fresh admin connection's PING)."""
    with redis.Redis(port=server.port, password=ADMIN, socket_timeout=2) as admin:
        try:
            admin.ping()
        except ResponseError as e:
            return True if str(e).startswith("BUSY") else None
    return None


def another_claim(server: RedisServer) -> str:
    """Set a second claim's user as the operator provisions it: the admin's ACL SETUSER."""
    account = core.account_of(claim("other-team"))
    asyncio.run(set_user("127.0.0.1", server.port, ADMIN, account.user,
                         core.acl_rules(account, secrets.token_urlsafe(32))))
    return account.user


def test_a_busy_script_is_killed_by_the_operators_next_admin_call_which_then_goes_through(
        server: RedisServer) -> None:
    kept, kept_client = provisioned(server, "kept-team")
    kept_client.set(f"{kept.prefix}k", "v")
    _, hog = provisioned(server, "hog-team", scripting=True)
    thread, raised = held(hog, SPIN)
    wait_for("the server busy with the script", lambda: busy(server), 30)
    user = another_claim(server)  # killed the script, then set the user
    thread.join(10)
    assert not thread.is_alive() and raised and "killed" in str(raised[0]).lower(), raised
    with redis.Redis(port=server.port, password=ADMIN, decode_responses=True) as admin:
        assert user in admin.execute_command("ACL", "USERS")  # type: ignore[no-untyped-call]
    assert kept_client.get(f"{kept.prefix}k") == "v"  # nothing of another claim's data lost


def test_a_script_that_wrote_is_left_to_the_administrator_and_the_claim_says_why(server: RedisServer) -> None:
    hog, client = provisioned(server, "hog-team", scripting=True)
    thread, _ = held(client, WRITE_THEN_SPIN, f"{hog.prefix}k")
    wait_for("the server busy with the script", lambda: busy(server), 30)
    with pytest.raises(BackendFailure) as failed:
        another_claim(server)
    assert failed.value.reason == WEDGED and failed.value.retryable
    assert "SHUTDOWN NOSAVE" in str(failed.value) and "administrator" in str(failed.value), failed.value
    assert server.process.popen.poll() is None and thread.is_alive()  # not shut down: every claim's keys still there


def test_a_claim_of_its_own_instance_holds_only_its_own_connections(tmp_path: Path) -> None:
    """`isolation: instance` (issue 41 item 1): on a shared instance one claim can hold every connection slot
    (redis-server bounds no user's); each claim's own instance, its command line as its pod runs it (nano: 32
    clients), refuses the hog its 33rd connection while the neighbour's instance answers."""
    config = core.CORE.configure({"metadata": {"name": "redis-own"}, "spec": {
        "type": "redis", "backend": "redis-server", "config": {"isolation": "instance"}}},
        Site("apprafter-redis", "localhost/redis:test"))
    assert isinstance(config, core.Config)
    started: list[ManagedProcess] = []
    held_open: list[redis.Redis] = []
    try:
        clients = {}
        for team in ("hog-team", "neighbour-team"):
            mine = claim(team)
            mine["spec"]["size"] = "nano"  # type: ignore[index]
            own = core.CORE.serving(mine, config)
            assert own.max_clients == 32
            port, proc = instance_process(own, tmp_path / team)
            started.append(proc)
            account, password = core.account_of(mine), secrets.token_urlsafe(32)
            asyncio.run(set_user("127.0.0.1", port, ADMIN, account.user, core.acl_rules(account, password)))
            clients[team] = (port, account.user, password)
        port, user, password = clients["hog-team"]
        for _ in range(32):  # every slot of its own instance
            conn = redis.Redis(port=port, username=user, password=password, single_connection_client=True)
            conn.ping()
            held_open.append(conn)
        with pytest.raises(redis.ConnectionError, match="max number of clients reached"):
            redis.Redis(port=port, username=user, password=password).ping()
        port, user, password = clients["neighbour-team"]
        with redis.Redis(port=port, username=user, password=password, decode_responses=True) as neighbour:
            assert neighbour.ping() and neighbour.set(f"{user}:k", "v") and neighbour.get(f"{user}:k") == "v"
    finally:
        for conn in held_open:
            conn.close()
        for proc in started:
            proc.stop()
