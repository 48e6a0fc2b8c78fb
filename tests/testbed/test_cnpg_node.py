"""CloudNativePG on the node (tests/testbed/cnpg.py): the operator built here runs as a pod, a one-instance Cluster
of the PostgreSQL image built here becomes Ready on a volume of the node's host-path provisioner, and a pod reaches
it through its `-rw` Service by DNS name. Two managed roles and a Database CR each: each role logs into its own
database; by default (CloudNativePG's Database CR runs CREATE DATABASE ... OWNER and nothing else) the other role
may CONNECT too, which `REVOKE CONNECT ... FROM PUBLIC` closes."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.images.podman import inspect, make_images
from tests.testbed import cnpg
from tests.testbed.cnpg import API, CloudNativePG
from tests.testbed.node import NodeTestBed

pytestmark = [pytest.mark.node, pytest.mark.testbed]

CLUSTER = "pg"
ROLES = ("claim_a", "claim_b")  # each role's database has its name
# What the client pod runs: each line one connection through the -rw Service's DNS name, as the role its password
# env names; only the query's answer or the refusal's kind is printed (never a password).
CLIENT = """set -u
q() { PGPASSWORD="$2" psql -X -w "host=$HOST port=5432 user=$1 dbname=$3 connect_timeout=10" -Atc "$4" 2>&1 \
      | grep -o -e 'permission denied for database' -e 'password authentication failed' -e '^[^ ]*$' | head -1; }
echo "a-own=$(q claim_a "$PW_A" claim_a 'select current_user || chr(47) || current_database()')"
echo "b-own=$(q claim_b "$PW_B" claim_b 'select current_user || chr(47) || current_database()')"
echo "b-on-a=$(q claim_b "$PW_B" claim_a 'select current_database()')"
echo "a-on-b=$(q claim_a "$PW_A" claim_b 'select current_database()')"
echo "b-on-app=$(q claim_b "$PW_B" app 'select current_database()')"
echo "a-wrong-password=$(q claim_a "not-$PW_A" claim_a 'select 1')"
echo "acl-a=$(q claim_a "$PW_A" claim_a "select coalesce(datacl::text, 'default') from pg_database \
                                           where datname = 'claim_a'")"
echo "shared-buffers=$(q claim_a "$PW_A" claim_a 'show shared_buffers')"
"""


@pytest.fixture(scope="module")
def operator(node: NodeTestBed) -> Iterator[CloudNativePG]:
    """The `cnpg` and `postgresql` images `make images` builds, in the node's containerd, and the operator."""
    images = make_images(names=("cnpg", "postgresql"))
    operator_image, postgres_image = (node.import_image(images[name].ref) for name in ("cnpg", "postgresql"))
    installed = cnpg.install(node, operator_image, postgres_image)
    yield installed
    cnpg.uninstall(node)


def cluster(installed: CloudNativePG, namespace: str) -> dict[str, Any]:
    """One instance, Guaranteed (requests = limits), shared_buffers well below the memory limit, two managed roles."""
    resources = {"cpu": "250m", "memory": "256Mi"}
    return {"apiVersion": API, "kind": "Cluster", "metadata": {"name": CLUSTER, "namespace": namespace}, "spec": {
        "instances": 1, "imageName": installed.postgres_image, "imagePullPolicy": "IfNotPresent",
        "postgresUID": 26, "postgresGID": 26,
        "storage": {"size": "1Gi", "storageClass": installed.storage_class},
        "resources": {"requests": resources, "limits": resources},
        "postgresql": {"parameters": {"shared_buffers": "64MB", "max_connections": "30"}},
        "managed": {"roles": [{"name": role, "ensure": "present", "login": True,
                               "passwordSecret": {"name": role.replace("_", "-")}} for role in ROLES]}}}


