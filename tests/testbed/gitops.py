"""The GitOps loop on loopback: a git server, Redis, our plugin under Argo CD's plugin server, Argo CD's
repo-server and application controller (API server on demand), the AppRafter operator and admission webhook, and
the test bed's kube-apiserver with Argo CD's and our CRDs. Shared by the loop tests (tests/argocd) and
scripts/demo_gitops.sh.

Every component talks to the API server as its own identity, as in a cluster: Argo CD's components and the
operator as their ServiceAccounts, the person who approves with the CLI as the test bed's token user PERSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

from lifecycle.crd import OPERATOR_CRDS
from renderer.context import GATEWAY_NAMESPACE
from renderer.crds import crd_documents
from renderer.emit import dump_stream
from renderer.manifests import KINDS
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL
from tests.admission.cluster import Webhook, chart_objects, configurations, unregister
from tests.admission.reviews import OPERATOR, parser_cr
from tests.reconciler.operator_proc import Operator, records_namespace_for
from tests.testbed.argocd import (
    ARGOCD_API,
    ARGOCD_VERSIONS,
    IN_CLUSTER,
    ArgoCD,
    LocalUser,
    Settings,
    configmaps_of,
    operation_phase,
    start_argocd,
    sync_status,
    with_component,
)
from tests.testbed.cmp import CmpServer, start_cmp_server
from tests.testbed.gitserver import GitServer, start_git_server
from tests.testbed.kube import PERSON, ApplyRejected, KubeTestBed
from tests.testbed.node import NodeTestBed, RequestFailed, has_condition
from tests.testbed.procs import BedError, wait_for
from tests.testbed.redis import RedisServer, start_redis
from toolchain.tools import ToolError, resolve

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "argocd"
APPRAFTER_API = "apprafter.io/v1alpha1"
ARGOCD_NAMESPACE = "argocd-loop"  # not `argocd`: other test-bed tests may use that namespace for their own ends
CHART_ARGOCD_NAMESPACE = "argocd"  # where the operator chart's Role for Argo CD's Applications is
APPROVER = LocalUser("approver", "role:apprafter-approver")
VIEWER = LocalUser("viewer", "role:readonly")
FIELD_MANAGER = "apprafter-gitops-loop"
OPERATOR_NAMESPACE, OPERATOR_ACCOUNT = OPERATOR.split(":")[2:]
OPERATOR_RBAC, APPROVER_ROLE = "apprafter:operator", "apprafter:migration-approver"
# The chart's Role in the Gateways' namespace: the public Gateway's listeners (reconciler.gateway_listeners)
LISTENERS_RBAC = "apprafter:operator:listeners"
RBAC_KINDS = frozenset({"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})


@dataclasses.dataclass
class GitOpsLoop:
    """Every part of the loop, running; `namespaces` are the destinations the operator watches and the webhook
    guards. `timings` collects what each step cost (seconds), by step name."""

    kube: KubeTestBed
    git: GitServer
    redis: RedisServer
    cmp: CmpServer
    argocd: ArgoCD
    webhook: Webhook
    operator: Operator
    namespaces: tuple[str, ...]
    person_kubeconfig: Path
    timings: dict[str, float] = dataclasses.field(default_factory=dict)

    def application(self, name: str, repo: str, destination: str, *, environment: str | None = None,
                    revision: str = "main") -> dict[str, Any]:
        """An Argo CD Application rendering `repo` with our plugin into namespace `destination`, auto-synced
        with prune; the environment as the plugin's `environment` parameter, else from the `<app>-<env>` name."""
        plugin: dict[str, Any] = {"name": self.cmp.plugin_name}
        if environment is not None:
            plugin["parameters"] = [{"name": "environment", "string": environment}]
        return {"apiVersion": ARGOCD_API, "kind": "Application",
                "metadata": {"name": name, "namespace": self.argocd.namespace},
                "spec": {"project": "default",
                         "source": {"repoURL": self.git.url(repo), "path": ".", "targetRevision": revision,
                                    "plugin": plugin},
                         "destination": {"server": IN_CLUSTER, "namespace": destination},
                         "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                                        "syncOptions": ["CreateNamespace=true"]}}}

    def wait(self, name: str, what: str, predicate: Callable[[dict[str, Any]], bool],
             timeout: float = 120.0) -> dict[str, Any]:
        """Poll Argo CD Application `name` until predicate(app); on timeout the error has every log's tail."""
        try:
            return self.argocd.wait(name, what, predicate, timeout)
        except BedError as exc:
            raise BedError(f"{exc}\n--- operator\n{self.operator.log()[-6000:]}\n--- webhook\n"
                           f"{self.webhook.log()[-3000:]}") from exc

    def wait_synced(self, name: str, revision: str, timeout: float = 120.0) -> dict[str, Any]:
        """Until Argo CD reports `name` Synced at `revision` and its sync operation Succeeded."""
        return self.wait(name, f"Synced at {revision[:8]}", lambda app: sync_status(app)[0] == "Synced"
                         and sync_status(app)[2] == revision and operation_phase(app) == "Succeeded", timeout)

    def wait_health(self, name: str, revision: str, health: str, timeout: float = 120.0) -> dict[str, Any]:
        """Until Argo CD reports `name` Synced at `revision` with app health `health`."""
        return self.wait(name, f"Synced at {revision[:8]} and {health}",
                         lambda app: sync_status(app) == ("Synced", health, revision), timeout)

    def push(self, repo: str, files: Mapping[str, str], message: str, *apps: str) -> str:
        """Commit to `repo`, then tell Argo CD as its git webhook would (refresh `apps`); returns the sha."""
        sha = self.git.commit(repo, files, message)
        for app in apps:
            self.argocd.refresh(app)
        return sha

    def apprafter_application(self, name: str, namespace: str) -> dict[str, Any] | None:
        return self.kube.get(APPRAFTER_API, "Application", name, namespace)

    def migration_plan(self, name: str, namespace: str) -> dict[str, Any] | None:
        return self.kube.get(APPRAFTER_API, "MigrationPlan", name, namespace)

    def approve(self, plan: str, namespace: str) -> subprocess.CompletedProcess[str]:
        """`apprafter migration approve PLAN -n NAMESPACE`, as the person PERSON runs it with their kubeconfig."""
        argv = [sys.executable, "-m", "apprafter", "migration", "approve", plan, "-n", namespace,
                "--kubeconfig", str(self.person_kubeconfig)]
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env=env)

    def operator_paused(self) -> AbstractContextManager[None]:
        return paused(self.operator)

    def stop(self) -> None:
        """Tear everything down, our objects in the loop's namespaces included (each step runs even if one
        before it fails)."""
        with ExitStack() as stack:
            stack.callback(forget_access, self.kube, self.namespaces)  # last: a later `helm install` makes its own
            stack.callback(self.redis.stop)
            stack.callback(self.git.stop)
            stack.callback(self.cmp.stop)
            stack.callback(self.webhook.stop)
            stack.callback(delete_ours, self.kube, self.namespaces, children=True)
            stack.callback(self.operator.stop)
            stack.callback(self.argocd.stop)
            stack.callback(delete_argocd_applications, self.kube, self.argocd.namespace)
            stack.callback(unregister, self.kube)


def rolled_out(bed: KubeTestBed, namespace: str, name: str, image: str | None = None) -> bool:
    """Deployment `name` has rolled out (`image`, if given): its generation seen, every replica updated and
    available, and every pod left running it and Ready (on the node tier, where pods run)."""
    deployment = bed.get("apps/v1", "Deployment", name, namespace) or {}
    status, spec = deployment.get("status") or {}, deployment.get("spec") or {}
    containers = spec.get("template", {}).get("spec", {}).get("containers") or [{}]
    if not deployment or (image is not None and containers[0].get("image") != image):
        return False
    want = spec.get("replicas", 1)
    if not (status.get("observedGeneration") == deployment["metadata"]["generation"]
            and status.get("updatedReplicas", 0) == status.get("availableReplicas", 0) == status.get("replicas", 0)
            == want and has_condition(deployment, "Available")):
        return False
    pods = bed.http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
    running = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return len(running) == want and all(p["spec"]["containers"][0]["image"] == containers[0]["image"]
                                        and has_condition(p, "Ready") for p in running)


def delete_ours(kube: KubeTestBed, namespaces: Sequence[str], *, children: bool = False) -> None:
    """Delete every Application and MigrationPlan of ours in `namespaces`, so that no later operator in the session
    picks them up; with `children`, also every object the operator made there (the test bed runs no garbage
    collector), so that the namespaces can be used again from nothing (the loop runs once per Argo CD version)."""
    for namespace in namespaces:
        for kind in ("MigrationPlan", "Application"):
            delete_all(kube, APPRAFTER_API, kind, namespace)
        for made in KINDS if children else ():
            delete_all(kube, made.api_version, made.kind, namespace, f"{MANAGED_BY_LABEL}={MANAGED_BY}")


def delete_all(kube: KubeTestBed, api_version: str, kind: str, namespace: str, selector: str = "") -> None:
    """Delete every object of `kind` in `namespace` (matching the label `selector`): one delete-collection request."""
    resp = kube.http.delete(kube.resource_for(api_version, kind).path(None, namespace),
                            params={"labelSelector": selector} if selector else None)
    if resp.status_code not in (200, 404):
        raise BedError(f"deleting {kind}s in {namespace}: {resp.status_code} {resp.text[:500]}")


def delete_argocd_applications(kube: KubeTestBed, namespace: str) -> None:
    """Every Argo CD Application in `namespace` deleted, also one holding Argo CD's cascade finalizer (`apprafter app
    add` sets it) once Argo CD no longer runs to take it off: the loop's next run uses the same namespace."""
    delete_all(kube, ARGOCD_API, "Application", namespace)
    path = kube.resource_for(ARGOCD_API, "Application").path(None, namespace)
    for app in kube.http.get(path).json().get("items") or []:
        if app["metadata"].get("finalizers"):
            kube.http.patch(f"{path}/{app['metadata']['name']}", json={"metadata": {"finalizers": None}},
                            headers={"Content-Type": "application/merge-patch+json"})


@contextmanager
def paused(operator: Operator) -> Iterator[None]:
    """The operator stopped (SIGSTOP) for the block, then resumed: what the cluster and Argo CD show while it
    has not got to a change yet."""
    operator.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        operator.signal(signal.SIGCONT)


def install_apprafter_crds(kube: KubeTestBed, workdir: Path) -> list[str]:
    """Our CRDs as `apprafter crds` prints them (Argo CD's come with the test bed); waits until served."""
    path = workdir / "apprafter-crds.yaml"
    path.write_text(dump_stream(crd_documents(OPERATOR_CRDS)))
    return kube.install_crds([path])


def plugin_path() -> list[str]:
    """What the sidecar image has on PATH: `apprafter` (this interpreter's venv) and the pinned cue."""
    try:
        cue = resolve("cue")
    except ToolError as exc:
        import pytest

        pytest.fail(f"the loop needs cue: {exc}", pytrace=False)
    return [str(Path(sys.executable).parent), str(cue.parent)]


class NodeWebhook(Webhook):
    """The webhook inside a node bed's network namespace, on its 127.0.0.1, where the node's API server calls it
    (nothing of the namespace reaches the host's loopback)."""

    def __init__(self, workdir: Path, node: NodeTestBed) -> None:
        super().__init__(workdir)
        self.node = node

    def argv(self) -> list[str | os.PathLike[str]]:
        return [*self.node.nsenter(*super().argv())]

    def ready(self) -> bool | None:
        with contextlib.suppress(RequestFailed):
            return self.node.request("GET", f"{self.base_url}/readyz", ca=self.ca.pem).status_code == 200 or None
        return None


def start_webhook(kube: KubeTestBed, workdir: Path, namespaces: Sequence[str]) -> Webhook:
    """`apprafter webhook` registered as the operator chart registers it, limited to `namespaces` (the
    API server is the session's: a failurePolicy Fail webhook must not reach other tests' objects); returns once
    the API server calls it. On a node bed it runs inside the bed's network namespace."""
    workdir.mkdir(parents=True, exist_ok=True)
    webhook = NodeWebhook(workdir, kube) if isinstance(kube, NodeTestBed) else Webhook(workdir)
    webhook.start()
    try:
        selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                          "values": sorted(namespaces)}]}
        for config in configurations(webhook.base_url, webhook.ca.pem):
            for hook in config["webhooks"]:
                hook["namespaceSelector"] = selector
            kube.apply(config, field_manager=FIELD_MANAGER)
        canary = parser_cr(namespaces[0])
        canary["spec"]["base"]["env"]["not-a-key"] = "x"
        kube.ensure_namespace(namespaces[0])

        def refused() -> bool | None:
            try:
                kube.apply(canary, dry_run=True, field_manager=FIELD_MANAGER)
            except ApplyRejected as exc:
                return True if "applications.apprafter.io" in str(exc) else None
            return None

        wait_for("the API server to call the admission webhook", refused, 30, webhook.process, interval=0.1)
        return webhook
    except BaseException:
        unregister(kube)
        webhook.stop()
        raise


