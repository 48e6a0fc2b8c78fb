"""The backend contract (suite.py) for redis-server: a bring-your-own Redis (the real redis-server, on 127.0.0.1)
that the operator's claims reach as ACL users confined to their prefixes."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError

from tests.reconciler.contract.suite import *  # noqa: F403 - the contract's tests, run here for redis-server
from tests.reconciler.contract.suite import Handle
from tests.reconciler.helpers import API, add_provider, edit
from tests.reconciler.operator_proc import FAST, operator_fixture
from tests.testbed.kube import KubeTestBed
from tests.testbed.redis import RedisServer, start_redis

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
ADMIN = secrets.token_urlsafe(24)
SERVICES, PROVIDER = f"ct-redis-svc-{RUN}", f"ct-redis-{RUN}"


class RedisContract:
    need = "redis"
    kept_apart = True
    fields = frozenset({"url", "host", "port", "user", "password", "prefix"})

    def __init__(self, server: RedisServer) -> None:
        self.server = server

    def needs(self) -> dict[str, Any]:
        return edit(needs={"redis": {"selector": {"bed": RUN}}}, env={"REDIS_URL": {"claim": "redis/url"}},
                    expose={"port": 8080})

    def client(self, claim: Handle) -> redis.Redis:
        return redis.Redis.from_url(claim["secret"]["url"], decode_responses=True)

    def write(self, claim: Handle, marker: str) -> None:
        with self.client(claim) as c:
            c.set(f"{claim['secret']['prefix']}marker", marker)

    def read(self, claim: Handle) -> str | None:
        with self.client(claim) as c:
            found = c.get(f"{claim['secret']['prefix']}marker")
        return str(found) if found is not None else None

    def denied(self, claim: Handle, other: Handle) -> None:
        theirs = f"{other['secret']['prefix']}marker"
        with self.client(claim) as c:
            for attempt in (lambda: c.get(theirs), lambda: c.set(theirs, "x"), lambda: c.delete(theirs),
                            lambda: c.keys("*"), lambda: c.scan(0), lambda: c.flushall()):
                with pytest.raises(NoPermissionError):
                    attempt()

    def dropped(self, claim: Handle) -> bool:
        with redis.Redis(host="127.0.0.1", port=self.server.port, password=ADMIN, decode_responses=True) as admin:
            return admin.acl_getuser(claim["secret"]["user"]) is None and not admin.exists(
                f"{claim['secret']['prefix']}marker")

    def settled(self) -> AbstractContextManager[None]:
        return nullcontext()


@pytest.fixture(scope="module")
def contract(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisContract]:
    server = start_redis(Path(tmp_path_factory.mktemp("redis")), password=ADMIN)
    bed.ensure_namespace(SERVICES)
    bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{PROVIDER}-admin", "namespace": SERVICES},
               "stringData": {"password": ADMIN}}, field_manager="admin")
    add_provider(bed, PROVIDER, "redis", "redis-server", {"namespace": SERVICES, "address": server.address},
                 labels={"bed": RUN})
    yield RedisContract(server)
    bed.delete(API, "ServiceProvider", PROVIDER)
    server.stop()


operator = operator_fixture("--no-leader-elect", *FAST)
