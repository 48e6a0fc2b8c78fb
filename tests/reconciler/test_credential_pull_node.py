"""The real kubelet pulls a private image through the pull secret a SourceCredential derives (the node tier): the
test image pushed to the token-auth registry, served to the node's containerd inside its namespace. Without the
credential the pull is refused and the Application says so (Failed, ErrImagePull / ImagePullBackOff, the pod has no
pull secret); a credential with a wrong password rolls the pods onto its pull secret and the Application names it;
the right password (a rotation) lets the kubelet's next attempt pull, the pods run, the Application is Ready and
Argo CD's Lua says Healthy; an app of a namespace the credential does not cover cannot run the image from the node's
store (private images are pulled Always: issue 34 item 5). No password in any log of the node (kubelet, containerd,
API server), the registry, the operator, nor in an Event or a status."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.credentials.outputs import pull_secret_name
from tests.argocd import overrides
from tests.reconciler.helpers import API, ARGO, cr, wait
from tests.reconciler.operator_proc import FAST, Operator, operator_fixture
from tests.testbed.distribution import AuthRegistry, start_distribution
from tests.testbed.node import NodeTestBed
from tests.testbed.node_registry import NodeRegistry, push, serve_on_node
from tests.testbed.procs import log_files

pytestmark = [pytest.mark.node, pytest.mark.testbed]

WRONG = f"wrong-{uuid.uuid4().hex}"


class Private:
    """The registry on both sides, the private image's name on the node and the work directory."""

    def __init__(self, registry: AuthRegistry, served: NodeRegistry, image: str, workdir: Path) -> None:
        self.registry, self.served, self.image, self.workdir = registry, served, image, workdir


@pytest.fixture(scope="module")
def private(node: NodeTestBed, test_app: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Private]:
    workdir = Path(str(tmp_path_factory.mktemp("pull-node")))
    registry = start_distribution(workdir / "registry", "token")
    try:
        served = serve_on_node(registry, node, workdir / "node-registry")
        try:
            tag = uuid.uuid4().hex[:12]  # never in the node's image store already
            push(registry, test_app, f"myorg/testapp:{tag}", workdir)
            yield Private(registry, served, f"{served.host}/myorg/testapp:{tag}", workdir)
        finally:
            served.stop()
    finally:
        registry.stop()


# Our CRDs on the node and one operator for the module, as its ServiceAccount with the chart's RBAC.
operator = operator_fixture("--no-leader-elect", "--no-platform-stack", *FAST, bed="node", rbac=(), crds=True,
                            name="pull")


def _login(node: NodeTestBed, records: str, user: str, password: str) -> None:
    """The Secret the SealedSecrets controller unseals from SealedSecret pull-login."""
    node.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
                "metadata": {"name": "pull-login", "namespace": records},
                "stringData": {"username": user, "password": password}}, field_manager="sealed-secrets-controller")


def _failed_with(*phrases: str) -> Any:
    def check(obj: dict[str, Any]) -> Any:
        status = obj.get("status") or {}
        if status.get("observedGeneration") != obj["metadata"]["generation"] or status.get("phase") != "Failed":
            return None
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        return obj if ready["reason"] in ("ErrImagePull", "ImagePullBackOff") and all(
            p in ready["message"] for p in phrases) else None
    return check