def start_operator(kube: KubeTestBed, workdir: Path, namespaces: Sequence[str],
                   argocd_namespace: str = ARGOCD_NAMESPACE) -> Operator:
    """`apprafter operator` as its ServiceAccount with the operator chart's own RBAC (what a real install grants
    it, so the loop also proves those permissions are enough), watching `namespaces`, with the loop's Argo CD in
    `argocd_namespace` (its repo-creds derived there, its Applications read by the credential gate), no leader
    election; returns once it is ready."""
    watched = [arg for ns in namespaces for arg in ("--namespace", ns)]
    # No PlatformStack controller: the loop has no PlatformStack (tests/reconciler/test_platformstack_cluster.py
    # proves that controller's permissions in `argocd`).
    return chart_operator(kube, workdir, ("--no-leader-elect", "--no-platform-stack", "--max-backoff", "5",
                                          "--argocd-namespace", argocd_namespace, *watched), name="gitops-loop",
                          argocd_namespace=argocd_namespace).start()


def chart_operator(kube: KubeTestBed, workdir: Path, args: Sequence[str],
                   namespaces: Sequence[str] = (OPERATOR_NAMESPACE,), name: str = "operator",
                   argocd_namespace: str = CHART_ARGOCD_NAMESPACE) -> Operator:
    """An operator (not started) as its ServiceAccount with the chart's RBAC in `namespaces`, its records in a
    namespace of their own where the chart's Role is bound as in the release's namespace, the chart's Argo CD Role
    in `argocd_namespace`."""
    records = records_namespace_for(name)
    return Operator(kube, workdir, args, name=name, records_namespace=records,
                    kubeconfig=operator_kubeconfig(kube, workdir / "sa", namespaces, records=records,
                                                   argocd=argocd_namespace))


