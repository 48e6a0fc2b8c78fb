"""The redis-server backend's client: a claim's ACL user on a Redis, through redis-py's asyncio client.

Every call is bounded in time: set the user as the admin (and save it to the instance's ACL file), prove its
credentials as the user, drop it and its keys. A
failure is a BackendFailure whose message never carries a password. It carries out lifecycle.backends.redis's calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, NoPermissionError, RedisError, ResponseError

from lifecycle.backends.redis import DropUser, SetUser, TryUser, busy, still_wedged
from reconciler.backend_failure import REFUSED, UNREACHABLE, WEDGED, BackendFailure

__all__ = ["CALL_TIMEOUT", "CONNECT_TIMEOUT", "TOTAL_TIMEOUT", "RedisClient", "drop_user", "set_user", "try_user"]

log = logging.getLogger("apprafter.claims")

CONNECT_TIMEOUT = 3.0  # seconds to open the TCP connection
CALL_TIMEOUT = 5.0  # seconds for one command's answer
TOTAL_TIMEOUT = 10.0  # seconds for one whole exchange (connect, AUTH, command, close), whatever redis-py retries


def _client(host: str, port: int, username: str | None, password: str) -> Redis:
    # No retries of our own (the reconcile is retried) and one connection.
    return Redis(host=host, port=port, username=username, password=password, socket_timeout=CALL_TIMEOUT,
                 socket_connect_timeout=CONNECT_TIMEOUT, retry=Retry(NoBackoff(), 0), single_connection_client=True,
                 decode_responses=True)


def _redacted(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "<redacted>")
    return text


Work = Callable[[Redis], Awaitable[object]]
SCAN_BATCH = 500  # keys per SCAN step and per UNLINK when a claim's keys are dropped


async def _exchange(host: str, port: int, username: str | None, password: str, command: Sequence[str] | Work,
                    what: str, secrets: Sequence[str], timeout: float = TOTAL_TIMEOUT) -> None:
    """Run one command (or `command(client)`) as `username` (None: the default user) and close; BackendFailure on
    any failure. As the admin, a server busy with a script gets the script killed and the command once more
    (lifecycle.backends.redis.still_wedged: unless the script has written)."""
    if await _once(host, port, username, password, command, what, secrets, timeout):
        return
    if username is not None:  # a claim's user may not end another's script: the next admin call will
        raise BackendFailure(WEDGED, f"{host}:{port} is busy with a script (the operator ends it at its next step as "
                                     "the admin)")
    await _end_script(host, port, password)
    if not await _once(host, port, username, password, command, what, secrets, timeout):
        raise BackendFailure(WEDGED, f"{host}:{port} is busy with another script")


async def _end_script(host: str, port: int, password: str) -> None:
    """SCRIPT KILL as the admin; BackendFailure(InstanceWedged) when the script cannot be killed."""
    reply = "OK"

    async def kill(client: Redis) -> None:
        nonlocal reply
        try:
            reply = str(await client.execute_command("SCRIPT", "KILL"))  # type: ignore[no-untyped-call]
        except ResponseError as e:  # NOTBUSY (it ended meanwhile) or UNKILLABLE
            reply = str(e)
    await _once(host, port, None, password, kill, "the admin's SCRIPT KILL", [password], TOTAL_TIMEOUT)
    wedged = still_wedged(f"{host}:{port}", reply)
    if wedged is not None:
        raise BackendFailure(WEDGED, wedged)
    log.warning("a script kept the instance busy: killed", extra={"controller": "claims", "object": f"{host}:{port}",
                                                                 "reason": reply})


async def _once(host: str, port: int, username: str | None, password: str, command: Sequence[str] | Work,
                what: str, secrets: Sequence[str], timeout: float) -> bool:
    """One exchange: True once done, False when the server answered BUSY (a script holds it); BackendFailure else."""
    where = f"{host}:{port}"
    client = _client(host, port, username, password)
    try:
        async with asyncio.timeout(timeout):
            try:
                if callable(command):
                    await command(client)
                else:
                    await client.execute_command(*command)  # type: ignore[no-untyped-call]
            finally:
                await client.aclose()
    except TimeoutError as e:
        raise BackendFailure(UNREACHABLE, f"{where} did not answer {what} within {timeout:g} s") from e
    except AuthenticationError as e:
        raise BackendFailure(REFUSED, f"{where} refused the password of {what}") from e
    except NoPermissionError as e:
        raise BackendFailure(REFUSED, f"{where} does not let {what} run: {_redacted(str(e), secrets)}") from e
    except ResponseError as e:
        if busy(str(e)):
            return False
        raise BackendFailure(REFUSED, f"{where} refused {what}: {_redacted(str(e), secrets)}") from e
    except (RedisError, OSError) as e:  # ConnectionError, redis' TimeoutError: never reached
        raise BackendFailure(UNREACHABLE, f"{where} could not be reached for {what}: "
                                        f"{_redacted(str(e), secrets) or type(e).__name__}") from e
    return True


async def set_user(host: str, port: int, admin_password: str, user: str, rules: Sequence[str],
                   save: bool = False) -> None:
    """ACL SETUSER `user` with `rules` as the admin (the default user, authenticated by `admin_password`); with
    `save`, then ACL SAVE: the instance's ACL file holds the user, so a restarted server knows it at once."""
    async def setuser(client: Redis) -> None:
        await client.execute_command("ACL", "SETUSER", user, *rules)  # type: ignore[no-untyped-call]
        if save:
            await client.execute_command("ACL", "SAVE")  # type: ignore[no-untyped-call]
    await _exchange(host, port, None, admin_password, setuser,
                    f"the admin's ACL SETUSER {user}" + (" and ACL SAVE" if save else ""),
                    [admin_password, *(rule[1:] for rule in rules if rule.startswith(">"))])


