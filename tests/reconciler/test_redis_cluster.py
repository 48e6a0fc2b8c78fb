"""`needs: redis` through the API server and the real redis-server (reconciler/claims.py, reconciler/redis_claims.py,
lifecycle/redis_backend.py): an Application's claim, bound to a redis-server ServiceProvider, becomes ready with its
connection Secret; each app's credentials reach its own keys and nobody else's; the keys outlive the claim and a
re-created claim gets them back; an integrated provider's instance is made on its first claim, once.

The operator runs on the host, where no ClusterIP answers: the working Redis is a provider naming an existing one
(`spec.config.address`, an administrator's "bring your own Redis"), the test's redis-server on 127.0.0.1; the
integrated provider's instance is checked as written (its pod serves apps on the node tier: test_redis_node.py)."""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError

from compatibility.authority import ROTATE_ANNOTATION
from lifecycle.retention import DROP_ANNOTATION, FINALIZER
from tests.reconciler.helpers import (
    API,
    add_provider,
    apply,
    collect_garbage,
    condition,
    cr,
    edit,
    events,
    fresh_namespace,
    plan_phase,
    plans,
    status,
    template_pod,
    wait,
    wait_phase,
    wait_showing,
)
from tests.reconciler.operator_proc import FAST, Fixture, Operator, operator_fixture
from tests.renderer.helpers import APPRAFTER, run_cli
from tests.testbed.kube import KubeTestBed
from tests.testbed.redis import RedisServer, start_redis

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
ADMIN = secrets.token_urlsafe(24)  # the bring-your-own Redis' admin password, as its administrator set it
SERVICES = f"redis-svc-{RUN}"  # this module's redis services namespace (the operator's providerNamespaces.redis)
OWN, SHARED = f"redis-own-{RUN}", f"redis-shared-{RUN}"
IMAGE = "localhost/redis:test"
FIELDS = {"url", "host", "port", "user", "password", "prefix"}


