"""Argo CD as pods on the node tier's real single-node cluster, installed as a cluster admin installs it: Argo CD's
own install.yaml at the pin with deploy/argocd as a kustomize component and `images:` naming the images `make
images` builds here (Argo CD's from the pinned binary on the local Debian base, Debian's Redis, our plugin sidecar):
no public image, nothing downloaded. Its pods become Ready; an Argo CD Application of a git repository (served
inside the node's network namespace, where the pods reach it) rendered through our plugin in the repo-server's
sidecar syncs and is Healthy once its pods run; argocd-server's API draws the tree down to those pods.

The operator runs on the host as its ServiceAccount with the chart's RBAC (tests/testbed/gitops.py), as in the
node's GitOps loop; its pods are tests/images/test_chart_install.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.argocd.objects import APP_FILE, served
from tests.images.podman import Image
from tests.testbed.argocd import ARGOCD_API, ARGOCD_VERSIONS, IN_CLUSTER, sync_status
from tests.testbed.argocd_pods import UPSTREAM_IMAGES, PodArgoCD, install_argocd
from tests.testbed.gitops import delete_ours, forget_access, install_apprafter_crds, rolled_out, start_operator
from tests.testbed.gitserver import GitServer, start_git_server
from tests.testbed.node import NodeTestBed, has_condition

pytestmark = [pytest.mark.images, pytest.mark.node, pytest.mark.gitops]

ARGOCD_NAMESPACE = "argocd"
DESTINATION = "pods-hello"  # the user's app namespace (the operator watches it)
APP = "hello"  # the app in the repository (objects.served), and its Deployment
ARGO_APP = "hello-pods"  # the Argo CD Application
PLUGIN = "apprafter-cue-v1"  # plugin.yaml's name and version: how the sidecar's socket is discovered


@dataclasses.dataclass
class Installed:
    node: NodeTestBed
    argocd: PodArgoCD
    git: GitServer
    image: str
    revision: str


@pytest.fixture(scope="module")
def installed(node: NodeTestBed, images: dict[str, Image], test_app: str, testbed_dir: Path) -> Iterator[Installed]:
    workdir = testbed_dir / "argocd-pods"
    workdir.mkdir(parents=True, exist_ok=True)
    install_apprafter_crds(node, workdir)
    operator = start_operator(node, workdir / "operator", (DESTINATION,))
    git = start_git_server(workdir / "git", host=node.node_ip, wrap=node.nsenter)
    argocd: PodArgoCD | None = None
    try:
        argocd = install_argocd(node, {name: images[name].ref for name in UPSTREAM_IMAGES.values()},
                                ARGOCD_NAMESPACE)
        revision = git.create("hello", {APP_FILE: served(test_app)})
        yield Installed(node, argocd, git, test_app, revision)
    finally:
        if argocd is not None:
            node.delete(ARGOCD_API, "Application", ARGO_APP, ARGOCD_NAMESPACE)
        delete_ours(node, (DESTINATION,))  # while the operator runs: it lets go of what it made
        operator.stop()
        git.stop()
        if argocd is not None:
            argocd.uninstall()
        node.delete("v1", "Namespace", DESTINATION)
        forget_access(node, (DESTINATION,))


def application(git: GitServer, revision: str = "main") -> dict[str, Any]:
    """The Argo CD Application a user writes: the repository, our plugin (prod), auto-sync into DESTINATION."""
    return {"apiVersion": ARGOCD_API, "kind": "Application",
            "metadata": {"name": ARGO_APP, "namespace": ARGOCD_NAMESPACE},
            "spec": {"project": "default",
                     "source": {"repoURL": git.url("hello"), "path": ".", "targetRevision": revision,
                                "plugin": {"name": PLUGIN,
                                           "parameters": [{"name": "environment", "string": "prod"}]}},
                     "destination": {"server": IN_CLUSTER, "namespace": DESTINATION},
                     "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                                    "syncOptions": ["CreateNamespace=true"]}}}


def test_every_argocd_component_runs_from_the_images_built_here(installed: Installed) -> None:
    node, argocd = installed.node, installed.argocd
    pods = node.http.get(f"/api/v1/namespaces/{ARGOCD_NAMESPACE}/pods").json()["items"]
    components = {p["metadata"]["labels"]["app.kubernetes.io/name"] for p in pods if has_condition(p, "Ready")}
    assert components == {"argocd-application-controller", "argocd-applicationset-controller",
                          "argocd-notifications-controller", "argocd-redis", "argocd-repo-server", "argocd-server"}
    ours = {ref.rpartition(":")[0] for ref in (c["image"] for p in pods for c in
                                                [*p["spec"]["containers"], *p["spec"].get("initContainers", [])])}
    assert {ref.rsplit("/", 1)[1] for ref in ours} == set(UPSTREAM_IMAGES.values())
    assert all(ref.startswith("localhost/") for ref in ours), ours
    # The repo-server pod runs our plugin as its sidecar (deploy/argocd), from its own image.
    [repo] = [p for p in pods if p["metadata"]["labels"]["app.kubernetes.io/name"] == "argocd-repo-server"]
    assert {c["name"] for c in repo["spec"]["containers"]} == {"argocd-repo-server", "apprafter-cue"}
    assert all(s["ready"] for s in repo["status"]["containerStatuses"])
    # Argo CD's own API says which version runs: the pinned one.
    assert argocd.api("GET", "/api/version")["Version"].startswith(ARGOCD_VERSIONS[0] + "+")
    assert set(argocd.ready_seconds) == components


def test_an_application_of_a_git_repository_syncs_through_the_plugin_and_is_healthy_with_running_pods(
        installed: Installed) -> None:
    node, argocd, revision = installed.node, installed.argocd, installed.revision
    node.apply(application(installed.git), namespace=ARGOCD_NAMESPACE)
    early: list[str] = []

    def healthy(app: dict[str, Any]) -> bool:
        if sync_status(app) != ("Synced", "Healthy", revision):
            return False
        if not rolled_out(node, DESTINATION, APP, installed.image):
            early.append(str((node.get("apps/v1", "Deployment", APP, DESTINATION) or {}).get("status")))
            return False
        return True

    app = argocd.wait_app(ARGO_APP, f"Synced at {revision[:8]} and Healthy", healthy)
    assert not early, f"Argo CD said Healthy before the pods were Available: {early[0]}"
    assert app["status"]["operationState"]["phase"] == "Succeeded"
    # Rendered by our plugin: the one object Argo CD applied is our Application, which the operator turned into pods.
    assert [(r["group"], r["kind"], r["name"]) for r in app["status"]["resources"]] == [
        ("apprafter.io", "Application", APP)]
    ours = node.get("apprafter.io/v1alpha1", "Application", APP, DESTINATION)
    assert ours is not None and ours["status"]["phase"] == "Ready"

    # What the UI draws (argocd-server's API): our Application, the Deployment it owns, its ReplicaSet, the pods.
    tree = argocd.resource_tree(ARGO_APP)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in tree:
        by_kind.setdefault(item["kind"], []).append(item)
    [root] = [n for n in by_kind["Application"] if n["group"] == "apprafter.io"]
    assert root["health"]["status"] == "Healthy"
    [deployment] = by_kind["Deployment"]
    assert deployment["parentRefs"][0]["uid"] == root["uid"]
    assert deployment["health"]["status"] == "Healthy"
    pods = by_kind["Pod"]
    running = {p["metadata"]["name"] for p in node.http.get(f"/api/v1/namespaces/{DESTINATION}/pods").json()["items"]
               if has_condition(p, "Ready")}
    assert {p["name"] for p in pods} == running and len(running) == 2
    assert all(p["health"]["status"] == "Healthy" for p in pods)
    replica_sets = {r["uid"] for r in by_kind["ReplicaSet"]}
    assert all(p["parentRefs"][0]["uid"] in replica_sets for p in pods)
