"""The platform stack installed from zero on a node bed as a cluster admin installs it, step by step, for the
node-tier proof (tests/images/test_bootstrap_node.py) and its benchmark (scripts/bench_bootstrap.py): releases
published the release pipeline's way into a registry pods reach, `apprafter cluster-bootstrap` run on the node, Argo
CD (pods from our images) syncing the umbrella, the operator and webhook as pods, a user app through the plugin.

Where the node lacks what a cluster has (docs/node-tier.md "The stack from zero on the node"):
- the registry: Debian's docker-registry with a login, pushed to on the host's loopback and served a second time on
  the node's address (tests/testbed/node_registry.py `serve_at_node_ip`), where pods, and the CLI run on the node,
  reach it. The stack is built as a fork publishing there builds it (`stack_releases.build_releases(registry=)`);
- images: containerd pulls nothing (no registry it reaches over HTTPS); our images are imported and tagged with the
  names the stack gives them (`imagePullPolicy: IfNotPresent`, the chart's default);
- cert-manager and its cainjector: played (tests/testbed/cert_manager.py), their CRDs applied from the pin as the
  cert-manager chart would; Cilium's CRDs likewise (the default-deny chart's kind; no Cilium agent enforces it).
Argo CD's components find each other by name through the node's cluster DNS (tests/testbed/node_dns.py).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from platform_stack import umbrella
from renderer.emit import dump_stream
from tests.argocd.objects import APP_FILE, served
from tests.testbed.argocd import ARGOCD_API, IN_CLUSTER, operation_phase, sync_status
from tests.testbed.argocd_pods import PodArgoCD, manifest_for_node, pod_templates, server_answers, workload_ready
from tests.testbed.cert_manager import CERT_MANAGER_API, inject_ca, issue_certificate, mark_ready
from tests.testbed.crds import sealed_secret_crd
from tests.testbed.distribution import AuthRegistry, start_distribution
from tests.testbed.gitops import rolled_out
from tests.testbed.gitserver import GitServer, start_git_server
from tests.testbed.node import NodeTestBed
from tests.testbed.node_registry import NodeRegistry, serve_at_node_ip
from tests.testbed.procs import BedError, wait_for
from tests.testbed.stack_releases import KeyPair, Publisher, Release, build_releases, key_pairs
from tests.testbed.traefik import CLASS
from toolchain.tools import crd_files

REPO = Path(__file__).resolve().parents[2]
APPRAFTER = [sys.executable, "-m", "apprafter"]
NAMESPACE = "apprafter-system"  # the PlatformStack's, the operator's and the webhook's
ARGOCD_NAMESPACE = umbrella.NAMESPACE
PROJECT = "apprafter"  # the registry path the release pipeline publishes under: <host>/apprafter/...
VERSION, NEXT = "1.0.0", "1.1.0"
# 1.1.0 raises the operator's memory limit, a change its compatibility entry calls breaking: the upgrade waits for
# a MigrationPlan.
NEXT_LIMIT = "640Mi"
RELEASES: list[Release] = [(VERSION, None, {}),
                           (NEXT, ("apprafter-operator", 'limits: memory: "512Mi"', f'limits: memory: "{NEXT_LIMIT}"'),
                            {"apprafter-operator": "breaking"})]
REGISTRY_SECRET = "registry-credentials"
# The solo tier's default components whose charts are on public repositories this machine cannot reach: turned off
# through the PlatformStack's overrides, as an admin leaves out what they do not use. The required ones stay.
LEFT_OUT = ("backstage", "capsule", "cloudnative-pg", "keda", "sealed-secrets")
UNREACHABLE_REQUIRED = ("argocd", "cert-manager", "cilium")
OURS = ("apprafter-admission", "apprafter-operator", "gateway", "gateway-api", "network-policies", "service-providers")
# CRDs the node gets from components that cannot run here, from the pins (tools/fetch-crds.sh).
STAND_IN_CRDS = ("cert-manager", "cilium")
USER_NAMESPACE, USER_APP, ARGO_APP = "boot-hello", "hello", "hello-boot"
DOMAIN = "example.com"  # the platform's domain (`--domain`); never resolved outside the node's namespace
PLUGIN = "apprafter-cue-v1"
WEBHOOK = "apprafter-admission"


@dataclasses.dataclass
class StackOnNode:
    """What the run set up and what it saw: the registry on both sides, the releases, the CLI's answer, timings."""

    node: NodeTestBed
    workdir: Path
    registry: AuthRegistry
    served: NodeRegistry
    publisher: Publisher
    published: list[str] = dataclasses.field(default_factory=list)  # `tools/images.sh publish` lines (the charts)
    refs: dict[str, str] = dataclasses.field(default_factory=dict)  # image name -> what pods run
    bootstrap: subprocess.CompletedProcess[str] | None = None
    argocd: PodArgoCD | None = None
    git: GitServer | None = None
    revision: str = ""
    timings: dict[str, float] = dataclasses.field(default_factory=dict)  # step -> seconds, in order
    loads: dict[str, float] = dataclasses.field(default_factory=dict)  # step -> 1-minute load average at its end

    @property
    def repository(self) -> str:
        """The stack's repository as the node sees it (what the user passes to cluster-bootstrap)."""
        return f"{self.served.host}/{PROJECT}/platform-stack"

    @property
    def charts(self) -> str:
        return f"{self.served.host}/{PROJECT}/charts"

    def digest(self, version: str = VERSION) -> str:
        return self.publisher.digest(PROJECT, version)

    def inner_kubeconfig(self) -> Path:
        """The admin's kubeconfig naming the API server at the node's own address (as on the node itself)."""
        path = self.workdir / "node-admin.kubeconfig"
        if not path.exists():
            config = yaml.safe_load(self.node.kubeconfig.read_text())
            for cluster in config["clusters"]:
                cluster["cluster"]["server"] = f"https://{self.node.node_ip}:6443"
            path.write_text(yaml.safe_dump(config))
            path.chmod(0o600)
        return path

    def on_node(self, *args: str, env: Mapping[str, str] | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """`apprafter ARGS` run on the node (its network namespace), logged in to the node's registry."""
        return subprocess.run(self.node.nsenter(*APPRAFTER, *args), capture_output=True, text=True, timeout=timeout,
                              check=False, cwd=self.workdir, env={**self.publisher.env, **self.login(), **(env or {})})

    def login(self) -> dict[str, str]:
        """DOCKER_CONFIG with the reader's login for the node's side of the registry."""
        directory = self.workdir / "node-docker"
        directory.mkdir(exist_ok=True)
        auth = base64.b64encode(f"{self.registry.reader}:{self.registry.reader_password}".encode()).decode()
        (directory / "config.json").write_text(json.dumps({"auths": {self.served.host: {"auth": auth}}}))
        return {"DOCKER_CONFIG": str(directory)}

    def stop(self) -> None:
        if self.git is not None:
            self.git.stop()
        self.served.stop()
        self.registry.stop()


class Timer:
    """Records each step's wall time into `timings` and the 1-minute load average at its end into `loads` (a step
    that fails records nothing)."""

    def __init__(self, timings: dict[str, float], loads: dict[str, float]) -> None:
        self.timings, self.loads = timings, loads

    def step(self, name: str, started: float) -> None:
        self.timings[name] = time.monotonic() - started
        self.loads[name] = os.getloadavg()[0]


def publish(node: NodeTestBed, workdir: Path, images: Mapping[str, str]) -> StackOnNode:
    """The registry (host side + the node's address), our charts by `tools/images.sh publish REPO chart` (what `make
    publish` runs after the images) and the stack releases pushed with `stack push`; VERSION signed with the release
    key, NEXT pushed, not yet signed. Imports `images` (name -> podman ref) into the node meanwhile."""
    started = time.monotonic()
    registry = start_distribution(workdir / "registry", "htpasswd")
    try:
        served = serve_at_node_ip(registry, node, workdir / "registry-node")
    except BaseException:
        registry.stop()
        raise
    keys: dict[str, KeyPair] = key_pairs(_mkdir(workdir / "keys"), ("release",))
    charts = build_releases(_mkdir(workdir / "releases"), RELEASES, registry=f"{served.host}/{PROJECT}")
    stack = StackOnNode(node, workdir, registry, served, Publisher(registry, charts, keys, _mkdir(workdir / "pub")))
    timer = Timer(stack.timings, stack.loads)
    try:
        stack.publisher.publish(PROJECT, [(VERSION, "release"), (NEXT, None)])
        private, _, password = keys["release"]
        proc = subprocess.run(["tools/images.sh", "publish", f"{registry.url}/{PROJECT}", "chart"], cwd=REPO,
                              capture_output=True, text=True, timeout=600, check=False,
                              env={**stack.publisher.env, "COSIGN_KEY": str(private), "COSIGN_PASSWORD": password,
                                   "PLAIN_HTTP": "1", "PYTHON": sys.executable})
        if proc.returncode != 0:
            raise BedError(f"tools/images.sh publish: exit {proc.returncode}: {proc.stderr[-3000:]}")
        stack.published = proc.stdout.splitlines()
        timer.step("publish (stack releases built, charts and stack pushed and signed)", started)
        started = time.monotonic()
        stack.refs = import_images(stack, images)
        timer.step("import our images into the node's containerd", started)
        return stack
    except BaseException:
        stack.stop()
        raise


def import_images(stack: StackOnNode, images: Mapping[str, str]) -> dict[str, str]:
    """Each image into the node's containerd; the operator's also under the name the stack's charts give it."""
    refs = {name: stack.node.import_image(ref) for name, ref in images.items()}
    local = refs["apprafter-operator"]
    named = f"{stack.served.host}/{PROJECT}/apprafter-operator:{local.rpartition(':')[2]}"
    stack.node.ctr("images", "tag", "--force", local, named, check=True)
    refs["apprafter-operator@stack"] = named
    return refs


def prerequisites(stack: StackOnNode) -> None:
    """What the cluster admin writes before the loader (docs/install.md): the namespaces, Argo CD's repository
    Secrets for the private plain-HTTP registry (the umbrella: type oci; the component charts: Helm over OCI), the
    registry login the PlatformStack reads; and the CRDs of what cannot run here (the stand-ins' part)."""
    node, registry = stack.node, stack.registry
    for namespace in (ARGOCD_NAMESPACE, NAMESPACE):
        node.ensure_namespace(namespace)
    login = {"username": registry.reader, "password": registry.reader_password, "insecureOCIForceHttp": "true"}
    for name, data in (("platform-stack-repository", {"type": "oci", "url": f"oci://{stack.repository}"}),
                       ("apprafter-charts-repository", {"type": "helm", "url": stack.charts, "enableOCI": "true",
                                                        "name": "apprafter-charts"})):
        node.apply({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": ARGOCD_NAMESPACE,
                                 "labels": {"argocd.argoproj.io/secret-type": "repository"}},
                    "stringData": {**data, **login}}, field_manager="platform-admin")
    reader = base64.b64encode(f"{registry.reader}:{registry.reader_password}".encode()).decode()
    config = json.dumps({"auths": {stack.served.host: {"auth": reader}}}).encode()
    node.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
                "metadata": {"name": REGISTRY_SECRET, "namespace": NAMESPACE},
                "data": {".dockerconfigjson": base64.b64encode(config).decode()}}, field_manager="platform-admin")
    # the SealedSecret CRD as the left-out sealed-secrets component would install it (its controller runs beside
    # the node for the shop: test_bootstrap_node)
    node.install_crds([*(f for f in crd_files() if f.parent.name.split("-v")[0] in STAND_IN_CRDS), sealed_secret_crd()])


