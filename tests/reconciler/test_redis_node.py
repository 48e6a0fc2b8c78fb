"""`needs: redis` on the node tier (issue 31 item 3): the integrated instance the operator makes runs as a pod
(Debian's redis-server, deploy/images/redis.Dockerfile), two Applications in two namespaces become Ready with a
connection Secret each, and a pod of each, its Secret as its env, writes and reads its key under its prefix through
the Service's DNS name, while its credentials are refused on the other's prefix.

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
from tests.reconciler.node_pods import finished, ready, secret_env
from tests.reconciler.operator_proc import FAST, Fixture, Operator, operator_fixture
from tests.testbed.node import NodeTestBed

pytestmark = [pytest.mark.node, pytest.mark.testbed]

RUN = uuid.uuid4().hex[:8]
SERVICES = f"redis-svc-{RUN}"  # where the instance runs (the provider's spec.config.namespace)
PROVIDER = f"redis-node-{RUN}"
SECRET = "demo-redis-conn"
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


@pytest.fixture(scope="module")
def redis_image(node: NodeTestBed) -> str:
    """The redis image `make images` builds (only it), in the node's containerd."""
    return node.import_image(make_images(names=("redis",))["redis"].ref)


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


operator = operator_fixture("--no-leader-elect", "--no-platform-stack", *FAST, "--backend-image",
                            Fixture("redis_image_flag"), bed="node", crds=True, inside=True, name="redis-node")


def app(image: str) -> dict[str, Any]:
    """The test app with a redis need on this module's provider, its URL in the env."""
    return {"image": image, "replicas": 1, "expose": {"port": 8080},
            "needs": {"redis": {"selector": {"bed": RUN}}},
            "env": {"MODE": "serve", "REDIS_URL": {"claim": "redis/url"}}}


def client_pod(namespace: str, image: str, other_prefix: str) -> dict[str, Any]:
    """A pod running redis-cli with the app's connection Secret as its env."""
    env = secret_env(SECRET, [("REDIS_URL", "url"), ("PREFIX", "prefix")])
    env += [{"name": "OTHER", "value": other_prefix}, {"name": "MESSAGE", "value": f"from {namespace}"}]
    return node_pods.client_pod("redis-client", namespace, image, CLIENT, env, 999)


def test_each_apps_pod_reaches_its_own_keys_on_the_integrated_instance_and_no_other_apps(
        node: NodeTestBed, test_app: str, redis_image: str, operator: Operator, provider: None) -> None:
    started = time.monotonic()
    namespaces = [f"redis-node-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        for namespace in namespaces:
            node.ensure_namespace(namespace)
            apply(node, cr(namespace, app(test_app)))
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
    finally:
        node.delete_namespaces(namespaces)  # while its operator runs: the claims' finalizers are its to take off