def _ready_message(obj: dict[str, Any]) -> str:
    return str(next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")["message"])


def _pods(node: NodeTestBed, namespace: str) -> list[dict[str, Any]]:
    return list(node.http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"])


def test_the_kubelet_pulls_through_the_derived_pull_secret(node: NodeTestBed, operator: Operator,
                                                           private: Private) -> None:
    records = operator.records_namespace
    namespace = f"pull-{uuid.uuid4().hex[:8]}"
    node.ensure_namespace(namespace)
    node.apply(cr(namespace, {"image": private.image, "replicas": 2, "expose": {"port": 8080},
                              "env": {"MODE": "serve"}}, name="web"), field_manager=ARGO)

    # no credential: the registry refuses the kubelet, and the Application says so with what to do
    refused = node.wait(API, "Application", "web", namespace, _failed_with("the pod has no pull secret"),
                        what="Failed for want of a pull secret", timeout=180)
    message = _ready_message(refused)
    assert f"image {private.image} cannot be pulled" in message, message
    assert overrides.health(refused) == overrides.Health("Degraded", message)
    before = {p["metadata"]["name"] for p in _pods(node, namespace)}

    # a credential with the wrong password: the pull secret is attached, the pods roll onto it, still refused
    _login(node, records, private.registry.reader, WRONG)
    node.apply({"apiVersion": API, "kind": "SourceCredential", "metadata": {"name": "myorg", "namespace": records},
                "spec": {"registry": {"backend": {"sealedSecretRef": {"name": "pull-login"}},
                                      "hosts": [f"{private.served.host}/myorg/"], "namespaces": [namespace]}}})
    secret = pull_secret_name("myorg")

    def refused_with_the_secret(pods: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """The new pods (the old ones stay while no new one is available) refused although they pull with it."""
        rolled = [p for p in pods if p["spec"].get("imagePullSecrets") == [{"name": secret}]
                  and any((c.get("state") or {}).get("waiting", {}).get("reason") in ("ErrImagePull",
                                                                                      "ImagePullBackOff")
                          for c in (p.get("status") or {}).get("containerStatuses") or [])]
        return rolled or None

    rolled = node.wait_list("v1", "Pod", namespace, refused_with_the_secret, what="new pods refused with the secret",
                            timeout=180)
    assert not {p["metadata"]["name"] for p in rolled} & before
    # the Application says it too (naming the first failing pod by name: an old one, or a new one with the secret)
    wrong = node.wait(API, "Application", "web", namespace, _failed_with("cannot be pulled"), what="still Failed")
    assert "the pod pulls with" in _ready_message(wrong) or "the pod has no pull secret" in _ready_message(wrong)

    # the right password (a rotation, same Secret name): the kubelet's next attempt pulls, the pods run
    _login(node, records, private.registry.reader, private.registry.reader_password)
    ready = node.wait(API, "Application", "web", namespace,
                      lambda o: o if (o.get("status") or {}).get("phase") == "Ready"
                      and o["status"].get("imageDigest") else None, what="Ready through the pull secret", timeout=300)
    assert ready["status"]["replicas"]["available"] == 2
    assert overrides.health(ready).status == "Healthy"
    running = [p for p in _pods(node, namespace) if not p["metadata"].get("deletionTimestamp")]
    assert len(running) == 2 and all(p["status"]["phase"] == "Running" for p in running)
    assert all(p["spec"]["imagePullSecrets"] == [{"name": secret}] for p in running)

    # the image is in the node's store now; an app of a namespace the credential does not cover cannot run it from
    # there: a private image is pulled Always, so the kubelet asks the registry, which refuses a pod with no login
    outsider = f"pull-other-{uuid.uuid4().hex[:8]}"
    node.ensure_namespace(outsider)
    node.apply(cr(outsider, {"image": private.image, "replicas": 1, "expose": {"port": 8080},
                             "env": {"MODE": "serve"}}, name="web"), field_manager=ARGO)
    node.wait(API, "Application", "web", outsider, _failed_with("the pod has no pull secret"),
              what="the uncovered namespace's pod refused although the image is on the node", timeout=180)
    deployment = node.get("apps/v1", "Deployment", "web", outsider)
    assert deployment is not None
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert [c["imagePullPolicy"] for c in containers] == ["Always"]
    assert not any(p["status"].get("phase") == "Running" for p in _pods(node, outsider))
    node.delete(API, "Application", "web", outsider)
    node.wait_gone(API, "Application", "web", outsider)

    node.delete(API, "Application", "web", namespace)
    node.wait_gone(API, "Application", "web", namespace)
    node.delete(API, "SourceCredential", "myorg", records)
    wait("the credential gone", lambda: node.get(API, "SourceCredential", "myorg", records) is None or None, 60)

    # no material anywhere: Events and statuses of both namespaces, every log of the node and the servers
    said = json.dumps([node.events(ns) for ns in (namespace, records)]) + json.dumps(_pods(node, namespace))
    for password in (WRONG, private.registry.reader_password):
        assert password not in said
    logs = log_files(node.dir, private.workdir, operator.log_path.parent)
    names = {log.name for log in logs}
    assert {"kubelet.log", "containerd.log", "kube-apiserver.log"} <= names, names
    for log in logs:
        text = log.read_text(errors="replace")
        assert WRONG not in text and private.registry.reader_password not in text, f"material in {log}"
