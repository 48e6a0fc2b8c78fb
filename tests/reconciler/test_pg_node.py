"""`needs: pg` on the node tier (issue 31 item 2), the real-tool twin of test_pg_cluster.py: CloudNativePG built here
(tests/testbed/cnpg.py: its operator from the pinned module, Debian's PostgreSQL image) runs the shared Cluster the
operator makes on the first claim; two Applications in two namespaces become Ready with a connection Secret each;
a pod of each, its Secret as its env, creates a table, writes and reads a row through `psql "$url"` (the Cluster's
`-rw` Service by DNS name), while its credentials are refused on the other's database and on guessed ones (the
pg_hba `sameuser` rule), one role holding its connection limit's sessions (a nano need: 5) is refused one more
while the other logs in, and its status and the operator's log hold no password. Then retention and the drop, for
real: one Application deleted without a plan and created again reads its earlier row; the other's need removed
waits for a data-migration plan (the app keeps running), and once a person approves it CloudNativePG drops its
database and role (seen in PostgreSQL as its superuser), while the first app's data stays.

The operator runs in the node's network namespace (operator_proc's `inside`), where a pod would; it never connects to
PostgreSQL, only writes CloudNativePG's resources and reads their status."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.backends.pg_cluster import CONNECTIONS
from lifecycle.service_provider import with_defaults
from tests.images.podman import make_images
from tests.reconciler import node_pods
from tests.reconciler.helpers import API, add_provider, apply, cr, plans
from tests.reconciler.node_pods import finished, loop_result, ready, request_loop, secret_env
from tests.reconciler.operator_proc import FAST, NODE_PLATFORM, ROLL_DRAIN, Fixture, Operator, operator_fixture
from tests.renderer.helpers import run_cli
from tests.testbed import cnpg
from tests.testbed.cnpg import CloudNativePG
from tests.testbed.node import NodeTestBed
from tests.testbed.testapp import build_shop_app

pytestmark = [pytest.mark.node, pytest.mark.testbed]

RUN = uuid.uuid4().hex[:8]
SERVICES = f"pg-svc-{RUN}"  # where the Cluster runs (the provider's spec.config.namespace, the operator's pg namespace)
PROVIDER, CLUSTER = f"pg-node-{RUN}", f"postgres-{RUN}"
SECRET = "demo-pg-conn"
SHOP_PORT = 3000  # the shop's default port
POOL_SIZE = with_defaults("pg", "cloudnative-pg", {})["pooler"]["poolSize"]  # server sessions per claim
# What each client pod does with its Secret (never printing it): create a table, write and read a row in its own
# database through the URL, then log in with its own user and password to the other app's database and to guessed
# ones; only the answer, or the refusal's kind, is printed.
CLIENT = """set -u
q() { psql -X -w "$@" 2>&1 | grep -o -e 'pg_hba.conf rejects connection' -e 'password authentication failed' \
      -e 'does not exist' -e '^[^ ]*$' | head -1; }
as_me() { PGPASSWORD="$PASSWORD" q "host=$HOST port=$PORT user=$USER dbname=$1 connect_timeout=10" -Atc 'select 1'; }
echo "write: $(q "$URL" -Atc "create table if not exists notes (v text); insert into notes values ('$MESSAGE')" \
                 -c "select count(*) from notes")"
echo "read: $(psql -X -w "$URL" -Atc 'select v from notes' 2>&1 | tr ' ' '_')"
echo "whoami: $(q "$URL" -Atc "select current_user || '@' || current_database()")"
echo "other: $(as_me "$OTHER")"
echo "postgres: $(as_me postgres)"
echo "app: $(as_me app)"
echo "template1: $(as_me template1)"
echo "other-wrong: $(PGPASSWORD=guess q "host=$HOST port=$PORT user=$OTHER dbname=$OTHER connect_timeout=10" \
                     -Atc 'select 1')"
echo "sees: $(q "$URL" -Atc "select (select count(*) from pg_database where datname = '$OTHER') || '/' ||
                                    (select count(*) from pg_roles where rolname = '$OTHER')")"
