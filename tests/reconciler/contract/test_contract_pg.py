"""The backend contract (suite.py) for cloudnative-pg, on the API server with CloudNativePG's CRDs: no CloudNativePG
manager or PostgreSQL runs on this tier, so a stand-in plays them (CloudNativePGStandIn: the roles and databases the
Cluster and Database resources ask for, their status as CloudNativePG writes it, and logins held to the Cluster's
pg_hba `sameuser` rule and each role's password Secret). The real-tool twin, where CloudNativePG makes the role and
database and pods connect to PostgreSQL, is tests/reconciler/test_pg_node.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reconciler.cnpg_stand_in import CloudNativePGStandIn, Refused
from tests.reconciler.contract.suite import *  # noqa: F403 - the contract's tests, run here for cloudnative-pg
from tests.reconciler.contract.suite import Handle
from tests.reconciler.helpers import API, add_provider, edit
from tests.reconciler.operator_proc import FAST, Fixture, operator_fixture
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
SERVICES, PROVIDER, CLUSTER = f"ct-pg-svc-{RUN}", f"ct-pg-{RUN}", f"ct-postgres-{RUN}"


class PgContract:
    need = "pg"
    kept_apart = True
    fields = frozenset({"url", "pooledUrl", "host", "port", "user", "password", "db"})

    def __init__(self, cnpg: CloudNativePGStandIn) -> None:
        self.cnpg = cnpg

    def needs(self) -> dict[str, Any]:
        return edit(needs={"pg": {"selector": {"bed": RUN}}}, env={"DATABASE_URL": {"claim": "pg/url"}},
                    expose={"port": 8080})

    def _as(self, claim: Handle) -> str:
        secret = claim["secret"]
        self.cnpg.login(secret["user"], secret["password"], secret["db"])
        return str(secret["db"])

    def write(self, claim: Handle, marker: str) -> None:
        self.cnpg.data[self._as(claim)] = marker

    def read(self, claim: Handle) -> str | None:
        return self.cnpg.data.get(self._as(claim))

    def denied(self, claim: Handle, other: Handle) -> None:
        mine, theirs = claim["secret"], other["secret"]
        for user, password in ((mine["user"], mine["password"]), (theirs["user"], mine["password"])):
            with pytest.raises(Refused):
                self.cnpg.login(user, password, theirs["db"])

    def dropped(self, claim: Handle) -> bool:
        name = claim["secret"]["db"]
        return name not in self.cnpg.databases and claim["secret"]["user"] not in self.cnpg.roles

    def settled(self) -> Any:
        return self.cnpg.running()


@pytest.fixture(scope="module")
def pg_platform(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> str:
    bed.ensure_namespace(SERVICES)
    path = Path(tmp_path_factory.mktemp("platform")) / "platform.yaml"
    path.write_text(f"providerNamespaces: {{pg: {SERVICES}}}\n")
    return str(path)


@pytest.fixture(scope="module")
def contract(bed: KubeTestBed, pg_platform: str) -> Iterator[PgContract]:
    add_provider(bed, PROVIDER, "pg", "cloudnative-pg", {"cluster": CLUSTER, "namespace": SERVICES},
                 labels={"bed": RUN})
    yield PgContract(CloudNativePGStandIn(bed, SERVICES, [CLUSTER]))
    bed.delete(API, "ServiceProvider", PROVIDER)


operator = operator_fixture("--no-leader-elect", *FAST, "--platform", Fixture("pg_platform"),
                            "--backend-image", "cloudnative-pg=localhost/postgresql:15")