def operator_kubeconfig(kube: KubeTestBed, workdir: Path, namespaces: Sequence[str] = (OPERATOR_NAMESPACE,),
                        records: str | None = None, argocd: str = CHART_ARGOCD_NAMESPACE) -> Path:
    """A kubeconfig for the operator's ServiceAccount (a TokenRequest token, as its pod mounts it), bound by the
    operator chart's own RBAC objects, cluster-wide, in `namespaces` and in `argocd` (the SourceCredential
    controller watches Argo CD's Applications there), and nothing else; with `records`, the chart's Role of the
    release namespace is bound there too (the operator's --records-namespace); with `argocd`, the chart's Role of
    Argo CD's namespace is bound there too (an Argo CD installed elsewhere, as the loop's `argocd-loop`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    token = kube.service_account_token(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT)
    objects = chart_rbac(OPERATOR_RBAC, tuple(dict.fromkeys((*namespaces, CHART_ARGOCD_NAMESPACE))))
    objects += chart_rbac(LISTENERS_RBAC, (GATEWAY_NAMESPACE,))
    if records is not None:
        objects += [{**o, "metadata": {**o["metadata"], "namespace": records}} for o in chart_rbac(OPERATOR_RBAC)
                    if o["metadata"].get("namespace") == OPERATOR_NAMESPACE]
    if argocd != CHART_ARGOCD_NAMESPACE:
        objects += moved_argocd_rbac(argocd)
    for obj in objects:
        kube.ensure_namespace(obj["metadata"].get("namespace") or OPERATOR_NAMESPACE)
        kube.apply(obj, field_manager=FIELD_MANAGER)
    return kube.kubeconfig_for(workdir / "operator.kubeconfig", token, OPERATOR)


def moved_argocd_rbac(namespace: str) -> list[dict[str, Any]]:
    """The chart's Role and RoleBinding of Argo CD's namespace, in `namespace` instead."""
    return [{**o, "metadata": {**o["metadata"], "namespace": namespace}}
            for o in chart_rbac(OPERATOR_RBAC, (CHART_ARGOCD_NAMESPACE,))
            if o["metadata"].get("namespace") == CHART_ARGOCD_NAMESPACE]


def forget_access(kube: KubeTestBed, namespaces: Sequence[str]) -> None:
    """Delete the operator's ServiceAccount and the chart's RBAC objects the loop applied (operator_kubeconfig,
    person_kubeconfig): on a shared bed the chart's own `helm install` would refuse to adopt them."""
    granted = [*chart_rbac(OPERATOR_RBAC, tuple(dict.fromkeys((OPERATOR_NAMESPACE, *namespaces,
                                                                CHART_ARGOCD_NAMESPACE)))),
               *chart_rbac(LISTENERS_RBAC, (GATEWAY_NAMESPACE,)),
               *[o for o in chart_rbac(APPROVER_ROLE) if o["kind"] == "ClusterRole"],
               *moved_argocd_rbac(ARGOCD_NAMESPACE)]
    for obj in granted:
        kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
    kube.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", f"{APPROVER_ROLE}-gitops-loop")
    kube.delete("v1", "ServiceAccount", OPERATOR_ACCOUNT, OPERATOR_NAMESPACE)


