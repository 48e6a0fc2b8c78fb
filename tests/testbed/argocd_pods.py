"""Argo CD as pods on a node bed (tests/testbed/node.py), installed as a cluster admin installs it: Argo CD's own
manifests/install.yaml at the pin, built by the pinned kustomize with deploy/argocd as a component and `images:`
naming the images `make images` builds here (Argo CD's from the pinned binary, Debian's Redis, our plugin
sidecar), applied, and waited on until every component is Ready. Its API is argocd-server's Service, called from
inside the node's network namespace as a browser in the cluster would.

What the bed changes, because the node has no registry (docs/node-tier.md "Argo CD as pods on the node"):
`imagePullPolicy: IfNotPresent` (the images are imported into the node's containerd) and Dex left out (SSO; no image
of it is built here). Argo CD's components find each other by their Services' names through the node's cluster DNS
(tests/testbed/node_dns.py), as on any cluster.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.testbed.argocd import ARGOCD_API, ARGOCD_VERSIONS, with_component
from tests.testbed.node import NodeTestBed, RequestFailed
from tests.testbed.procs import BedError, wait_for

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "argocd"
FIELD_MANAGER = "apprafter-argocd-pods"
# install.yaml's images -> the name `make images` gives ours (tests/images/podman.py IMAGES).
UPSTREAM_IMAGES = {"quay.io/argoproj/argocd": "argocd", "public.ecr.aws/docker/library/redis": "redis",
                   "ghcr.io/apprafter/argocd-cue-cmp": "argocd-cue-cmp"}
LEFT_OUT = frozenset({("Deployment", "argocd-dex-server")})  # Dex (SSO): its image is not built here
WORKLOADS = frozenset({"Deployment", "StatefulSet"})
_ORDER = ("CustomResourceDefinition", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
          "ConfigMap", "Secret", "Service", "NetworkPolicy")


def pod_templates(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod spec of a workload, or None."""
    if obj.get("kind") not in WORKLOADS:
        return None
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def install_objects_for_node(images: Mapping[str, str], namespace: str = "argocd",
                             version: str = ARGOCD_VERSIONS[0]) -> list[dict[str, Any]]:
    """install.yaml + deploy/argocd + `images:` (our name -> the ref pods run), as the bed applies it (Dex left
    out, images never pulled)."""
    overrides = {upstream: images[ours] for upstream, ours in UPSTREAM_IMAGES.items()}
    objects = [o for o in with_component(DEPLOY, version, namespace, overrides)
               if (o["kind"], o["metadata"]["name"]) not in LEFT_OUT]
    for obj in objects:
        spec = pod_templates(obj)
        for container in [*(spec or {}).get("containers", []), *(spec or {}).get("initContainers", [])]:
            container["imagePullPolicy"] = "IfNotPresent"
    return objects


def manifest_for_node(images: Mapping[str, str], version: str = ARGOCD_VERSIONS[0]) -> list[dict[str, Any]]:
    """The install manifest a cluster admin points `apprafter cluster-bootstrap --argocd-manifest` at on the node:
    install.yaml with `images:` naming ours (kustomize) and the bed's changes (`imagePullPolicy: IfNotPresent`, Dex
    left out). No deploy/argocd: the loader puts the sidecar settings on."""
    overrides = {upstream: images[ours] for upstream, ours in UPSTREAM_IMAGES.items() if ours in images}
    objects = [o for o in with_component(None, version, "argocd", overrides)
               if (o["kind"], o["metadata"]["name"]) not in LEFT_OUT]
    for obj in objects:
        spec = pod_templates(obj)
        for container in [*(spec or {}).get("containers", []), *(spec or {}).get("initContainers", [])]:
            container["imagePullPolicy"] = "IfNotPresent"
    return objects


def workload_ready(obj: Mapping[str, Any]) -> bool:
    """Every replica of a Deployment or StatefulSet is of the current generation and Ready."""
    status, want = obj.get("status") or {}, (obj.get("spec") or {}).get("replicas", 1)
    return bool(status.get("observedGeneration") == obj["metadata"]["generation"]
            and status.get("readyReplicas", 0) == status.get("updatedReplicas", 0) == want
            and status.get("replicas", 0) == want)