def argocd_manifest(stack: StackOnNode) -> Path:
    """The Argo CD manifest the admin points the loader at (install.yaml of the pin, our images, the node's needs)."""
    images = {name: stack.refs[name] for name in ("argocd", "redis")}
    path = stack.workdir / "argocd-install.yaml"
    path.write_text(dump_stream(manifest_for_node(images)))
    return path


def cluster_bootstrap(stack: StackOnNode, *args: str, version: str = VERSION) -> subprocess.CompletedProcess[str]:
    """`apprafter cluster-bootstrap` as the admin runs it on the node."""
    _, public, _ = stack.publisher.keys["release"]
    return stack.on_node("cluster-bootstrap", f"oci://{stack.repository}", "--version", version, "--key", str(public),
                         "--tier", "solo", "--domain", DOMAIN, "--registry-secret", REGISTRY_SECRET,
                         "--plain-http", "--argocd-manifest", str(argocd_manifest(stack)), "--gateway-class", CLASS,
                         "--sidecar-image", stack.refs["argocd-cue-cmp"],
                         "--kubeconfig", str(stack.inner_kubeconfig()), *args)


CHECK_INTERVAL = "10s"  # the controller's floor: the upgrade below is found by a check, not by waiting 6 h


def operator_values(stack: StackOnNode) -> dict[str, Any]:
    """The admin's values for the operator: its image updates may ask the registry on the node's network, which
    serves plain HTTP (as the node's containerd is told: node_registry)."""
    return {"imageUpdates": {"insecureRegistries": [stack.served.host]}}


