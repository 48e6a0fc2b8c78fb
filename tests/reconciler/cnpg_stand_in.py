"""CloudNativePG's managers and PostgreSQL played on the API-server tier (no CloudNativePG runs there), as far as a
claim sees them: the roles and databases a namespace's Clusters and Database resources ask for, their status as
CloudNativePG writes it, and logins held to a Cluster's pg_hba `sameuser` rule and each role's password Secret. Used by
the pg backend's contract (tests/reconciler/contract/test_contract_pg.py) and the pooler bench's test
(tests/reconciler/test_bench_pg_pooler_cluster.py); the real CloudNativePG runs on the node tier."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tests.testbed.kube import KubeTestBed

CNPG = "postgresql.cnpg.io/v1"
HBA = "host sameuser all all scram-sha-256"


class Refused(Exception):
    """A login the stand-in's PostgreSQL refuses."""


class CloudNativePGStandIn:
    """CloudNativePG's managers and PostgreSQL, as far as a claim sees them: a role exists while the Cluster's
    spec.managed.roles says present (with its password Secret's password), is dropped when absent; a database exists
    while its Database says present and its owner exists. Status is written as CloudNativePG writes it (a merge patch
    of the status subresource)."""

    def __init__(self, bed: KubeTestBed, namespace: str, clusters: Sequence[str]) -> None:
        self.bed, self.namespace, self.clusters = bed, namespace, tuple(clusters)
        self.roles: dict[str, str] = {}  # role -> password
        self.databases: dict[str, str] = {}  # database -> owner
        self.data: dict[str, str] = {}  # database -> what was written in it
        self.lock = threading.Lock()

    def status(self, plural: str, name: str, patch: dict[str, Any]) -> None:
        resp = self.bed.http.patch(f"/apis/{CNPG}/namespaces/{self.namespace}/{plural}/{name}/status",
                                   params={"fieldManager": "manager"}, content=json.dumps({"status": patch}).encode(),
                                   headers={"Content-Type": "application/merge-patch+json"})
        if resp.status_code >= 300 and resp.status_code != 404:
            resp.raise_for_status()

    def tick(self) -> None:
        for name in self.clusters:
            self.tick_cluster(name)
        self.tick_databases()

    def tick_cluster(self, cluster_name: str) -> None:
        cluster = self.bed.get(CNPG, "Cluster", cluster_name, self.namespace)
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
                secret = self.bed.get("v1", "Secret", (role.get("passwordSecret") or {}).get("name", ""),
                                  self.namespace)
                if secret is None:
                    continue
                self.roles[name] = base64.b64decode(secret["data"]["password"]).decode()
                versions[name] = {"transactionID": 1, "resourceVersion": secret["metadata"]["resourceVersion"]}
            names = {r["name"] for r in wanted}
            reconciled = sorted(r["name"] for r in wanted if (r.get("ensure") == "absent") != (r["name"] in self.roles))
            not_managed = sorted(n for n in self.roles if n not in names)
        self.status("clusters", cluster_name, {
            "phase": "Cluster in healthy state", "instances": 1, "readyInstances": 1,
            "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterIsReady", "message": "ready",
                            "lastTransitionTime": "2026-12-06T00:00:00Z"}],
            "managedRolesStatus": {"byStatus": {"reconciled": reconciled or None, "not-managed": not_managed or None,
                                                "pending-reconciliation": None},
                                   "passwordStatus": versions or None}})

    def tick_databases(self) -> None:
        listed = self.bed.http.get(self.bed.resource_for(CNPG, "Database").path(None, self.namespace))
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
        """A TCP login as PostgreSQL with the (first) Cluster's pg_hba would take it, or Refused."""
        cluster = self.bed.get(CNPG, "Cluster", self.clusters[0], self.namespace) or {}
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
