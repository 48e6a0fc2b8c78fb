"""The GitOps loop on the node tier: the same loop as test_gitops_loop.py (git, Argo CD's repo-server and
application controller, our plugin, the operator as its ServiceAccount, the admission webhook inside the node's
network namespace), but the user's Deployment runs real pods from the test image. A commit is Healthy in Argo CD
only once its pods are Available; a commit whose image cannot run is Degraded with the reason, the old pods
serving on; a gated change is Suspended, and once approved Healthy only when the new pods are Available."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.argocd import overrides
from tests.argocd.objects import APP_FILE, PROD, served
from tests.testbed.argocd import sync_status
from tests.testbed.gitops import APPROVER, GitOpsLoop, rolled_out, start_loop
from tests.testbed.node import NodeTestBed, has_condition

pytestmark = [pytest.mark.node, pytest.mark.gitops]

APP, NAMESPACE = "hello", PROD  # the Argo CD Application <app>-<env>, syncing into the namespace of its name
REPO_NAME = "hello"


def next_repository(node: NodeTestBed, image: str) -> str:
    """The same image under another repository name in the node's containerd (a gated change: AR-SB008)."""
    repository, _, tag = image.rpartition(":")
    other = f"{repository}-next:{tag}"
    node.ctr("images", "tag", "--force", image, other, check=True)
    return other


@dataclasses.dataclass
class NodeLoop:
    loop: GitOpsLoop
    node: NodeTestBed
    image: str
    revision: str


def healthy_only_when_rolled_out(loop: NodeLoop, revision: str, image: str) -> dict[str, Any]:
    """Wait for Argo CD to say Healthy at `revision`; every time it says so, the pods must be Available."""
    early: list[str] = []

    def check(app: dict[str, Any]) -> bool:
        if sync_status(app) != ("Synced", "Healthy", revision):
            return False
        if not rolled_out(loop.node, NAMESPACE, APP, image):
            early.append(str((loop.node.get("apps/v1", "Deployment", APP, NAMESPACE) or {}).get("status")))
            return False
        return True

    app = loop.loop.wait(NAMESPACE, f"Healthy at {revision[:8]}", check, timeout=240)
    assert not early, f"Argo CD said Healthy before the pods were Available: {early[0]}"
    return app


@pytest.fixture(scope="module")
def node_loop(node: NodeTestBed, test_app: str, testbed_dir: Path) -> Iterator[NodeLoop]:
    loop = start_loop(node, testbed_dir / "gitops-node", (NAMESPACE,))
    try:
        revision = loop.git.create(REPO_NAME, {APP_FILE: served(test_app)})
        loop.argocd.apply(loop.application(NAMESPACE, REPO_NAME, NAMESPACE, environment="prod"))
        running = NodeLoop(loop, node, test_app, revision)
        healthy_only_when_rolled_out(running, revision, test_app)
        yield running
    finally:
        loop.stop()


def cr(loop: NodeLoop) -> dict[str, Any]:
    obj = loop.loop.apprafter_application(APP, NAMESPACE)
    assert obj is not None
    return obj


def serving(loop: NodeLoop) -> set[str]:
    """The names of the pods that answer on their own IP from inside the node's namespace; a terminating pod is not
    serving (a Service's endpoints drop it too), and its Ready condition can lag its stopped container."""
    pods = loop.node.http.get(f"/api/v1/namespaces/{NAMESPACE}/pods").json()["items"]
    return {p["metadata"]["name"] for p in pods if has_condition(p, "Ready")
            and not p["metadata"].get("deletionTimestamp")
            and loop.node.request("GET", f"http://{p['status']['podIP']}:8080/").status_code == 200}


def test_the_first_sync_is_healthy_once_its_pods_answer(node_loop: NodeLoop) -> None:
    obj = cr(node_loop)
    assert obj["status"]["phase"] == "Ready"
    assert obj["status"]["replicas"] == {"desired": 2, "updated": 2, "ready": 2, "available": 2}
    assert len(serving(node_loop)) == 2
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    assert overrides.health(obj) == overrides.Health("Healthy", ready["message"])


def test_a_commit_whose_image_cannot_run_is_degraded_and_the_old_pods_keep_serving(node_loop: NodeLoop) -> None:
    loop, before = node_loop.loop, serving(node_loop)
    missing = node_loop.image.rpartition(":")[0] + ":no-such-tag"  # the same repository: a soft change
    revision = loop.push(REPO_NAME, {APP_FILE: served(missing)}, "prod: a tag that was never pushed", NAMESPACE)
    app = loop.wait_health(NAMESPACE, revision, "Degraded", timeout=240)
    obj = cr(node_loop)
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] in ("ErrImagePull", "ImagePullBackOff")
    assert f"container app: {ready['reason']} (image {missing} cannot be pulled" in ready["message"]
    assert app["status"]["health"]["status"] == "Degraded"
    node = next(n for n in loop.argocd.resource_tree(APPROVER.name, NAMESPACE) if n["kind"] == "Application"
                and n["group"] == "apprafter.io")
    assert node["health"] == {"status": "Degraded", "message": ready["message"]}
    assert serving(node_loop) == before  # maxUnavailable 0: the new pod never became ready, no old one went

    fixed = loop.push(REPO_NAME, {APP_FILE: served(node_loop.image)}, "prod: back to the image that runs",
                      NAMESPACE)
    healthy_only_when_rolled_out(node_loop, fixed, node_loop.image)


def test_a_gated_change_is_suspended_then_healthy_only_once_the_new_pods_are_available(node_loop: NodeLoop) -> None:
    loop, node = node_loop.loop, node_loop.node
    other = next_repository(node, node_loop.image)
    before = serving(node_loop)
    revision = loop.push(REPO_NAME, {APP_FILE: served(other)}, "prod: the image from another repository",
                         NAMESPACE)
    loop.wait_health(NAMESPACE, revision, "Suspended")
    plan = cr(node_loop)["status"]["migrationPlan"]
    assert serving(node_loop) == before  # held: the previous version keeps running, untouched
    approved = loop.approve(plan, NAMESPACE)
    assert approved.returncode == 0, approved.stderr
    healthy_only_when_rolled_out(node_loop, revision, other)
    assert (loop.migration_plan(plan, NAMESPACE) or {}).get("status", {}).get("phase") == "applied"
    after = serving(node_loop)
    assert len(after) == 2 and not after & before  # new pods, all answering