def needs(kind: str) -> dict[str, Any]:
    """The test app with a redis need selecting one of this module's providers, its URL in the env."""
    return edit(needs={"redis": {"selector": {"bed": RUN, "redis": kind}}}, env={"REDIS_URL": {"claim": "redis/url"}},
                expose={"port": 8080})


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(Path(tmp_path_factory.mktemp("redis")), password=ADMIN)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_platform(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The operator's platform file: this module's services namespace for redis (made, as the stack makes it)."""
    bed.ensure_namespace(SERVICES)
    path = Path(tmp_path_factory.mktemp("platform")) / "platform.yaml"
    path.write_text(f"providerNamespaces: {{redis: {SERVICES}}}\n")
    return str(path)


@pytest.fixture(scope="module")
def providers(bed: KubeTestBed, redis_server: RedisServer) -> Iterator[None]:
    """An administrator's two redis-server providers: one naming the test's Redis (with its admin Secret), one
    integrated (its instance the operator makes)."""
    bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{OWN}-admin", "namespace": SERVICES},
               "stringData": {"password": ADMIN}}, field_manager="admin")
    for name, kind, config in ((OWN, "own", {"address": redis_server.address}),
                               (SHARED, "shared", {"server": SHARED, "resources": {"memory": "128Mi", "cpu": "100m"},
                                                         "maxmemoryPercent": 75})):
        add_provider(bed, name, "redis", "redis-server", config, labels={"bed": RUN, "redis": kind})
    yield
    for name in (OWN, SHARED):
        bed.delete(API, "ServiceProvider", name)


operator = operator_fixture("--no-leader-elect", *FAST, "--platform", Fixture("redis_platform"),
                            "--backend-image", f"redis-server={IMAGE}")


def claim_status(bed: KubeTestBed, namespace: str) -> dict[str, Any]:
    return (bed.get(API, "ResourceClaim", "demo-redis", namespace) or {}).get("status") or {}


def ready_claim(bed: KubeTestBed, namespace: str, timeout: float = 60) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        st = claim_status(bed, namespace)
        return st if st.get("ready") is True else None
    return wait_showing(f"{namespace}/demo-redis ready", probe, timeout, lambda: claim_status(bed, namespace),
                        "claim status now")


def connection(bed: KubeTestBed, namespace: str) -> dict[str, str]:
    secret = bed.get("v1", "Secret", "demo-redis-conn", namespace)
    assert secret is not None, f"no Secret {namespace}/demo-redis-conn"
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def client(fields: dict[str, str]) -> redis.Redis:
    return redis.Redis.from_url(fields["url"], decode_responses=True)


def test_each_apps_redis_works_with_its_secret_and_reaches_no_other_apps_keys(
        bed: KubeTestBed, operator: Operator, providers: None, redis_server: RedisServer) -> None:
    first, second = fresh_namespace(bed, "redis"), fresh_namespace(bed, "redis")
    started = time.monotonic()
    for namespace in (first, second):
        apply(bed, cr(namespace, needs("own")))
    st = ready_claim(bed, first)
    took = time.monotonic() - started
    ready_claim(bed, second)
    assert st["provider"] == OWN and (condition(st, "Ready") or {})["reason"] == "Provisioned"
    assert st["connection"] == {"host": "127.0.0.1", "port": redis_server.port, "user": f"{first}.demo-redis",
                                "prefix": f"{first}.demo-redis:", "secretName": "demo-redis-conn"}
    a, b = connection(bed, first), connection(bed, second)
    assert set(a) == FIELDS and (a["user"], a["prefix"], a["port"]) == (f"{first}.demo-redis",
                                                                         f"{first}.demo-redis:", str(redis_server.port))
    wait(f"{first}/demo ClaimsReady", lambda: (condition(status(bed, first), "ClaimsReady") or {}).get("status")
         == "True" or None, 60)

    as_a, as_b = client(a), client(b)
    as_a.set(f"{a['prefix']}cart", "a's")
    as_b.set(f"{b['prefix']}cart", "b's")
    assert as_a.get(f"{a['prefix']}cart") == "a's" and as_b.get(f"{b['prefix']}cart") == "b's"
    guessed = f"{second}.demo-redis:cart"  # b's key, its prefix guessed from its namespace
    for denied in (lambda: as_a.get(guessed), lambda: as_a.set(guessed, "x"), lambda: as_a.delete(guessed),
                   lambda: as_a.keys("*"), lambda: as_a.flushall(), lambda: as_a.config_get("*"),
                   lambda: as_a.acl_list(), lambda: as_a.scan(0)):
        with pytest.raises(NoPermissionError):
            denied()
    assert as_b.get(guessed) == "b's"

    # nothing secret in what the operator says: the claim status, its log
    said = json.dumps([claim_status(bed, first), claim_status(bed, second)]) + operator.log()
    for password in (ADMIN, a["password"], b["password"]):
        assert password not in said
    print(f"claim -> ready with a bring-your-own Redis: {took:.2f} s")


def test_the_keys_outlive_the_claim_and_the_same_app_and_need_get_them_back(
        bed: KubeTestBed, operator: Operator, providers: None, redis_server: RedisServer) -> None:
    namespace = fresh_namespace(bed, "redis")
    apply(bed, cr(namespace, needs("own")))
    ready_claim(bed, namespace)
    before = connection(bed, namespace)
    client(before).set(f"{before['prefix']}order", "42")
    old = bed.get(API, "ResourceClaim", "demo-redis", namespace) or {}
    assert FINALIZER in old["metadata"]["finalizers"]  # its deletion waits for the backend, which keeps the data
    # the claim goes (and its Secret with it, as the garbage collector does on a cluster: the bare API server runs
    # none); its user and keys stay in Redis. The Application is still there, so its claim comes back.
    bed.delete(API, "ResourceClaim", "demo-redis", namespace)
    wait("the claim made anew", lambda: (bed.get(API, "ResourceClaim", "demo-redis", namespace) or {}).get(
        "metadata", {}).get("uid") not in (None, old["metadata"]["uid"]) or None, 60)
    collect_garbage(bed, "Secret", "demo-redis-conn", namespace, old["metadata"]["uid"])
    ready_claim(bed, namespace)
    after = connection(bed, namespace)
    assert (after["user"], after["prefix"]) == (before["user"], before["prefix"])
    assert after["password"] != before["password"]  # a new Secret, a new password: the old one no longer logs in
    assert client(after).get(f"{after['prefix']}order") == "42"
    with pytest.raises(redis.AuthenticationError):
        client(before).ping()
    said = "no approved data-migration plan removes needs.redis"
    wait("the DataRetained event",
         lambda: any(said in e.get("note", "") for e in events(bed, namespace, "DataRetained")) or None, 30)


def admin(server: RedisServer) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=server.port, password=ADMIN, decode_responses=True)


def test_removing_the_need_waits_for_a_plan_and_approving_it_drops_the_user_and_its_keys(
        bed: KubeTestBed, operator: Operator, providers: None, redis_server: RedisServer, tmp_path: Path) -> None:
    namespace, other = fresh_namespace(bed, "redis"), fresh_namespace(bed, "redis")
    for where in (namespace, other):
        apply(bed, cr(where, needs("own")))
        ready_claim(bed, where)
    mine, theirs = connection(bed, namespace), connection(bed, other)
    for fields in (mine, theirs):
        with client(fields) as c:
            c.set(f"{fields['prefix']}a", "1")
            c.set(f"{fields['prefix']}b", "2")
    wait_phase(bed, namespace, "Ready", timeout=60)

    # A pod of the running release, started with the need's connection Secret (the bare API server runs no
    # kubelet: the object is what the operator reads), made before the change. While it lives, the approved
    # removal keeps the claim and the backend its user: the old pods answer with their backend until the rollout
    # and the Gateway's drain end them.
    deployment = bed.get("apps/v1", "Deployment", "demo", namespace) or {}
    template = deployment["spec"]["template"]
    assert any(e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "demo-redis-conn"
               for e in template["spec"]["containers"][0].get("env", []))
    old_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "demo-old", "namespace": namespace,
                                                               "labels": template["metadata"]["labels"]},
               "spec": {"containers": template["spec"]["containers"]}}
    bed.apply(old_pod, field_manager="kube-controller-manager")

    apply(bed, cr(namespace, edit(needs("own"), needs=None, env={"LOG_LEVEL": "info"})))
    st = wait_phase(bed, namespace, "AwaitingMigrationApproval", timeout=60)
    [plan] = plans(bed, namespace)
    assert {"rule": "AR-DM001", "field": "needs.redis"}.items() <= next(
        c for c in plan["spec"]["changes"] if c["rule"] == "AR-DM001").items()
    assert st["migrationPlan"] == plan["metadata"]["name"]
    assert admin(redis_server).acl_getuser(mine["user"]) is not None  # held: nothing dropped while it waits

    name = plan["metadata"]["name"]
    approved = time.monotonic()  # the CLI's own start (a python process) counted in
    result = run_cli("migration", "approve", name, "-n", namespace, "--kubeconfig", str(bed.kubeconfig))
    assert result.returncode == 0, result.stderr
    wait("plan applied", lambda: plan_phase(bed, namespace, name) == "applied" or None, 60)
    held = bed.get(API, "ResourceClaim", "demo-redis", namespace)
    assert held is not None and DROP_ANNOTATION in held["metadata"]["annotations"]  # marked, kept for the pod:
    assert "deletionTimestamp" not in held["metadata"]  # not being deleted either
    assert admin(redis_server).acl_getuser(mine["user"]) is not None
    with client(mine) as c:
        assert c.get(f"{mine['prefix']}a") == "1"  # the old pod's backend still answers it
    bed.delete("v1", "Pod", "demo-old", namespace)  # the last old pod gone: the claim goes, its data is dropped
    wait("the claim gone", lambda: bed.get(API, "ResourceClaim", "demo-redis", namespace) is None or None, 60)
    print(f"`migration approve` run -> claim gone, its user and keys dropped: {time.monotonic() - approved:.2f} s")
    with admin(redis_server) as server:
        assert server.acl_getuser(mine["user"]) is None
        assert server.exists(f"{mine['prefix']}a", f"{mine['prefix']}b") == 0
        # the other app's user and keys are untouched
        assert server.acl_getuser(theirs["user"]) is not None
        assert server.exists(f"{theirs['prefix']}a", f"{theirs['prefix']}b") == 2
    with pytest.raises(redis.AuthenticationError):
        client(mine).ping()
    [dropped] = wait("the DataDropped event", lambda: events(bed, namespace, "DataDropped") or None, 30)
    assert name in dropped["note"] and "needs.redis" in dropped["note"]
    assert ADMIN not in operator.log() and mine["password"] not in operator.log()


def test_an_integrated_provider_gets_one_guaranteed_instance_on_its_first_claim(
        bed: KubeTestBed, operator: Operator, providers: None) -> None:
    assert bed.get("apps/v1", "Deployment", SHARED, SERVICES) is None  # lazy: nothing before a claim
    namespaces = [fresh_namespace(bed, "redis") for _ in range(2)]
    for namespace in namespaces:
        apply(bed, cr(namespace, needs("shared")))

    def says(namespace: str) -> dict[str, Any] | None:
        ready = condition(claim_status(bed, namespace), "Ready") or {}
        return ready if "has no ready endpoint yet" in str(ready.get("message")) else None
    # the stand-in Deployment controller marks it available at once, but no EndpointSlice controller runs on the
    # API-server tier: the Service has no ready endpoint, so the operator does not dial it (nothing would answer;
    # tests/reconciler/test_redis_node.py has the pods that do) and the claim says what it waits for
    for namespace in namespaces:
        ready = wait(f"{namespace}/demo-redis to wait for the instance", lambda n=namespace: says(n), 60)
        assert ready["reason"] == "InstanceNotReady", ready
        assert claim_status(bed, namespace)["ready"] is False
    # the Application follows its claim's status on the claim's event: wait for it to say the same
    wanted = f"needs.redis waits: bound to ServiceProvider {SHARED}: InstanceNotReady: "
    wait(f"{namespaces[0]}/demo ClaimsReady to say why", lambda: wanted in str(
        (condition(status(bed, namespaces[0]), "ClaimsReady") or {}).get("message")) or None, 60)

    deployments = bed.http.get(f"/apis/apps/v1/namespaces/{SERVICES}/deployments").json()["items"]
    assert [d["metadata"]["name"] for d in deployments] == [SHARED]  # one per provider, whatever the claims
    [container] = deployments[0]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": "100m",
                                                                                      "memory": "128Mi"}
    assert container["args"][container["args"].index("--maxmemory") + 1] == str(96 * 2**20)
    service = bed.get("v1", "Service", SHARED, SERVICES) or {}
    assert service["spec"]["ports"][0]["port"] == 6379
    admin = bed.get("v1", "Secret", f"{SHARED}-admin", SERVICES) or {}
    password = base64.b64decode(admin["data"]["password"]).decode()
    assert len(password) >= 32 and password not in operator.log()


def rotation_status(bed: KubeTestBed, namespace: str) -> dict[str, Any]:
    return claim_status(bed, namespace).get("rotation") or {}


def test_rotating_the_credentials_rolls_the_pods_and_refuses_the_old_password_once_they_have_rolled(
        bed: KubeTestBed, operator: Operator, providers: None, redis_server: RedisServer) -> None:
    """`apprafter db rotate` (lifecycle.rotation): a new password in the connection Secret, the old one still taken
    by redis while a pod of the old template runs (redis holds both on the user), the Deployment's template changed
    (its pods roll), then the old password refused once no old pod is left; the status and Events say so; the same
    request again changes nothing; nothing is planned and no password is said."""
    namespace = fresh_namespace(bed, "redis")
    apply(bed, cr(namespace, needs("own")))
    ready_claim(bed, namespace)
    wait_phase(bed, namespace, "Ready", timeout=60)
    old = connection(bed, namespace)
    client(old).set(f"{old['prefix']}order", "42")
    template_pod(bed, namespace, "demo-old")  # a pod of the running release, started with the old password
    before = (bed.get("apps/v1", "Deployment", "demo", namespace) or {})["spec"]["template"]

    started = time.monotonic()
    cli = subprocess.Popen([*APPRAFTER, "db", "rotate", "demo", "-e", "prod", "--need", "redis", "-n", namespace,
                            "--kubeconfig", str(bed.kubeconfig), "--timeout", "120"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        claim = wait("the request on the claim", lambda: (bed.get(API, "ResourceClaim", "demo-redis", namespace)
                                                          or {}).get("metadata", {}).get("annotations", {}).get(
            ROTATE_ANNOTATION), 60)
        new = wait_showing("a new password in the connection Secret", lambda: (
            fields if (fields := connection(bed, namespace))["password"] != old["password"] else None), 60,
            lambda: rotation_status(bed, namespace))
        issued = time.monotonic() - started
        secret = bed.get("v1", "Secret", "demo-redis-conn", namespace) or {}
        assert secret["metadata"]["annotations"]["apprafter.io/rotation"] == claim
        assert (new["user"], new["prefix"]) == (old["user"], old["prefix"])
        assert client(new).get(f"{new['prefix']}order") == "42"  # the new password reaches the same keys
        assert client(old).ping()  # the old one still taken: a pod of the old template holds it
        assert len(admin(redis_server).acl_getuser(new["user"])["passwords"]) == 2
        st = wait("status.rotation.issued", lambda: rotation_status(bed, namespace) if rotation_status(
            bed, namespace).get("issued") == claim else None, 30)
        assert "completed" not in st and "demo-old" in wait(
            "the status to name the pod it waits for", lambda: rotation_status(bed, namespace).get("message")
            if "demo-old" in str(rotation_status(bed, namespace).get("message")) else None, 30)
        # the pods roll: the Deployment's template carries the request (the operator's, not a change to plan)
        deployment = wait("the pod template stamped", lambda: d if ((d := bed.get(
            "apps/v1", "Deployment", "demo", namespace) or {})["spec"]["template"]["metadata"].get(
            "annotations") or {}).get("rotation.apprafter.io/redis") == claim else None, 30)
        after = deployment["spec"]["template"]
        annotations = {k: v for k, v in after["metadata"]["annotations"].items()
                       if k != "rotation.apprafter.io/redis"}
        assert {**after, "metadata": {**after["metadata"], "annotations": annotations}} == {
            **before, "metadata": {**before["metadata"], "annotations": before["metadata"].get("annotations") or {}}}
        assert plans(bed, namespace) == [] and status(bed, namespace)["phase"] == "Ready"
        [rotating] = wait("the CredentialsRotating event", lambda: events(bed, namespace, "CredentialsRotating")
                          or None, 30)
        assert claim in rotating["note"] and "demo-redis-conn" in rotating["note"]

        template_pod(bed, namespace, "demo-new")  # the rollout's new pod, made from the stamped template
        assert client(old).ping()  # the old pod is still there: the old password is still taken
        rolled = time.monotonic()
        bed.delete("v1", "Pod", "demo-old", namespace)  # the rollout's last old pod gone
        done = wait_showing("the rotation completed", lambda: st if (st := rotation_status(bed, namespace)).get(
            "completed") == claim else None, 60, lambda: rotation_status(bed, namespace))
        completed = time.monotonic() - rolled
        assert done["completedAt"] and "the old password is refused" in done["message"]
        with pytest.raises(redis.AuthenticationError):
            client(old).ping()
        assert client(new).get(f"{new['prefix']}order") == "42"
        [rotated] = wait("the CredentialsRotated event", lambda: events(bed, namespace, "CredentialsRotated")
                         or None, 30)
        assert claim in rotated["note"]
        out, err = cli.communicate(timeout=60)
        assert cli.returncode == 0, err
        assert out.splitlines() == [f"resourceclaim/demo-redis: rotation {claim} requested (namespace {namespace})",
                                    f"resourceclaim/demo-redis: {done['message']}"]
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate()

    bed.delete("v1", "Pod", "demo-new", namespace)
    # one request, one new password: every pass since (the pods' changes, the status writes) kept it
    assert connection(bed, namespace)["password"] == new["password"]
    assert len(admin(redis_server).acl_getuser(new["user"])["passwords"]) == 1
    said = json.dumps(claim_status(bed, namespace)) + operator.log() + out + err
    for password in (old["password"], new["password"], ADMIN):
        assert password not in said
    print(f"db rotate -> new password issued {issued:.2f} s; last old pod gone -> old password refused "
          f"{completed:.2f} s")