"""
REFUSED = "pg_hba.conf rejects connection"
READER = """echo "read: $(psql -X -w "$URL" -Atc 'select v from notes' 2>&1 | tr ' ' '_')"
"""
# A table made through the connection Secret, and who owns it, who logged in, who the session runs as
OWNER = """echo "made: $(psql -X -w "$URL" -Atc 'create table made_after (v text)' \
  -c "select tableowner || ' ' || session_user || ' ' || current_user from pg_tables where tablename = 'made_after'" \
  2>&1 | tail -1)"
"""
# Through the pooled URL (the Pooler's Service): the row its direct URL wrote, who it is, and its own user and
# password on the other app's database through the pooler (PgBouncer logs it in, PostgreSQL's pg_hba refuses the
# server login, and PgBouncer passes the refusal on). The first login may wait for CloudNativePG's auth function in
# the database (its instance manager makes it once the Pooler exists): tried for 120 s at most.
POOLED_CLIENT = """set -u
q() { psql -X -w "$@" 2>&1 | grep -o -e 'pg_hba.conf rejects connection' -e 'password authentication failed' \
      -e 'server login has been failing' -e '^[^ ]*$' | head -1; }
n=0
until psql -X -w "$POOLED" -Atc 'select 1' >/dev/null 2>&1; do
  n=$((n + 1)); [ "$n" -lt 240 ] || break; sleep 0.5
