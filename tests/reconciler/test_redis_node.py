"""`needs: redis` on the node tier (issue 31 item 3): the integrated instance the operator makes runs as a pod
(Debian's redis-server, deploy/images/redis.Dockerfile), two Applications in two namespaces become Ready with a
connection Secret each, and a pod of each, its Secret as its env, writes and reads its key under its prefix through
the Service's DNS name, while its credentials are refused on the other's prefix. A durable cache (issue 42 item 3):
the keys a claim's user wrote, on the shared instance and on a claim's own, are read with the same Secret after the
instance's pod was deleted and came back, the operator stopped meanwhile (no one sets a user again). Rotation (issue 42
item 2): a bounded loop asks the second app (the shop) for a new Redis connection every 50 ms throughout `apprafter db
rotate`, none fails, the pods roll, and the old password is refused afterwards.

The operator runs in the node's network namespace (operator_proc's `inside`), where a pod would: it dials the
instance at its Service's cluster IP (lifecycle.redis_backend.dial), through kube-proxy; the apps use the name."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.images.podman import make_images
from tests.reconciler import node_pods
from tests.reconciler.helpers import API, add_provider, apply, cr
from tests.reconciler.node_pods import finished, loop_result, ready, request_loop, secret_env
from tests.reconciler.operator_proc import FAST, ROLL_DRAIN, Fixture, Operator, operator_fixture
from tests.renderer.helpers import run_cli
from tests.testbed.node import NodeTestBed
from tests.testbed.testapp import build_shop_app

pytestmark = [pytest.mark.node, pytest.mark.testbed]

RUN = uuid.uuid4().hex[:8]
SERVICES = f"redis-svc-{RUN}"  # where the instance runs (the provider's spec.config.namespace)
PROVIDER = f"redis-node-{RUN}"
SECRET = "demo-redis-conn"
SHOP_PORT = 3000  # the shop's default port
# What each client pod does with its Secret (never printing it): PING, SET and GET its own key, then try the other
# app's prefix and an instance-wide command; `grep -o NOPERM` keeps only the refusal's kind.
CLIENT = """set -u
r() { redis-cli --no-auth-warning -u "$REDIS_URL" "$@" 2>&1; }
echo "ping: $(r PING)"
echo "set: $(r SET "${PREFIX}greeting" "$MESSAGE")"
echo "get: $(r GET "${PREFIX}greeting")"
echo "other get: $(r GET "${OTHER}greeting" | grep -o NOPERM)"
echo "other set: $(r SET "${OTHER}greeting" x | grep -o NOPERM)"
echo "keys: $(r KEYS '*' | grep -o NOPERM)"
"""
WRITER = """set -u
r() { redis-cli --no-auth-warning -u "$REDIS_URL" "$@" 2>&1; }
echo "set: $(r SET "${PREFIX}durable" "$MESSAGE")"
echo "push: $(r RPUSH "${PREFIX}jobs" one two three)"
"""
READER = """set -u
r() { redis-cli --no-auth-warning -u "$REDIS_URL" "$@" 2>&1; }
echo "get: $(r GET "${PREFIX}durable")"
echo "jobs: $(r LRANGE "${PREFIX}jobs" 0 -1 | tr '\\n' ' ')"
"""


@pytest.fixture(scope="module")
def redis_image(node: NodeTestBed) -> str:
    """The redis image `make images` builds (only it), in the node's containerd."""
    return node.import_image(make_images(names=("redis",))["redis"].ref)


@pytest.fixture(scope="module")
def shop_image(node: NodeTestBed) -> str:
    """The shop (tests/testbed/shopapp/): its /fresh opens a new Redis connection per request."""
    return node.import_image(build_shop_app())


@pytest.fixture(scope="module")
def redis_image_flag(redis_image: str) -> str:
    return f"redis-server={redis_image}"


@pytest.fixture(scope="module")
def provider(node: NodeTestBed, operator: Operator) -> Iterator[None]:
    """An administrator's integrated redis-server provider, its instance in a namespace of this module's (once the
    operator installed our CRDs)."""
    node.ensure_namespace(SERVICES)
    add_provider(node, PROVIDER, "redis", "redis-server",
                 {"namespace": SERVICES, "resources": {"memory": "64Mi", "cpu": "100m"}}, labels={"bed": RUN})
    yield
    node.delete(API, "ServiceProvider", PROVIDER)
    node.delete("v1", "Namespace", SERVICES)  # its instance goes with it (not waited for: nothing uses it)