@dataclasses.dataclass
class PodArgoCD:
    """Argo CD running as pods in `namespace`; `ready_seconds`: each workload, seconds from its apply to Ready."""

    node: NodeTestBed
    namespace: str
    objects: list[dict[str, Any]]
    ready_seconds: dict[str, float]
    _token: str = ""

    @property
    def server(self) -> str:
        svc = self.node.get("v1", "Service", "argocd-server", self.namespace) or {}
        return f"https://{svc['spec']['clusterIP']}:443"

    def admin_password(self) -> str:
        """What `argocd admin initial-password` prints: argocd-server's generated admin password."""
        secret = self.node.wait("v1", "Secret", "argocd-initial-admin-secret", self.namespace,
                                lambda s: (s.get("data") or {}).get("password"))
        return base64.b64decode(secret["data"]["password"]).decode()

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """argocd-server's REST API as admin (the UI's calls), from inside the node's namespace (TLS unverified:
        argocd-server's own self-signed certificate, as a first login sees it)."""
        if not self._token:
            login = json.dumps({"username": "admin", "password": self.admin_password()}).encode()
            resp = self.node.request("POST", f"{self.server}/api/v1/session", body=login,
                                     headers={"Content-Type": "application/json"})
            if resp.status_code != 200:
                raise BedError(f"argocd-server refused admin's login: {resp.status_code} {resp.text[:500]}")
            self._token = resp.json()["token"]
        content = None if body is None else json.dumps(body).encode()
        resp = self.node.request(method, f"{self.server}{path}", body=content,
                                 headers={"Authorization": f"Bearer {self._token}",
                                          "Content-Type": "application/json"}, timeout=30)
        if resp.status_code >= 300:
            raise BedError(f"argocd-server: {method} {path}: {resp.status_code} {resp.text[:500]}")
        return resp.json()

    def resource_tree(self, app: str) -> list[dict[str, Any]]:
        """The nodes the UI draws for Argo CD Application `app`."""
        nodes: list[dict[str, Any]] = self.api("GET", f"/api/v1/applications/{app}/resource-tree"
                                               f"?appNamespace={self.namespace}").get("nodes") or []
        return nodes

    def logs(self) -> str:
        """Every Argo CD container's log tail, for failure messages."""
        out = []
        pods = self.node.http.get(f"/api/v1/namespaces/{self.namespace}/pods").json()["items"]
        for pod in pods:
            for container in pod["spec"]["containers"]:
                try:
                    text = self.node.logs(pod["metadata"]["name"], self.namespace, container["name"])
                except Exception as exc:  # a container that never started has no log: say why instead
                    text = f"(no log: {exc})"
                out.append(f"--- {pod['metadata']['name']}/{container['name']}\n{text[-3000:]}")
        return "\n".join(out)

    def wait_app(self, name: str, what: str, predicate: Any, timeout: float = 240) -> dict[str, Any]:
        """Watch Argo CD Application `name` until predicate(app); a timeout shows its status and Argo CD's logs."""
        try:
            return self.node.wait(ARGOCD_API, "Application", name, self.namespace, predicate, timeout=timeout,
                                  what=f"Argo CD Application {name}: {what}")
        except BedError as exc:
            raise BedError(f"{exc}\n{self.logs()}") from exc

    def uninstall(self) -> None:
        """Delete what the install made (its namespace and cluster-wide RBAC; the CRDs stay, as the bed's own)."""
        for obj in self.objects:
            if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                self.node.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
        self.node.delete("v1", "Namespace", self.namespace)
        self.node.wait_gone("v1", "Namespace", self.namespace, None, timeout=180)


def install_argocd(node: NodeTestBed, images: Mapping[str, str], namespace: str = "argocd",
                   timeout: float = 300) -> PodArgoCD:
    """Import `images` (our name -> podman ref) into the node, apply Argo CD's install there and wait until every
    component is Ready; returns the running install (on a failure, what was applied is deleted again: the node is
    shared)."""
    refs = {name: node.import_image(ref) for name, ref in images.items()}
    install = PodArgoCD(node, namespace, install_objects_for_node(refs, namespace), {})
    try:
        _apply_and_wait(install, timeout)
    except BaseException:
        install.uninstall()
        raise
    return install


def _apply_and_wait(install: PodArgoCD, timeout: float) -> None:
    node, namespace = install.node, install.namespace
    rank = {kind: i for i, kind in enumerate(_ORDER)}
    first = sorted((o for o in install.objects if o["kind"] not in WORKLOADS),
                   key=lambda o: rank.get(o["kind"], len(rank)))
    node.ensure_namespace(namespace)
    for obj in first:
        node.apply(obj, namespace=namespace, field_manager=FIELD_MANAGER)
        if obj["kind"] == "CustomResourceDefinition":
            node.wait_condition("apiextensions.k8s.io/v1", "CustomResourceDefinition", obj["metadata"]["name"],
                                None, "Established")
    started: dict[str, float] = {}
    workloads = [o for o in install.objects if o["kind"] in WORKLOADS]
    for obj in workloads:
        node.apply(obj, namespace=namespace, field_manager=FIELD_MANAGER)
        started[obj["metadata"]["name"]] = time.time()
    deadline = time.monotonic() + timeout
    try:
        for obj in workloads:
            name = obj["metadata"]["name"]
            node.wait("apps/v1", obj["kind"], name, namespace, workload_ready,
                      timeout=max(10.0, deadline - time.monotonic()), what=f"{obj['kind']} {name} Ready")
    except BedError as exc:
        raise BedError(f"{exc}\n{install.logs()}") from exc
    install.ready_seconds = ready_seconds(node, namespace, started)
    # Ready is the kubelet's view; the server's API answering is what a user logs in to.
    wait_for("argocd-server's API", lambda: server_answers(node, install.server), 60)


def ready_seconds(node: NodeTestBed, namespace: str, applied: Mapping[str, float]) -> dict[str, float]:
    """Workload -> seconds from its apply (wall clock) to its last pod's Ready transition (the kubelet's
    timestamp, whole seconds), by the pods' app.kubernetes.io/name label."""
    out: dict[str, float] = {}
    for pod in node.http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]:
        name = pod["metadata"].get("labels", {}).get("app.kubernetes.io/name", "")
        ready = [c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
        if name in applied and ready:
            at = datetime.datetime.fromisoformat(ready[0]["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
            out[name] = max(out.get(name, 0.0), at - applied[name])
    return out


def server_answers(node: NodeTestBed, url: str) -> bool | None:
    try:
        return True if node.request("GET", f"{url}/healthz", timeout=5).status_code == 200 else None
    except RequestFailed:
        return None