def chart_rbac(name: str, namespaces: Sequence[str] = (OPERATOR_NAMESPACE,)) -> list[dict[str, Any]]:
    """The chart's RBAC objects called `name`, cluster-wide and in `namespaces` (by default not Argo CD's: the
    loop's Argo CD is argocd-loop)."""
    return [o for o in chart_objects() if o["kind"] in RBAC_KINDS and o["metadata"]["name"] == name
            and o["metadata"].get("namespace") in (None, *namespaces)]


def person_kubeconfig(kube: KubeTestBed, workdir: Path) -> Path:
    """PERSON's kubeconfig, bound to the operator chart's approver ClusterRole and nothing else."""
    if PERSON not in kube.user_tokens:
        raise BedError(f"the loop needs the token user {PERSON}: start_kube(..., users={{PERSON: ()}})")
    [role] = [o for o in chart_rbac(APPROVER_ROLE) if o["kind"] == "ClusterRole"]
    kube.apply(role, field_manager=FIELD_MANAGER)
    kube.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{role['metadata']['name']}-gitops-loop"},
                "subjects": [{"kind": "User", "name": PERSON, "apiGroup": "rbac.authorization.k8s.io"}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": role["metadata"]["name"]}}, field_manager=FIELD_MANAGER)
    return kube.kubeconfig_for(workdir / "person.kubeconfig", kube.user_tokens[PERSON], PERSON)


def start_loop(kube: KubeTestBed, workdir: Path, namespaces: Sequence[str], *,
               namespace: str = ARGOCD_NAMESPACE, version: str = ARGOCD_VERSIONS[0]) -> GitOpsLoop:
    """Start every part of the loop but Argo CD's API server (started on first use), Argo CD at `version`, for Argo
    CD Applications in `namespace` deploying into `namespaces`; stop() tears it all down."""
    workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        install_apprafter_crds(kube, workdir)
        webhook = start_webhook(kube, workdir / "webhook", (namespace, *namespaces))
        stack.callback(webhook.stop)
        stack.callback(unregister, kube)
        operator = start_operator(kube, workdir / "operator", namespaces)
        stack.callback(operator.stop)
        person = person_kubeconfig(kube, workdir)
        redis = start_redis(workdir / "redis")
        stack.callback(redis.stop)
        git = start_git_server(workdir / "git")
        stack.callback(git.stop)
        plugin_dir, sockets = workdir / "plugin", workdir / "plugins"
        plugin_dir.mkdir(exist_ok=True)
        sockets.mkdir(exist_ok=True)
        shutil.copy(REPO / "plugin.yaml", plugin_dir / "plugin.yaml")
        cmp = start_cmp_server(plugin_dir, workdir / "cmp", path=plugin_path(), socket_dir=sockets, version=version)
        stack.callback(cmp.stop)
        # Argo CD's install.yaml with deploy/argocd as a component, as users build it
        configmaps = configmaps_of(with_component(DEPLOY, version))
        settings = Settings(configmaps, (APPROVER, VIEWER))
        argocd = start_argocd(kube, workdir / "argocd", redis=redis.address, plugin_socket_dir=sockets,
                              settings=settings, namespace=namespace, version=version)
        stack.pop_all()
    return GitOpsLoop(kube, git, redis, cmp, argocd, webhook, operator, tuple(namespaces), person)