def role_secret(role: str, namespace: str) -> dict[str, Any]:
    """The managed role's password Secret (CloudNativePG wants `username` equal to the role's name)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
            "metadata": {"name": role.replace("_", "-"), "namespace": namespace, "labels": {"cnpg.io/reload": "true"}},
            "stringData": {"username": role, "password": secrets.token_urlsafe(24)}}


def database(role: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Database", "metadata": {"name": role.replace("_", "-"), "namespace": namespace},
            "spec": {"cluster": {"name": CLUSTER}, "name": role, "owner": role, "ensure": "present"}}


def client_pod(name: str, namespace: str, image: str) -> dict[str, Any]:
    """psql (the PostgreSQL image's) with both roles' passwords from their Secrets as its env."""
    def password(role: str) -> dict[str, Any]:
        return {"valueFrom": {"secretKeyRef": {"name": role.replace("_", "-"), "key": "password"}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {
        "restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
        "containers": [{"name": "psql", "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", CLIENT],
                        "env": [{"name": "HOST", "value": f"{CLUSTER}-rw.{namespace}.svc"},
                                {"name": "PW_A", **password("claim_a")}, {"name": "PW_B", **password("claim_b")}],
                        "securityContext": {"runAsUser": 26, "allowPrivilegeEscalation": False}}]}}


def run_client(node: NodeTestBed, name: str, namespace: str, image: str) -> dict[str, str]:
    node.apply(client_pod(name, namespace, image))
    pod = node.wait("v1", "Pod", name, namespace,
                    lambda o: o if (o.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None,
                    timeout=120, what=f"pod {name} finished")
    out = node.logs(name, namespace)
    assert pod["status"]["phase"] == "Succeeded", out
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_a_cluster_of_our_images_serves_each_managed_role_its_own_database(
        node: NodeTestBed, operator: CloudNativePG) -> None:
    namespace = f"cnpg-{uuid.uuid4().hex[:8]}"
    with node.scratch_namespace(namespace):
        for role in ROLES:
            node.apply(role_secret(role, namespace))
        started = time.monotonic()
        node.apply(cluster(operator, namespace))
        ready = node.wait(API, "Cluster", CLUSTER, namespace, cnpg.cluster_ready, timeout=600,
                          what=f"Cluster {namespace}/{CLUSTER} Ready")
        to_ready = time.monotonic() - started
        node.wait(API, "Cluster", CLUSTER, namespace, cnpg.roles_reconciled(*ROLES), timeout=120,
                  what="both managed roles reconciled")
        for role in ROLES:
            node.apply(database(role, namespace))
        for role in ROLES:
            node.wait(API, "Database", role.replace("_", "-"), namespace, cnpg.database_applied, timeout=120,
                      what=f"Database {role} applied")
        primary = ready["status"]["currentPrimary"]
        instance = node.get("v1", "Pod", primary, namespace) or {}
        assert instance["status"]["qosClass"] == "Guaranteed"
        images = {c["name"]: c["image"] for c in instance["spec"]["initContainers"] + instance["spec"]["containers"]}
        assert images == {"bootstrap-controller": operator.operator_image, "postgres": operator.postgres_image}

        before = run_client(node, "psql-default", namespace, operator.postgres_image)
        assert before["a-own"] == "claim_a/claim_a" and before["b-own"] == "claim_b/claim_b", before
        assert before["a-wrong-password"] == "password authentication failed", before
        assert before["shared-buffers"] == "64MB", before
        # CloudNativePG's Database leaves Postgres' default: PUBLIC may CONNECT (and TEMP) to every new database.
        assert before["acl-a"] == "default", before
        assert before["b-on-a"] == "claim_a" and before["a-on-b"] == "claim_b", before
        assert before["b-on-app"] == "app", before  # the bootstrap database too

        # As the superuser over the instance's local socket (peer): what a backend must run per claim database.
        revoke = "; ".join(f"REVOKE CONNECT, TEMPORARY ON DATABASE {role} FROM PUBLIC" for role in ROLES)
        node.kubectl("exec", "-n", namespace, primary, "-c", "postgres", "--", "psql", "-X", "-d", "postgres",
                     "-v", "ON_ERROR_STOP=1", "-c", revoke)
        after = run_client(node, "psql-revoked", namespace, operator.postgres_image)
        assert after["a-own"] == "claim_a/claim_a" and after["b-own"] == "claim_b/claim_b", after
        assert after["b-on-a"] == "permission denied for database", after
        assert after["a-on-b"] == "permission denied for database", after
        assert after["acl-a"] != "default", after

        # The kubelet's summary (cAdvisor on the cgroup), per container: this cgroup v1 host reports no pod total.
        summary = node.http.get(f"/api/v1/nodes/{node.node_name}/proxy/stats/summary").json()
        containers = next(p["containers"] for p in summary["pods"] if p["podRef"]["name"] == primary)
        memory = {c["name"]: c["memory"].get("workingSetBytes", 0) / 2**20 for c in containers}
        assert 0 < memory["postgres"] < 256, memory
        print(f"\ncnpg: Cluster create -> Ready {to_ready:.1f}s; instance container working set "
              f"{memory['postgres']:.0f} MiB (limit 256 MiB); images: "
              + ", ".join(f"{ref} {inspect(ref)['Size'] / 1e6:.0f} MB"
                          for ref in (operator.operator_image, operator.postgres_image)))
