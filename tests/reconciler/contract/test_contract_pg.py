"""The backend contract (suite.py) for cloudnative-pg, on the API server with CloudNativePG's CRDs: no CloudNativePG
manager or PostgreSQL runs on this tier, so a stand-in plays them (CloudNativePGStandIn: the roles and databases the
Cluster and Database resources ask for, their status as CloudNativePG writes it, and logins held to the Cluster's
pg_hba `sameuser` rule and each role's password Secret). The real-tool twin, where CloudNativePG makes the role and
database and pods connect to PostgreSQL, is tests/reconciler/test_pg_node.py."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.reconciler.contract.suite import *  # noqa: F403 - the contract's tests, run here for cloudnative-pg
from tests.reconciler.contract.suite import Handle
from tests.reconciler.helpers import API, add_provider, edit
from tests.reconciler.operator_proc import FAST, Fixture, operator_fixture
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
SERVICES, PROVIDER, CLUSTER = f"ct-pg-svc-{RUN}", f"ct-pg-{RUN}", f"ct-postgres-{RUN}"
CNPG = "postgresql.cnpg.io/v1"
HBA = "host sameuser all all scram-sha-256"


class Refused(Exception):
    """A login the stand-in's PostgreSQL refuses."""


class CloudNativePGStandIn:
    """CloudNativePG's managers and PostgreSQL, as far as a claim sees them: a role exists while the Cluster's
    spec.managed.roles says present (with its password Secret's password), is dropped when absent; a database exists
    while its Database says present and its owner exists. Status is written as CloudNativePG writes it (a merge patch
    of the status subresource)."""

    def __init__(self, bed: KubeTestBed) -> None:
        self.bed = bed
        self.roles: dict[str, str] = {}  # role -> password
        self.databases: dict[str, str] = {}  # database -> owner
        self.data: dict[str, str] = {}  # database -> what was written in it
        self.lock = threading.Lock()

    def status(self, plural: str, name: str, patch: dict[str, Any]) -> None:
        resp = self.bed.http.patch(f"/apis/{CNPG}/namespaces/{SERVICES}/{plural}/{name}/status",
                                   params={"fieldManager": "manager"}, content=json.dumps({"status": patch}).encode(),
                                   headers={"Content-Type": "application/merge-patch+json"})
        if resp.status_code >= 300 and resp.status_code != 404:
            resp.raise_for_status()

    def tick(self) -> None:
        cluster = self.bed.get(CNPG, "Cluster", CLUSTER, SERVICES)
        if cluster is None:
            return
        wanted = ((cluster.get("spec") or {}).get("managed") or {}).get("roles") or []
        versions: dict[str, Any] = {}
        with self.lock:
            for role in wanted:
                name = role["name"]
                if role.get("ensure") == "absent":
                    self.roles.pop(name, None)
                    continue
                secret = self.bed.get("v1", "Secret", (role.get("passwordSecret") or {}).get("name", ""), SERVICES)
                if secret is None:
                    continue
                self.roles[name] = base64.b64decode(secret["data"]["password"]).decode()
                versions[name] = {"transactionID": 1, "resourceVersion": secret["metadata"]["resourceVersion"]}
            names = {r["name"] for r in wanted}
            reconciled = sorted(r["name"] for r in wanted if (r.get("ensure") == "absent") != (r["name"] in self.roles))
            not_managed = sorted(n for n in self.roles if n not in names)
        self.status("clusters", CLUSTER, {
            "phase": "Cluster in healthy state", "instances": 1, "readyInstances": 1,
            "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterIsReady", "message": "ready",
                            "lastTransitionTime": "2026-12-06T00:00:00Z"}],
            "managedRolesStatus": {"byStatus": {"reconciled": reconciled or None, "not-managed": not_managed or None,
                                                "pending-reconciliation": None},
                                   "passwordStatus": versions or None}})
        listed = self.bed.http.get(self.bed.resource_for(CNPG, "Database").path(None, SERVICES))
        listed.raise_for_status()
        for database in listed.json()["items"]:
            meta, spec = database["metadata"], database.get("spec") or {}
            with self.lock:
                if spec.get("ensure") == "absent":
                    self.databases.pop(spec["name"], None)
                    self.data.pop(spec["name"], None)
                elif spec.get("owner") in self.roles:
                    self.databases[spec["name"]] = spec["owner"]
                else:
                    continue
            self.status("databases", meta["name"], {"applied": True, "observedGeneration": meta["generation"]})

    def login(self, user: str, password: str, database: str) -> None:
        """A TCP login as PostgreSQL with the Cluster's pg_hba would take it, or Refused."""
        cluster = self.bed.get(CNPG, "Cluster", CLUSTER, SERVICES) or {}
        hba = ((cluster.get("spec") or {}).get("postgresql") or {}).get("pg_hba") or []
        if HBA not in hba or database != user:  # `sameuser`: only the database named as the role
            raise Refused(f"no pg_hba entry lets {user} reach database {database}")
        with self.lock:
            if self.roles.get(user) != password:
                raise Refused(f"password authentication failed for user {user}")
            if database not in self.databases:
                raise Refused(f"database {database} does not exist")

    @contextmanager
    def running(self) -> Iterator[None]:
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(0.1):
                self.tick()
        thread = threading.Thread(target=loop, name="cnpg-stand-in", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


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
    yield PgContract(CloudNativePGStandIn(bed))
    bed.delete(API, "ServiceProvider", PROVIDER)


operator = operator_fixture("--no-leader-elect", *FAST, "--platform", Fixture("pg_platform"),
                            "--backend-image", "cloudnative-pg=localhost/postgresql:15")