def leave_out_optional(stack: StackOnNode) -> None:
    """The admin turns off the default components it cannot (or does not want to) run (PlatformStack overrides),
    gives the operator its registry settings, and has the channel checked every CHECK_INTERVAL."""
    patch = {"spec": {"overrides": {**{name: {"enabled": False} for name in LEFT_OUT},
                                    "apprafter-operator": {"values": operator_values(stack)}},
                      "source": {"checkInterval": CHECK_INTERVAL}}}
    stack.node.kubectl("-n", NAMESPACE, "patch", "platformstack", "default", "--type", "merge", "-p", json.dumps(patch))


def wait_for_argocd(stack: StackOnNode, timeout: float = 300) -> PodArgoCD:
    """Every workload of the manifest Ready (what the loader installed), argocd-server's API answering."""
    objects = manifest_for_node({name: stack.refs[name] for name in ("argocd", "redis")})
    argocd = PodArgoCD(stack.node, ARGOCD_NAMESPACE, objects, {})
    deadline = time.monotonic() + timeout
    try:
        for obj in objects:
            if pod_templates(obj) is not None:
                stack.node.wait("apps/v1", obj["kind"], obj["metadata"]["name"], ARGOCD_NAMESPACE, workload_ready,
                                timeout=max(10.0, deadline - time.monotonic()),
                                what=f"{obj['kind']} {obj['metadata']['name']} Ready")
    except BedError as exc:
        raise BedError(f"{exc}\n{argocd.logs()}") from exc
    # Ready is the kubelet's view; the server's API answering is what a user logs in to.
    wait_for("argocd-server's API", lambda: server_answers(stack.node, argocd.server), 60)
    stack.argocd = argocd
    return argocd