async def try_user(host: str, port: int, user: str, password: str) -> None:
    """AUTH as `user` and PING: its credentials work."""
    await _exchange(host, port, user, password, ["PING"], f"user {user}", [password])


async def drop_user(host: str, port: int, admin_password: str, user: str, prefix: str,
                    timeout: float = 60.0, save: bool = False) -> int:
    """As the admin: ACL DELUSER `user` (Redis closes its connections; with `save`, ACL SAVE: gone from the ACL file
    too) and UNLINK every key under `prefix` (SCAN in batches: never KEYS, which blocks the instance); how many keys
    went. `prefix` holds no glob character (a claim's
    is `<namespace>.<claim>:`, DNS labels and a dot), so `<prefix>*` matches exactly its keys."""
    gone = 0

    async def drop(client: Redis) -> None:
        nonlocal gone
        await client.execute_command("ACL", "DELUSER", user)  # type: ignore[no-untyped-call]
        if save:
            await client.execute_command("ACL", "SAVE")  # type: ignore[no-untyped-call]
        cursor = 0
        while True:
            cursor, keys = await client.scan(cursor, match=f"{prefix}*", count=SCAN_BATCH)
            if keys:
                gone += int(await client.unlink(*keys))
            if int(cursor) == 0:
                return

    await _exchange(host, port, None, admin_password, drop, f"the admin's ACL DELUSER {user} and UNLINK {prefix}*",
                    [admin_password], timeout)
    return gone


class RedisClient:
    """Carries out the redis-server core's calls (lifecycle.backends.redis)."""

    async def call(self, call: object) -> None:
        if isinstance(call, SetUser):
            await set_user(call.host, call.port, call.admin_password, call.user, call.rules, call.save)
        elif isinstance(call, TryUser):
            await try_user(call.host, call.port, call.user, call.password)
        elif isinstance(call, DropUser):
            await drop_user(call.host, call.port, call.admin_password, call.user, call.prefix, save=call.save)
        else:
            raise TypeError(f"not a redis-server call: {type(call).__name__}")