done
PHOST=${POOLED#*@}; PHOST=${PHOST%%:*}
echo "read: $(psql -X -w "$POOLED" -Atc 'select v from notes' 2>&1 | tr ' ' '_')"
echo "whoami: $(q "$POOLED" -Atc "select current_user || '@' || current_database()")"
echo "via: $PHOST"
echo "other: $(PGPASSWORD="$PASSWORD" q "host=$PHOST port=5432 user=$USER dbname=$OTHER connect_timeout=10" \
               -Atc 'select 1')"
"""
# Run in the primary's postgres container: CLIENTS pooled sessions of the hog's role at once, each a transaction of
# HOLD seconds, through the Pooler; once PostgreSQL lists SHARE of them (bounded), how many it holds, and a login of
# the other claim's role through the same Pooler meanwhile; then whether every client was served (queued, not
# refused).
POOLED_HOG = """set -u
pids=""
for i in $(seq "$CLIENTS"); do
  psql -X -w "host=$PHOST user=$HOG dbname=$HOG" -Atc "select pg_sleep($HOLD)" >/dev/null 2>&1 &
  pids="$pids $!"
done
active() { psql -X -d postgres -Atc "select count(*) from pg_stat_activity where usename = '$HOG'
                                      and query like '%pg_sleep%' and state = 'active'"; }
n=0
until [ "$(active)" -ge "$SHARE" ]; do
  n=$((n + 1)); [ "$n" -lt 1200 ] || { echo "held: not $SHARE sessions"; exit 1; }; sleep 0.1
done
echo "server sessions of the hog: $(active)"
echo "victim: $(PGPASSWORD="$VICTIM_PASSWORD" psql -X -w "host=$PHOST user=$VICTIM dbname=$VICTIM" \
                 -Atc "select 'in'" 2>&1), the hog holding $(active)"
served=0
for p in $pids; do wait "$p" && served=$((served + 1)); done
echo "served: $served of $CLIENTS"
"""
# Run in the primary's postgres container: hold LIMIT sessions as the hog's role (its password in PGPASSWORD), wait
# until PostgreSQL lists them (bounded), try one more, and log in as the victim meanwhile; then end the hog's sessions.
HOG = """set -u
for i in $(seq "$LIMIT"); do
  psql -X -w "host=127.0.0.1 user=$HOG dbname=$HOG" -Atc 'select pg_sleep(300)' >/dev/null 2>&1 &
done
n=0
until [ "$(psql -X -d postgres -Atc "select count(*) from pg_stat_activity where usename = '$HOG'")" -ge "$LIMIT" ]; do
  n=$((n + 1)); [ "$n" -lt 1200 ] || { echo "held: not $LIMIT sessions"; exit 1; }; sleep 0.1
done
echo "one more: $(psql -X -w "host=127.0.0.1 user=$HOG dbname=$HOG" -Atc 'select 1' 2>&1 \
                  | grep -o 'too many connections for role' | head -1)"
echo "victim: $(PGPASSWORD="$VICTIM_PASSWORD" psql -X -w "host=127.0.0.1 user=$VICTIM dbname=$VICTIM" \
                 -Atc "select count(*) || ' sessions of the other: ' || coalesce(max(query), 'none')
                       from pg_stat_activity where usename = '$HOG'" 2>&1)"
psql -X -d postgres -Atc "select count(pg_terminate_backend(pid)) from pg_stat_activity where usename = '$HOG'" \
  >/dev/null
"""


@pytest.fixture(scope="module")
def cloudnative_pg(node: NodeTestBed) -> Iterator[CloudNativePG]:
    """CloudNativePG's operator and the PostgreSQL image `make images` builds, in the node (before our operator
    starts: it watches Clusters and Databases)."""
    images = make_images(names=("cnpg", "postgresql", "pgbouncer"))
    operator_image, postgres_image, pgbouncer_image = (node.import_image(images[name].ref)
                                                       for name in ("cnpg", "postgresql", "pgbouncer"))
    installed = cnpg.install(node, operator_image, postgres_image, pgbouncer_image)
    yield installed
    cnpg.uninstall(node)


@pytest.fixture(scope="module")
def pg_image(cloudnative_pg: CloudNativePG) -> str:
    return cloudnative_pg.postgres_image


@pytest.fixture(scope="module")
def pg_image_flag(pg_image: str) -> str:
    return f"cloudnative-pg={pg_image}"


@pytest.fixture(scope="module")
def pgbouncer_image_flag(cloudnative_pg: CloudNativePG) -> str:
    return f"cloudnative-pg.pgbouncer={cloudnative_pg.pgbouncer_image}"


@pytest.fixture(scope="module")
def shop_image(node: NodeTestBed) -> str:
    """The shop (tests/testbed/shopapp/): its /fresh opens a new connection to its database per request."""
    return node.import_image(build_shop_app())


def platform_file(node: NodeTestBed, tmp_path_factory: pytest.TempPathFactory, services: str,
                  drain: str = NODE_PLATFORM) -> str:
    """An operator's platform file naming `services` as the pg services namespace (made, as the stack makes it);
    `drain`: its gateway section (the exposed pods' pause before SIGTERM)."""
    node.ensure_namespace(services)
    path = Path(tmp_path_factory.mktemp("platform")) / "platform.yaml"
    path.write_text(f"providerNamespaces: {{pg: {services}}}\n{drain}")
    return str(path)


@pytest.fixture(scope="module")
def pg_platform(node: NodeTestBed, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The operator's platform file: this module's pg services namespace; the apps' pods drain (ROLL_DRAIN)."""
    return platform_file(node, tmp_path_factory, SERVICES, ROLL_DRAIN)


operator = operator_fixture("--no-leader-elect", "--no-platform-stack", *FAST, "--platform", Fixture("pg_platform"),
                            "--backend-image", Fixture("pg_image_flag"), "--backend-image",
                            Fixture("pgbouncer_image_flag"), bed="node", crds=True, inside=True,
                            name="pg-node",
                            requires=("cloudnative_pg",))


@pytest.fixture(scope="module")
def provider(node: NodeTestBed, operator: Operator, cloudnative_pg: CloudNativePG) -> Iterator[None]:
    """An administrator's cloudnative-pg provider: one small instance on the node's host-path volumes."""
    add_provider(node, PROVIDER, "pg", "cloudnative-pg", {
                    "cluster": CLUSTER, "namespace": SERVICES, "instances": 1,
                    "storage": {"size": "1Gi", "storageClassName": cloudnative_pg.storage_class},
                    "resources": {"cpu": "250m", "memory": "256Mi"}, "sharedBuffersPercent": 25}, labels={"bed": RUN})
    yield
    node.delete(API, "ServiceProvider", PROVIDER)
    node.delete("v1", "Namespace", SERVICES)  # the Cluster goes with it (not waited for: nothing uses it)


def app(image: str, pg: bool = True, size: str | None = None) -> dict[str, Any]:
    """The test app with a pg need on this module's provider (of `size`), its URL in the env (or without either)."""
    need: dict[str, Any] = {"selector": {"bed": RUN}, **({"size": size} if size else {})}
    return {"image": image, "replicas": 1, "expose": {"port": 8080}, "env": {"MODE": "serve"}} if not pg else {
        "image": image, "replicas": 1, "expose": {"port": 8080}, "needs": {"pg": need},
        "env": {"MODE": "serve", "DATABASE_URL": {"claim": "pg/url"}}}


def shop(image: str) -> dict[str, Any]:
    """The shop with a pg need on this module's provider: ready once its database answers (SHOP_PORT)."""
    return {"image": image, "replicas": 1, "expose": {"port": SHOP_PORT},
            "health": {"readiness": {"path": "/healthz", "periodSeconds": 1, "failureThreshold": 1}},
            "needs": {"pg": {"selector": {"bed": RUN}}}, "env": {"DATABASE_URL": {"claim": "pg/url"}}}


def client_pod(namespace: str, image: str, other_db: str, name: str = "psql-client",
               script: str = CLIENT) -> dict[str, Any]:
    """A pod running psql (the PostgreSQL image's) with the app's connection Secret as its env."""
    env = secret_env(SECRET, [(key.upper(), key) for key in ("url", "host", "port", "user", "password")])
    env += [{"name": "OTHER", "value": other_db}, {"name": "MESSAGE", "value": f"from-{namespace}"}]
    return node_pods.client_pod(name, namespace, image, script, env, 26)


def read(node: NodeTestBed, namespace: str, image: str, name: str, script: str = READER) -> str:
    """What a psql pod with the app's connection Secret reads from its table (or what `script` prints)."""
    node.apply(client_pod(namespace, image, "", name, script), field_manager="test")
    pod = node.wait("v1", "Pod", name, namespace, finished, timeout=120, what=f"pod {namespace}/{name} to finish")
    log = node.logs(name, namespace)
    assert pod["status"]["phase"] == "Succeeded", log
    return log.strip()


def in_postgres(node: NodeTestBed, primary: str, column: str, catalog: str) -> list[str]:
    """A catalog's names, read as the superuser over the instance's local socket (peer authentication)."""
    return node.kubectl("exec", "-n", SERVICES, primary, "-c", "postgres", "--", "psql", "-X", "-d", "postgres",
                        "-Atc", f"select {column} from {catalog}").stdout.split()


def hog_connections(node: NodeTestBed, primary: str, hog: dict[str, str], victim: dict[str, str],
                    limit: int) -> list[str]:
    """What HOG says: one role holding its connection limit's sessions on the shared Cluster, then one more."""
    env = [f"LIMIT={limit}", f"HOG={hog['user']}", f"PGPASSWORD={hog['password']}", f"VICTIM={victim['user']}",
           f"VICTIM_PASSWORD={victim['password']}"]
    return node.kubectl("exec", "-n", SERVICES, primary, "-c", "postgres", "--", "env", *env, "sh", "-c",
                        HOG).stdout.splitlines()


def pooled_client(node: NodeTestBed, namespace: str, image: str, other_db: str) -> None:
    """A psql pod with the app's connection Secret running POOLED_CLIENT, through its pooled URL."""
    env = secret_env(SECRET, [("POOLED", "pooledUrl"), ("USER", "user"), ("PASSWORD", "password")])
    env += [{"name": "OTHER", "value": other_db}]
    node.apply(node_pods.client_pod("psql-pooled", namespace, image, POOLED_CLIENT, env, 26), field_manager="test")


def pooled_said(node: NodeTestBed, namespace: str) -> list[str]:
    """What a pooled_client pod said, once it finished."""
    pod = node.wait("v1", "Pod", "psql-pooled", namespace, finished, timeout=240,
                    what=f"pod {namespace}/psql-pooled to finish")
    log = node.logs("psql-pooled", namespace)
    assert pod["status"]["phase"] == "Succeeded", log
    return log.splitlines()


def pooled_hog(node: NodeTestBed, primary: str, hog: dict[str, str], victim: dict[str, str], clients: int,
               share: int) -> list[str]:
    """What POOLED_HOG says: one claim's clients beyond its share of the Pooler, the other claim logging in."""
    env = [f"CLIENTS={clients}", f"SHARE={share}", "HOLD=4", f"PHOST={CLUSTER}-pooler.{SERVICES}.svc",
           f"HOG={hog['user']}", f"PGPASSWORD={hog['password']}", f"VICTIM={victim['user']}",
           f"VICTIM_PASSWORD={victim['password']}"]
    return node.kubectl("exec", "-n", SERVICES, primary, "-c", "postgres", "--", "env", *env, "sh", "-c",
                        POOLED_HOG).stdout.splitlines()


def log_in(node: NodeTestBed, primary: str, fields: dict[str, str]) -> str:
    """A TCP login as a claim's role with its password (in the primary's postgres container, over 127.0.0.1: the
    pg_hba's password rules apply; the password on stdin, never in an argv): `in`, or why PostgreSQL refused it."""
    script = ('read -r PGPASSWORD; export PGPASSWORD; psql -X -w "host=127.0.0.1 user=$0 dbname=$1" -Atc '
              "\"select 'in'\" 2>&1 | grep -o -e '^in$' -e 'password authentication failed' | head -1")
    return node.kubectl("exec", "-i", "-n", SERVICES, primary, "-c", "postgres", "--", "sh", "-c", script,
                        fields["user"], fields["db"], input=fields["password"] + "\n").stdout.strip()


def test_each_apps_pod_reaches_its_own_database_on_the_shared_cluster_and_no_other(
        node: NodeTestBed, test_app: str, shop_image: str, cloudnative_pg: CloudNativePG, operator: Operator,
        provider: None) -> None:
    started = time.monotonic()
    namespaces = [f"pg-node-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        for namespace, size in zip(namespaces, ("nano", None), strict=True):  # nano: a connection limit of 5
            node.ensure_namespace(namespace)
            # the second: the shop (its /fresh opens a new connection per request: the rotation's loop below)
            apply(node, cr(namespace, app(test_app, size=size) if size else shop(shop_image)))
        node.wait(cnpg.API, "Cluster", CLUSTER, SERVICES, cnpg.cluster_ready, timeout=600,
                  what=f"Cluster {SERVICES}/{CLUSTER} Ready")
        cluster_ready = time.monotonic() - started
        for namespace in namespaces:
            node.wait(API, "Application", "demo", namespace, ready, timeout=300,
                      what=f"Application {namespace}/demo Ready")
        to_ready = time.monotonic() - started
        claims = [(node.get(API, "ResourceClaim", "demo-pg", n) or {}).get("status") or {} for n in namespaces]
        fields = []
        host = f"{CLUSTER}-rw.{SERVICES}.svc"
        for namespace, claim in zip(namespaces, claims, strict=True):
            role = f"{namespace}.demo-pg"
            assert claim["ready"] is True and claim["provider"] == PROVIDER
            assert claim["connection"] == {"host": host, "port": 5432, "user": role, "db": role,
                                           "secretName": SECRET}
            secret = node.get("v1", "Secret", SECRET, namespace) or {}
            fields.append({k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()})
        # one Cluster, made by the operator, Guaranteed, serving both
        clusters = node.http.get(f"/apis/{cnpg.API}/namespaces/{SERVICES}/clusters").json()["items"]
        assert [c["metadata"]["name"] for c in clusters] == [CLUSTER]
        primary = node.get("v1", "Pod", clusters[0]["status"]["currentPrimary"], SERVICES) or {}
        assert primary["status"]["qosClass"] == "Guaranteed"

        first, second = namespaces
        for namespace, other in ((first, fields[1]), (second, fields[0])):
            node.apply(client_pod(namespace, cloudnative_pg.postgres_image, other["db"]), field_manager="test")
        for namespace, own, other in ((first, fields[0], fields[1]), (second, fields[1], fields[0])):
            pod = node.wait("v1", "Pod", "psql-client", namespace, finished, timeout=120,
                            what=f"pod {namespace}/psql-client to finish")
            log = node.logs("psql-client", namespace)
            assert pod["status"]["phase"] == "Succeeded", log
            assert log.splitlines() == [
                "write: 1", f"read: from-{namespace}", f"whoami: {own['user']}@{own['db']}",
                f"other: {REFUSED}", f"postgres: {REFUSED}", f"app: {REFUSED}", f"template1: {REFUSED}",
                "other-wrong: password authentication failed",
                "sees: 1/1"], log  # the other's database and role names are visible (docs/threat-model.md)
            assert own["db"] != other["db"]

        # one role cannot take the shared Cluster's connections (its need's size, nano: 5, as CloudNativePG set
        # its CONNECTION LIMIT), and the other app's role logs in meanwhile
        assert hog_connections(node, primary["metadata"]["name"], fields[0], fields[1], CONNECTIONS["nano"]) == [
            "one more: too many connections for role",
            f"victim: {CONNECTIONS['nano']} sessions of the other: <insufficient privilege>"]
        # the pooled URL (issue 42 item 5): the Cluster's Pooler runs our PgBouncer image; each app's pod reads its
        # row through it as its own role, and is refused the other's database there too
        pooler, pooling = f"{CLUSTER}-pooler", time.monotonic()
        node.wait_condition("apps/v1", "Deployment", pooler, SERVICES, "Available", timeout=300)
        pooler_up = time.monotonic() - started
        for namespace, other in ((first, fields[1]), (second, fields[0])):  # both at once
            pooled_client(node, namespace, cloudnative_pg.postgres_image, other["db"])
        for namespace, own in ((first, fields[0]), (second, fields[1])):
            assert pooled_said(node, namespace) == [
                f"read: from-{namespace}", f"whoami: {own['user']}@{own['db']}", f"via: {pooler}.{SERVICES}.svc",
                f"other: {REFUSED}"]
        pooled_read = time.monotonic() - started
        # one claim's clients beyond its share of the Pooler wait in line (every one served, never more than its
        # share of server sessions at once) while the other claim logs in through the same Pooler
        share = POOL_SIZE
        assert pooled_hog(node, primary["metadata"]["name"], fields[0], fields[1], share + 3, share) == [
            f"server sessions of the hog: {share}", f"victim: in, the hog holding {share}",
            f"served: {share + 3} of {share + 3}"]
        # the pod's cost: its processes' resident memory (CloudNativePG's instance manager and PgBouncer)
        held = node.kubectl("exec", "-n", SERVICES, f"deploy/{pooler}", "-c", "pgbouncer", "--", "sh", "-c",
                            "cat /proc/[0-9]*/status | awk '/^VmRSS/ {s += $2} END {print s}'").stdout.strip()
        print(f"pg pooler: Deployment available {pooler_up:.1f} s after the first apply; both pods read through it "
              f"{pooled_read:.1f} s; {share + 3} clients of one claim queued on its {share} server sessions "
              f"{time.monotonic() - started - pooled_read:.1f} s; the pooler steps {time.monotonic() - pooling:.1f} s "
              f"in all; the pooler container holds {int(held) / 1024:.1f} MiB resident")

        # nothing secret in what the operator says: the claims' status, its log
        said = json.dumps(claims) + operator.log()
        for password in (f["password"] for f in fields):
            assert password not in said
        print(f"\npg: first claim -> shared Cluster Ready {cluster_ready:.1f} s; two apps Ready {to_ready:.1f} s; "
              f"both pods done {time.monotonic() - started:.1f} s")

        # retention: the second Application deleted without a plan (its claim goes, the data stays), created again
        node.delete(API, "Application", "demo", second)
        node.wait_gone(API, "ResourceClaim", "demo-pg", second, timeout=120)
        node.wait_gone(API, "Application", "demo", second, timeout=120)
        assert fields[1]["user"] in in_postgres(node, primary["metadata"]["name"], "rolname", "pg_roles")
        again = time.monotonic()
        apply(node, cr(second, shop(shop_image)))
        node.wait(API, "Application", "demo", second, ready, timeout=300, what=f"Application {second}/demo Ready again")
        again = time.monotonic() - again
        assert read(node, second, cloudnative_pg.postgres_image, "psql-reader") == f"read: from-{second}"

        # rotation (issue 42 item 2): `apprafter db rotate` waits until CloudNativePG applied the new password, the
        # app's pods rolled onto it and the rotation completed; the new password reads the row, the old one is refused.
        # Throughout, a bounded loop asks the shop for a NEW database connection every 50 ms: none failed (an old pod
        # logging in with the old password after it was refused would fail one)
        old_pods = {p["metadata"]["name"] for p in node.http.get(f"/api/v1/namespaces/{second}/pods").json()["items"]
                    if p["metadata"]["name"].startswith("demo-")}
        looping = time.monotonic()
        request_loop(node, second, shop_image, f"http://demo.{second}.svc:{SHOP_PORT}/fresh")
        rotating = time.monotonic()
        rotated = run_cli("db", "rotate", "demo", "-e", "prod", "--need", "pg", "-n", second, "--kubeconfig",
                          str(node.kubeconfig), "--timeout", "300")
        assert rotated.returncode == 0, rotated.stderr
        rotating = time.monotonic() - rotating
        looped = loop_result(node, second)
        assert looped[-1].startswith("sent ") and looped[-1].endswith(", failed 0"), looped
        assert int(looped[-1].split()[1].rstrip(",")) >= 10, looped  # it ran throughout
        now_pods = {p["metadata"]["name"] for p in node.http.get(f"/api/v1/namespaces/{second}/pods").json()["items"]
                    if p["metadata"]["name"].startswith("demo-")}
        assert old_pods and not old_pods & now_pods, (old_pods, now_pods)  # the pods rolled
        assert "the old password is refused" in rotated.stdout
        secret = node.get("v1", "Secret", SECRET, second) or {}
        new = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        # the claim's alternate login role (lifecycle.backends.pg_roles), the same database
        assert new["password"] != fields[1]["password"] and new["user"] == f"{fields[1]['user']}~b"
        assert new["db"] == fields[1]["db"]
        assert read(node, second, cloudnative_pg.postgres_image, "psql-reader-rotated") == f"read: from-{second}"
        # what it makes is the claim's role's (its sessions run as it), so the next rotation's switch back reaches it
        assert read(node, second, cloudnative_pg.postgres_image, "psql-owner", OWNER) == \
            f"made: {fields[1]['user']} {new['user']} {fields[1]['user']}"
        primary_name = primary["metadata"]["name"]
        assert log_in(node, primary_name, new) == "in"
        assert log_in(node, primary_name, fields[1]) == "password authentication failed"
        # the pooler serves the alternate too (CloudNativePG's auth_query finds any role; pg_hba `samerole` lets it
        # reach the claim's database), its sessions running as the claim's role; the other's database refused
        node.delete("v1", "Pod", "psql-pooled", second)
        node.wait_gone("v1", "Pod", "psql-pooled", second, timeout=60)
        pooled_client(node, second, cloudnative_pg.postgres_image, fields[0]["db"])
        assert pooled_said(node, second) == [
            f"read: from-{second}", f"whoami: {fields[1]['user']}@{fields[1]['db']}", f"via: {pooler}.{SERVICES}.svc",
            f"other: {REFUSED}"]
        deployment = node.get("apps/v1", "Deployment", "demo", second) or {}
        assert deployment["spec"]["template"]["metadata"]["annotations"]["rotation.apprafter.io/pg"]
        node.wait(API, "Application", "demo", second, ready, timeout=120, what=f"Application {second}/demo Ready")
        assert new["password"] not in operator.log() and new["password"] not in rotated.stdout + rotated.stderr
        looping = time.monotonic() - looping

        # the first app's need removed: held for a data-migration plan, the app running on meanwhile
        apply(node, cr(first, app(test_app, pg=False)))
        node.wait(API, "Application", "demo", first,
                  lambda o: o if (o.get("status") or {}).get("phase") == "AwaitingMigrationApproval" else None,
                  timeout=60, what="the change held")
        assert (node.get("apps/v1", "Deployment", "demo", first) or {})["status"].get("availableReplicas") == 1
        assert fields[0]["db"] in in_postgres(node, primary["metadata"]["name"], "datname", "pg_database")
        [plan] = plans(node, first)
        assert any(c["rule"] == "AR-DM001" and c["field"] == "needs.pg" for c in plan["spec"]["changes"])
        approved = time.monotonic()  # approved by a person, with the CLI (its own start counted in)
        result = run_cli("migration", "approve", plan["metadata"]["name"], "-n", first, "--kubeconfig",
                         str(node.kubeconfig))
        assert result.returncode == 0, result.stderr
        node.wait_gone(API, "ResourceClaim", "demo-pg", first, timeout=300)
        dropped = time.monotonic() - approved
        # in PostgreSQL, as the instance's superuser over its local socket: the database and the role are gone
        databases = in_postgres(node, primary["metadata"]["name"], "datname", "pg_database")
        roles = in_postgres(node, primary["metadata"]["name"], "rolname", "pg_roles")
        assert fields[0]["db"] not in databases and fields[0]["user"] not in roles, (databases, roles)
        assert fields[1]["db"] in databases and fields[1]["user"] in roles, (databases, roles)
        assert node.get(cnpg.API, "Database", fields[0]["db"], SERVICES) is None
        assert node.get("v1", "Secret", fields[0]["user"], SERVICES) is None
        managed = (node.get(cnpg.API, "Cluster", CLUSTER, SERVICES) or {})["spec"]["managed"]["roles"]
        assert [r["name"] for r in managed] == [fields[1]["user"], new["user"]], managed  # the other's two roles
        # the other app's data intact
        assert read(node, second, cloudnative_pg.postgres_image, "psql-reader-2") == f"read: from-{second}"
        print(f"pg: re-created app Ready {again:.1f} s (its row read back); `db rotate` run -> new password "
              f"applied, pods rolled, rotation completed {rotating:.1f} s under the request loop ({looped[-1]}; the "
              f"rotation step {looping:.1f} s); `migration approve` run -> database and "
              f"role dropped, claim gone {dropped:.1f} s")

        # the instance's pod killed (grace 0, as a crash: its own grace is CloudNativePG's smart shutdown, which
        # waits up to 180 s for the apps' pooled connections to end): CloudNativePG makes it again on its volume,
        # PostgreSQL recovers from its WAL, and the app's same Secret reads its row
        restarting = time.monotonic()
        node.delete("v1", "Pod", primary_name, SERVICES, grace_seconds=0)
        node.wait("v1", "Pod", primary_name, SERVICES, lambda p: p if p["metadata"]["uid"] != primary["metadata"][
            "uid"] and any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get(
                "conditions") or []) else None, timeout=300, what="the instance's pod made again and Ready")
        node.wait(cnpg.API, "Cluster", CLUSTER, SERVICES, cnpg.cluster_ready, timeout=120, what="the Cluster Ready")
        back = time.monotonic() - restarting
        assert read(node, second, cloudnative_pg.postgres_image, "psql-reader-3") == f"read: from-{second}"
        print(f"pg: the instance's pod killed -> made again and the Cluster Ready {back:.1f} s; its row read "
              f"{time.monotonic() - restarting:.1f} s")
    finally:
        node.delete_namespaces(namespaces)  # while its operator runs: the claims' finalizers are its to take off