def component_apps(node: NodeTestBed) -> dict[str, dict[str, Any]]:
    """The component Applications Argo CD applied from the umbrella, by name."""
    info = node.resource_for(ARGOCD_API, "Application")
    items = node.http.get(info.path(None, ARGOCD_NAMESPACE),
                          params={"labelSelector": "app.kubernetes.io/managed-by=apprafter-platform-stack"}).json()
    return {a["metadata"]["name"]: a for a in items["items"]}


def play_cert_manager(stack: StackOnNode, namespace: str = NAMESPACE) -> int:
    """cert-manager and cainjector for `namespace` once the admission chart's Certificate is there: every
    Certificate whose Issuer is one cert-manager serves by itself (selfSigned, or a CA whose Secret it issued)
    gets its Secret and Ready, those Issuers Ready, and the webhook configurations the CA; returns how many
    webhooks got it."""
    node = stack.node
    node.wait(CERT_MANAGER_API, "Certificate", WEBHOOK, namespace, lambda c: True, timeout=300,
              what=f"the admission chart's Certificate {WEBHOOK}")
    issuers = node.http.get(f"/apis/{CERT_MANAGER_API}/namespaces/{namespace}/issuers").json()["items"]
    local = {i["metadata"]["name"] for i in issuers if {"selfSigned", "ca"} & set(i["spec"])}
    for issuer in sorted(local):
        mark_ready(node, "Issuer", issuer, namespace, "Signing CA verified" if issuer.endswith("-ca") else "")
    injected, ca_pem = 0, b""
    certificates = node.http.get(f"/apis/{CERT_MANAGER_API}/namespaces/{namespace}/certificates").json()["items"]
    for certificate in certificates:
        name = certificate["metadata"]["name"]
        if certificate["spec"]["issuerRef"].get("name") not in local:
            continue
        pem = issue_certificate(node, name, namespace, stack.workdir)
        mark_ready(node, "Certificate", name, namespace, "Certificate is up to date and has not expired")
        if name == WEBHOOK:
            ca_pem = pem
    injected = inject_ca(node, f"{namespace}/{WEBHOOK}", ca_pem)
    return injected