@pytest.fixture(scope="module")
def redis_platform(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The operator's platform file: the apps' pods drain (ROLL_DRAIN: the rotation's request loop)."""
    path = tmp_path_factory.mktemp("platform") / "platform.yaml"
    path.write_text(ROLL_DRAIN)
    return str(path)


operator = operator_fixture("--no-leader-elect", "--no-platform-stack", *FAST, "--platform", Fixture("redis_platform"),
                            "--backend-image", Fixture("redis_image_flag"), bed="node", crds=True, inside=True,
                            name="redis-node")


def app(image: str, bed: str = RUN, **need: str) -> dict[str, Any]:
    """The test app with a redis need on this module's provider (`bed`: another's), its URL in the env."""
    return {"image": image, "replicas": 1, "expose": {"port": 8080},
            "needs": {"redis": {"selector": {"bed": bed}, **need}},
            "env": {"MODE": "serve", "REDIS_URL": {"claim": "redis/url"}}}


def shop(image: str) -> dict[str, Any]:
    """The shop with a redis need on this module's provider: ready once its Redis answers."""
    return {"image": image, "replicas": 1, "expose": {"port": SHOP_PORT},
            "health": {"readiness": {"path": "/healthz", "periodSeconds": 1, "failureThreshold": 1}},
            "needs": {"redis": {"selector": {"bed": RUN}}}, "env": {"REDIS_URL": {"claim": "redis/url"}}}


def auth(node: NodeTestBed, fields: dict[str, str]) -> str:
    """A login as a claim's user with its password, in the instance's container (the password on stdin, never in an
    argv): PONG, or WRONGPASS."""
    script = ('read -r P; redis-cli --no-auth-warning --user "$0" --pass "$P" PING 2>&1 '
              "| grep -o -e PONG -e WRONGPASS | head -1")
    return node.kubectl("exec", "-i", "-n", SERVICES, f"deploy/{PROVIDER}", "--", "sh", "-c", script, fields["user"],
                        input=fields["password"] + "\n").stdout.strip()


def app_pods(node: NodeTestBed, namespace: str) -> set[str]:
    """The names of the app's pods (its Deployment's, `demo-...`) in `namespace`."""
    return {p["metadata"]["name"] for p in node.http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
            if p["metadata"]["name"].startswith("demo-")}


def client_pod(namespace: str, image: str, other_prefix: str, name: str = "redis-client",
               script: str = CLIENT) -> dict[str, Any]:
    """A pod running redis-cli (`script`) with the app's connection Secret as its env."""
    env = secret_env(SECRET, [("REDIS_URL", "url"), ("PREFIX", "prefix")])
    env += [{"name": "OTHER", "value": other_prefix}, {"name": "MESSAGE", "value": f"from {namespace}"}]
    return node_pods.client_pod(name, namespace, image, script, env, 999)


def ran(node: NodeTestBed, namespaces: list[str], image: str, name: str, script: str) -> dict[str, list[str]]:
    """`script` run once in a client pod of each namespace, with its Secret; each one's output lines."""
    for namespace in namespaces:
        node.apply(client_pod(namespace, image, "", name, script), field_manager="test")
    said = {}
    for namespace in namespaces:
        pod = node.wait("v1", "Pod", name, namespace, finished, timeout=120, what=f"pod {namespace}/{name} to finish")
        said[namespace] = node.logs(name, namespace).splitlines()
        assert pod["status"]["phase"] == "Succeeded", said[namespace]
    return said


def test_each_apps_pod_reaches_its_own_keys_on_the_integrated_instance_and_no_other_apps(
        node: NodeTestBed, test_app: str, shop_image: str, redis_image: str, operator: Operator,
        provider: None) -> None:
    started = time.monotonic()
    namespaces = [f"redis-node-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        for namespace, spec in zip(namespaces, (app(test_app), shop(shop_image)), strict=True):
            node.ensure_namespace(namespace)
            apply(node, cr(namespace, spec))
        for namespace in namespaces:
            node.wait(API, "Application", "demo", namespace, ready, timeout=180,
                      what=f"Application {namespace}/demo Ready")
        to_ready = time.monotonic() - started
        claims = [(node.get(API, "ResourceClaim", "demo-redis", n) or {}).get("status") or {} for n in namespaces]
        fields = []
        for namespace, claim in zip(namespaces, claims, strict=True):
            user = f"{namespace}.demo-redis"
            assert claim["ready"] is True and claim["provider"] == PROVIDER
            assert claim["connection"] == {"host": f"{PROVIDER}.{SERVICES}.svc", "port": 6379, "user": user,
                                           "prefix": f"{user}:", "secretName": SECRET}
            secret = node.get("v1", "Secret", SECRET, namespace) or {}
            fields.append({k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()})
        # one instance, made by the operator, serving both
        assert [d["metadata"]["name"] for d in node.http.get(
            f"/apis/apps/v1/namespaces/{SERVICES}/deployments").json()["items"]] == [PROVIDER]

        first, second = namespaces
        for namespace, other in ((first, fields[1]), (second, fields[0])):
            node.apply(client_pod(namespace, redis_image, other["prefix"]), field_manager="test")
        for namespace in namespaces:
            pod = node.wait("v1", "Pod", "redis-client", namespace, finished, timeout=120,
                            what=f"pod {namespace}/redis-client to finish")
            log = node.logs("redis-client", namespace)
            assert pod["status"]["phase"] == "Succeeded", log
            assert log.splitlines() == ["ping: PONG", "set: OK", f"get: from {namespace}", "other get: NOPERM",
                                        "other set: NOPERM", "keys: NOPERM"], log

        # nothing secret in what the operator says: the claims' status, its log
        said = json.dumps(claims) + operator.log()
        admin = node.get("v1", "Secret", f"{PROVIDER}-admin", SERVICES) or {}
        for password in (*(f["password"] for f in fields), base64.b64decode(admin["data"]["password"]).decode()):
            assert password not in said
        print(f"two apps Ready with the integrated redis: {to_ready:.1f} s; "
              f"both pods done: {time.monotonic() - started:.1f} s")

        # rotation with the shop answering throughout: a new Redis connection (AUTH) per request, so a password
        # taken off the user before the old pod is gone would fail one; the pods roll; the old password refused
        old_pods, looping = app_pods(node, second), time.monotonic()
        request_loop(node, second, shop_image, f"http://demo.{second}.svc:{SHOP_PORT}/fresh")
        rotating = time.monotonic()
        rotated = run_cli("db", "rotate", "demo", "-e", "prod", "--need", "redis", "-n", second, "--kubeconfig",
                          str(node.kubeconfig), "--timeout", "300")
        assert rotated.returncode == 0, rotated.stderr
        rotating = time.monotonic() - rotating
        looped = loop_result(node, second)
        assert looped[-1].startswith("sent ") and looped[-1].endswith(", failed 0"), looped
        assert int(looped[-1].split()[1].rstrip(",")) >= 10, looped  # it ran throughout
        assert old_pods and not old_pods & app_pods(node, second), old_pods  # the pods rolled
        secret = node.get("v1", "Secret", SECRET, second) or {}
        new = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        assert new["password"] != fields[1]["password"] and new["user"] == fields[1]["user"]
        assert (auth(node, new), auth(node, fields[1])) == ("PONG", "WRONGPASS")
        print(f"redis rotation under a request loop: `db rotate` {rotating:.1f} s, {looped[-1]}; the step "
              f"{time.monotonic() - looping:.1f} s")
    finally:
        node.delete_namespaces(namespaces)  # while its operator runs: the claims' finalizers are its to take off


def _ready_pod(pods: list[dict[str, Any]], not_uid: str) -> dict[str, Any] | None:
    """The instance's pod that replaced the one of `not_uid`, once Ready."""
    return next((p for p in pods if p["metadata"]["uid"] != not_uid and not p["metadata"].get("deletionTimestamp")
                 and any(c["type"] == "Ready" and c["status"] == "True"
                         for c in (p.get("status") or {}).get("conditions") or [])), None)


def test_a_claims_keys_outlive_its_instances_pod_and_its_same_secret_reads_them_with_no_one_acting(
        node: NodeTestBed, test_app: str, redis_image: str, operator: Operator, provider: None) -> None:
    """Two apps, one on the module's shared instance, one on an instance of its own (`isolation: instance`, nano:
    its own volume); each writes its keys; the operator is stopped; each instance's pod is deleted; once the
    Deployment's new pod is Ready, each app's same Secret reads its keys back. Without the append-only file the keys
    are gone, without the ACL file the user is (WRONGPASS: the operator, stopped, sets no user again)."""
    own_provider = f"redis-own-{RUN}"
    add_provider(node, own_provider, "redis", "redis-server", {"namespace": SERVICES, "isolation": "instance"},
                 labels={"bed": f"{RUN}-own"})
    shared_ns, own_ns = namespaces = [f"redis-durable-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    started = time.monotonic()
    try:
        for namespace, spec in ((shared_ns, app(test_app)), (own_ns, app(test_app, f"{RUN}-own", size="nano"))):
            node.ensure_namespace(namespace)
            apply(node, cr(namespace, spec))
        for namespace in namespaces:
            node.wait(API, "Application", "demo", namespace, ready, timeout=180,
                      what=f"Application {namespace}/demo Ready")
        secrets_before = {n: (node.get("v1", "Secret", SECRET, n) or {}).get("data") for n in namespaces}
        instances = {n: str((node.get(API, "ResourceClaim", "demo-redis", n) or {})["status"]["connection"]["host"])
                     .split(".")[0] for n in namespaces}
        assert instances[shared_ns] == PROVIDER and instances[own_ns].startswith("redis-")
        volumes = {n: node.get("v1", "PersistentVolumeClaim", f"{instances[n]}-data", SERVICES) for n in namespaces}
        assert all(v is not None for v in volumes.values()), "each instance has its volume"
        wrote = ran(node, namespaces, redis_image, "redis-writer", WRITER)
        assert wrote == {n: ["set: OK", "push: 3"] for n in namespaces}, wrote

        operator.terminate()  # no one acts from here: nothing sets any user again
        restarted = time.monotonic()
        for namespace in namespaces:
            selector = f"app.kubernetes.io/instance={instances[namespace]}"
            [pod] = node.http.get(f"/api/v1/namespaces/{SERVICES}/pods",
                                  params={"labelSelector": selector}).json()["items"]
            node.delete("v1", "Pod", pod["metadata"]["name"], SERVICES)
            node.wait_list("v1", "Pod", SERVICES, lambda pods, uid=pod["metadata"]["uid"]: _ready_pod(pods, uid),
                           labels=selector, timeout=180, what=f"a new Ready pod of {instances[namespace]}")
        back = time.monotonic() - restarted
        read = ran(node, namespaces, redis_image, "redis-reader", READER)
        assert read == {n: [f"get: from {n}", "jobs: one two three "] for n in namespaces}, read
        assert {n: (node.get("v1", "Secret", SECRET, n) or {}).get("data") for n in namespaces} == secrets_before
        print(f"two apps Ready: {restarted - started:.1f} s; both instances' pods deleted and Ready again: "
              f"{back:.1f} s; keys read back with the same Secrets")

        # the provider deleted: its claim stays bound to it (ProviderMissing), its instance runs on, its keys read
        operator.start()
        node.delete(API, "ServiceProvider", own_provider)
        node.wait(API, "ResourceClaim", "demo-redis", own_ns,
                  lambda c: any(x["type"] == "Bound" and x["reason"] == "ProviderMissing"
                                for x in (c.get("status") or {}).get("conditions") or []),
                  timeout=120, what="the claim to say its provider is missing")
        node.delete("v1", "Pod", "redis-reader", own_ns)
        node.wait_gone("v1", "Pod", "redis-reader", own_ns)
        assert ran(node, [own_ns], redis_image, "redis-reader", READER) == {
            own_ns: [f"get: from {own_ns}", "jobs: one two three "]}
    finally:
        if not operator.alive():
            operator.start()
        node.delete_namespaces(namespaces)  # while its operator runs: the claims' finalizers are its to take off
        node.delete(API, "ServiceProvider", own_provider)