def running_pods(node: NodeTestBed, namespace: str, name: str) -> list[dict[str, Any]]:
    """The pods of Deployment `name` (by its selector) that are not being deleted, once it has rolled out (its
    generation seen, every replica updated and available); [] before."""
    deployment = node.get("apps/v1", "Deployment", name, namespace) or {}
    status, spec = deployment.get("status") or {}, deployment.get("spec") or {}
    want = spec.get("replicas", 1)
    if not deployment or not (status.get("observedGeneration") == deployment["metadata"]["generation"]
                              and status.get("updatedReplicas", 0) == status.get("availableReplicas", 0)
                              == status.get("replicas", 0) == want):
        return []
    labels = ",".join(f"{k}={v}" for k, v in spec["selector"]["matchLabels"].items())
    pods = node.http.get(f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": labels}).json()["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def user_application(git: GitServer, revision: str = "main", *, name: str = ARGO_APP, repository: str = USER_APP,
                     namespace: str = USER_NAMESPACE, cascade: bool = False) -> dict[str, Any]:
    """The Argo CD Application a user writes: their repository through our plugin (prod) into `namespace`.
    `cascade`: with Argo CD's resources finalizer, so deleting it deletes what it synced (as the UI's delete does)."""
    finalizers = {"finalizers": ["resources-finalizer.argocd.argoproj.io"]} if cascade else {}
    return {"apiVersion": ARGOCD_API, "kind": "Application",
            "metadata": {"name": name, "namespace": ARGOCD_NAMESPACE, **finalizers},
            "spec": {"project": "default",
                     "source": {"repoURL": git.url(repository), "path": ".", "targetRevision": revision,
                                "plugin": {"name": PLUGIN,
                                           "parameters": [{"name": "environment", "string": "prod"}]}},
                     "destination": {"server": IN_CLUSTER, "namespace": namespace},
                     "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                                    "syncOptions": ["CreateNamespace=true"]}}}


def user_app(stack: StackOnNode, image: str) -> str:
    """A git repository on the node's address with the user's app, and its Argo CD Application; the revision."""
    stack.git = start_git_server(stack.workdir / "git", host=stack.node.node_ip, wrap=stack.node.nsenter)
    stack.revision = stack.git.create(USER_APP, {APP_FILE: served(image)})
    stack.node.apply(user_application(stack.git), namespace=ARGOCD_NAMESPACE)
    return stack.revision


def healthy_user_app(stack: StackOnNode, image: str, early: list[str]) -> Any:
    """A predicate: Synced at the revision and Healthy, checked against the pods (a Healthy before the Deployment
    rolled out is recorded in `early`)."""
    def healthy(app: dict[str, Any]) -> bool:
        # Synced and Healthy can show while the sync operation is still running (it finishes on its next pass)
        if sync_status(app) != ("Synced", "Healthy", stack.revision) \
                or operation_phase(app) in ("", "Running", "Terminating"):
            return False
        if not rolled_out(stack.node, USER_NAMESPACE, USER_APP, image):
            early.append(str((stack.node.get("apps/v1", "Deployment", USER_APP, USER_NAMESPACE) or {}).get("status")))
            return False
        return True
    return healthy


def from_zero(node: NodeTestBed, workdir: Path, images: Mapping[str, str], test_image: str,
              early: list[str] | None = None) -> StackOnNode:
    """Every step from an empty node to the first Healthy user app, each timed (scripts/bench_bootstrap.py); the
    test module asserts on what each left behind."""
    stack = publish(node, workdir, images)
    timer = Timer(stack.timings, stack.loads)
    try:
        started = time.monotonic()
        prerequisites(stack)
        timer.step("prerequisites (namespaces, repository Secrets, stand-in CRDs)", started)
        started = time.monotonic()
        stack.bootstrap = cluster_bootstrap(stack)
        if stack.bootstrap.returncode != 0:
            raise BedError(f"cluster-bootstrap: exit {stack.bootstrap.returncode}: {stack.bootstrap.stderr}")
        leave_out_optional(stack)
        timer.step("apprafter cluster-bootstrap (verify, apply; overrides)", started)
        started = time.monotonic()
        argocd = wait_for_argocd(stack)
        timer.step("Argo CD's pods Ready", started)
        started = time.monotonic()
        digest = stack.digest()
        argocd.wait_app(umbrella.NAME, f"the umbrella Synced at {digest[:19]}",
                        lambda a: sync_status(a)[0] == "Synced" and sync_status(a)[2] == digest, timeout=300)
        timer.step("umbrella synced (component Applications created)", started)
        started = time.monotonic()
        argocd.wait_app("apprafter-operator", "the operator's component Synced and Healthy",
                        lambda a: sync_status(a)[:2] == ("Synced", "Healthy"), timeout=300)
        timer.step("operator pod running (its component Healthy)", started)
        started = time.monotonic()
        play_cert_manager(stack)
        argocd.wait_app("apprafter-admission", "the webhook's component Synced and Healthy",
                        lambda a: sync_status(a)[:2] == ("Synced", "Healthy"), timeout=300)
        timer.step("webhook pods running (cert-manager played)", started)
        started = time.monotonic()
        user_app(stack, test_image)
        argocd.wait_app(ARGO_APP, "the user's app Synced and Healthy with running pods",
                        healthy_user_app(stack, test_image, early if early is not None else []), timeout=300)
        timer.step("first user app Healthy (pods Ready)", started)
        return stack
    except BaseException:
        stack.stop()
        raise


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
