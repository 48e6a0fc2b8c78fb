"""Argo CD's own components on loopback: the pinned `argocd` binary run as repo-server and application
controller (and API server on demand) against the test bed's kube-apiserver, with Redis and a plugin-server
socket directory shared with the repo-server, as in the repo-server pod.

Outside a pod Argo CD runs the way its own Procfile runs it for development: ARGOCD_FAKE_IN_CLUSTER=true
makes the in-cluster destination (https://kubernetes.default.svc) use $KUBECONFIG. Each component talks to the
API server as its own ServiceAccount, with the RBAC of Argo CD's install.yaml, as it would in its pod. Every
supported Argo CD version runs here (ARGOCD_VERSIONS: the pin, then the oldest supported line); its HTTP(S)
goes to a closed loopback port unless it is for loopback itself, so an Application naming a public chart
repository fails at once and sends nothing off the machine.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import BedError, ManagedProcess, free_port, tool, wait_for
from toolchain.tools import SETUP_REMEDY, TOOLS, tools_dir

ARGOCD_VERSIONS: tuple[str, ...] = TOOLS["argocd"].versions  # the pin first (tools/versions.env)
ARGOCD_API = "argoproj.io/v1alpha1"
REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"  # Argo CD removes it once it has refreshed
REPO_SERVER_TIMEOUT = 90  # the controller's wait for one manifest request (--repo-server-timeout-seconds)
REFRESH_TAKEN = 2 * REPO_SERVER_TIMEOUT  # how long a refresh may take to be taken: past one manifest request
IN_CLUSTER = "https://kubernetes.default.svc"
PART_OF = {"app.kubernetes.io/part-of": "argocd"}  # Argo CD's settings informers select on this label
FIELD_MANAGER = "apprafter-testbed"
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: install.yaml is 1.4 MB


@dataclasses.dataclass(frozen=True)
class LocalUser:
    """An Argo CD local account (argocd-cm `accounts.<name>: login`) bound to `role` in argocd-rbac-cm."""

    name: str
    role: str
    password: str = dataclasses.field(default_factory=lambda: secrets.token_urlsafe(16), repr=False)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Argo CD's ConfigMaps (name -> data, e.g. configmaps_of(kustomize_build(...))) and the local users to add."""

    configmaps: Mapping[str, Mapping[str, str]]
    users: Sequence[LocalUser] = ()


def bcrypt(password: str, version: str | None = None) -> str:
    """The hash argocd-secret holds for a local account, made by Argo CD itself (`argocd account bcrypt`)."""
    proc = subprocess.run([str(tool("argocd", version)), "account", "bcrypt", "--password", password],
                          capture_output=True, text=True, timeout=30, check=False,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    if proc.returncode != 0 or not proc.stdout.startswith("$2"):
        raise BedError(f"argocd account bcrypt failed (exit {proc.returncode}): {proc.stderr[-500:]}")
    return proc.stdout.strip()


def install_manifest(version: str) -> Path:
    """Argo CD's own manifests/install.yaml at `version` (tools/setup-gitops.sh copies it for each one)."""
    path = tools_dir() / "argocd-install" / version / "install.yaml"
    if not path.is_file():
        import pytest

        pytest.fail(f"the test bed needs Argo CD's install manifest at {path}: {SETUP_REMEDY}", pytrace=False)
    return path


def install_objects(version: str) -> list[dict[str, Any]]:
    """The objects of Argo CD `version`'s install.yaml, as its file has them (namespaced ones without a namespace)."""
    return copy.deepcopy(_install_objects(version))


@functools.cache
def _install_objects(version: str) -> list[dict[str, Any]]:
    with open(install_manifest(version), "rb") as fh:
        return [d for d in yaml.load_all(fh, Loader=_Loader) if isinstance(d, dict)]


def kustomize_build(directory: Path, workdir: Path) -> list[dict[str, Any]]:
    """`kustomize build` (the pinned binary) of `directory`; one kustomize refuses is a BedError with its words."""
    proc = subprocess.run([str(tool("kustomize")), "build", str(directory)], capture_output=True, text=True,
                          timeout=120, check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(workdir)})
    if proc.returncode != 0:
        raise BedError(f"kustomize build {directory} failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")
    return [d for d in yaml.load_all(proc.stdout, Loader=_Loader) if isinstance(d, dict)]


def with_component(component: Path | None, version: str, namespace: str = "argocd",
                   images: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """What a user's kustomization makes of Argo CD `version`'s install.yaml with `component` (deploy/argocd; None:
    the same kustomization without it): `resources: [install.yaml]`, `components: [<component>]`, `namespace`, and
    `images:` naming `images` (image name in the manifests -> the NAME:TAG to run instead), built by the pinned
    kustomize (once per session for each component's content, version, namespace and images)."""
    files = None if component is None else tuple(sorted(
        (p.relative_to(component).as_posix(), p.read_bytes()) for p in component.rglob("*") if p.is_file()))
    return copy.deepcopy(_with_component(files, version, namespace, tuple(sorted((images or {}).items()))))


@functools.cache
def _with_component(files: tuple[tuple[str, bytes], ...] | None, version: str, namespace: str,
                    images: tuple[tuple[str, str], ...] = ()) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="apprafter-kustomize-") as tmp:
        root = Path(tmp) / "kustomization"
        root.mkdir()
        for name, content in files or ():
            (root / "component" / name).parent.mkdir(parents=True, exist_ok=True)
            (root / "component" / name).write_bytes(content)
        shutil.copy(install_manifest(version), root / "install.yaml")
        overrides = [{"name": name, "newName": ref.rpartition(":")[0], "newTag": ref.rpartition(":")[2]}
                     for name, ref in images]
        (root / "kustomization.yaml").write_text(yaml.safe_dump(
            {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": namespace,
             "resources": ["install.yaml"], **({"components": ["component"]} if files is not None else {}),
             **({"images": overrides} if overrides else {})},
            sort_keys=False))
        return kustomize_build(root, Path(tmp))


def configmaps_of(objects: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """name -> data of every ConfigMap among `objects` (Argo CD's settings, as Settings wants them)."""
    return {o["metadata"]["name"]: {str(k): str(v) for k, v in (o.get("data") or {}).items()}
            for o in objects if o.get("kind") == "ConfigMap"}


def install_configmaps(version: str) -> dict[str, dict[str, str]]:
    """The ConfigMaps of Argo CD `version`'s own install.yaml, unpatched."""
    return configmaps_of(install_objects(version))


# The components the loop runs that talk to the API server (the repo-server does not: its install grants nothing).
API_CLIENTS = ("argocd-application-controller", "argocd-server")
_RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


def install_rbac(namespace: str, version: str) -> list[dict[str, Any]]:
    """install.yaml's ServiceAccounts, Roles, ClusterRoles and bindings of API_CLIENTS, moved to `namespace`
    (as kustomize's `namespace:` moves them)."""
    out = []
    for doc in install_objects(version):
        if doc.get("kind") not in _RBAC_KINDS or doc["metadata"]["name"] not in API_CLIENTS:
            continue
        if not doc["kind"].startswith("Cluster"):
            doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects", []):
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = namespace
        out.append(doc)
    return out


def settings_objects(namespace: str, settings: Settings, version: str) -> list[dict[str, Any]]:
    """The ConfigMaps (local users added), argocd-secret (their passwords) and the `default` AppProject."""

    def meta(name: str) -> dict[str, Any]:
        return {"name": name, "namespace": namespace, "labels": dict(PART_OF)}

    data = {name: dict(values) for name, values in settings.configmaps.items()}
    data.setdefault("argocd-cm", {}).update({f"accounts.{u.name}": "login" for u in settings.users})
    rbac = data.setdefault("argocd-rbac-cm", {})
    rbac["policy.csv"] = rbac.get("policy.csv", "") + "".join(f"g, {u.name}, {u.role}\n" for u in settings.users)
    secret_data = {"server.secretkey": secrets.token_urlsafe(32),
                   **{f"accounts.{u.name}.password": bcrypt(u.password, version) for u in settings.users}}
    return [
        *({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name), "data": values}
          for name, values in sorted(data.items())),
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta("argocd-secret"),
         "stringData": secret_data},
        {"apiVersion": ARGOCD_API, "kind": "AppProject", "metadata": {"name": "default", "namespace": namespace},
         "spec": {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}],
                  "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}},
    ]


class ArgoCD:
    """The running components of Argo CD `version`; its Applications live in `namespace`. stop() ends every
    process."""

    def __init__(self, kube: KubeTestBed, namespace: str, workdir: Path, env: Mapping[str, str],
                 redis: str, repo_server: str, users: Sequence[LocalUser], version: str) -> None:
        self.version = version
        self.kube = kube
        self.namespace = namespace
        self.workdir = workdir
        self._env = dict(env)
        self.redis = redis
        self.repo_server = repo_server
        self.users = {u.name: u for u in users}
        self.processes: list[ManagedProcess] = []
        self.server_url: str | None = None
        self.startup_seconds = 0.0
        self._tokens: dict[str, str] = {}

    # --- processes -------------------------------------------------------------------------------

    def kubeconfig(self, component: str) -> Path:
        """The kubeconfig of `component`'s ServiceAccount (a token from the TokenRequest API)."""
        token = self.kube.service_account_token(self.namespace, component)
        return self.kube.kubeconfig_for(self.workdir / f"{component}.kubeconfig", token,
                                        f"system:serviceaccount:{self.namespace}:{component}")

    def _start(self, binary_name: str, argv: Sequence[str], extra_env: Mapping[str, str] | None = None,
               ) -> ManagedProcess:
        env = {**self._env, "ARGOCD_BINARY_NAME": binary_name, **(extra_env or {})}
        proc = ManagedProcess(binary_name, [tool("argocd", self.version), *argv], self.workdir / f"{binary_name}.log",
                              env=env, cwd=self.workdir)
        self.processes.append(proc)
        return proc

    def start_server(self, timeout: float = 60.0) -> str:
        """argocd-server (the API the UI and the argocd CLI use), plaintext, with local users; returns its URL."""
        if self.server_url:
            return self.server_url
        port, metrics = free_port(), free_port()
        kubeconfig = str(self.kubeconfig("argocd-server"))
        proc = self._start("argocd-server", [
            "--namespace", self.namespace, "--kubeconfig", kubeconfig, "--redis", self.redis,
            "--repo-server", self.repo_server, "--repo-server-plaintext", "--insecure",
            "--address", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics),
            "--dex-server", "http://127.0.0.1:1", "--staticassets", str(self.workdir), "--logformat", "text"],
            {"KUBECONFIG": kubeconfig})
        url = f"http://127.0.0.1:{port}"
        wait_for("argocd-server /healthz", lambda: _healthy(f"{url}/healthz"), timeout, proc)
        self.server_url = url
        return url

    def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()

    def logs(self) -> str:
        return "\n".join(p.tail(60) for p in self.processes)

    # --- Applications ----------------------------------------------------------------------------

    def apply(self, app: Mapping[str, Any]) -> dict[str, Any]:
        """Create or update an Argo CD Application (server-side apply) in Argo CD's namespace."""
        return self.kube.apply(app, namespace=self.namespace, field_manager=FIELD_MANAGER)

    def get(self, name: str) -> dict[str, Any]:
        app = self.kube.get(ARGOCD_API, "Application", name, self.namespace)
        if app is None:
            raise BedError(f"Argo CD Application {name} does not exist")
        return app

    def refresh(self, name: str, kind: str = "normal") -> None:
        """What Argo CD's git webhook handler does on a push: the refresh annotation on the Application. Set while
        Argo CD has not yet taken the last one, it would change nothing and ask for nothing (a commit pushed right
        after a refused render then waited for the periodic refresh: a CI failure), so that one is waited out: for up
        to REFRESH_TAKEN seconds, longer than one manifest request may take (the controller's repo-server timeout, 90 s
        here): a full run waited out 60 s on a loaded machine while that request was still running."""
        def taken() -> bool | None:
            annotations = self.get(name)["metadata"].get("annotations") or {}
            return None if REFRESH_ANNOTATION in annotations else True

        wait_for(f"Argo CD to take the last refresh of {name}", taken, REFRESH_TAKEN, interval=0.1)
        self.kube.apply({"apiVersion": ARGOCD_API, "kind": "Application",
                         "metadata": {"name": name, "namespace": self.namespace,
                                      "annotations": {REFRESH_ANNOTATION: kind}}},
                        namespace=self.namespace, field_manager=f"{FIELD_MANAGER}-refresh")

    def wait(self, name: str, what: str, predicate: Callable[[dict[str, Any]], bool],
             timeout: float = 120.0) -> dict[str, Any]:
        """Poll the Application until predicate(app) holds; on timeout the error shows its status and the logs."""
        last: dict[str, Any] = {}

        def probe() -> dict[str, Any] | None:
            nonlocal last
            last = self.get(name)
            return last if predicate(last) else None

        try:
            return wait_for(f"Argo CD Application {name}: {what}", probe, timeout, interval=0.1)
        except BedError as exc:
            status = yaml.safe_dump(last.get("status", {}), sort_keys=False)[:4000]
            raise BedError(f"{exc}\nlast status:\n{status}\n{self.logs()}") from exc

    # --- the API server, as the UI calls it ------------------------------------------------------

    def token(self, user: str) -> str:
        """A session token for a local user (POST /api/v1/session, as the UI's login does)."""
        if user not in self._tokens:
            account = self.users[user]
            resp = httpx.post(f"{self.start_server()}/api/v1/session", timeout=30,
                              json={"username": account.name, "password": account.password})
            if resp.status_code != 200:
                raise BedError(f"argocd-server refused the login of {user}: {resp.status_code} {resp.text[:500]}")
            self._tokens[user] = resp.json()["token"]
        return self._tokens[user]

    def api(self, user: str, method: str, path: str, *, params: Mapping[str, str] | None = None,
            body: Any = None) -> httpx.Response:
        """Call argocd-server's REST API as `user` (JSON in, the raw response out)."""
        headers = {"Authorization": f"Bearer {self.token(user)}", "Content-Type": "application/json"}
        content = None if body is None else json.dumps(body).encode()
        return httpx.request(method, f"{self.start_server()}{path}", params=params, content=content,
                             headers=headers, timeout=60)

    def resource_tree(self, user: str, app: str) -> list[dict[str, Any]]:
        """The nodes the UI draws for `app` (managed resources and their children, with health)."""
        resp = self.api(user, "GET", f"/api/v1/applications/{app}/resource-tree",
                        params={"appNamespace": self.namespace})
        resp.raise_for_status()
        nodes: list[dict[str, Any]] = resp.json().get("nodes") or []
        return nodes

    def tree_node(self, user: str, app: str, kind: str) -> dict[str, Any]:
        """The one node of `kind` in `app`'s tree."""
        nodes = [n for n in self.resource_tree(user, app) if n["kind"] == kind]
        if len(nodes) != 1:
            raise BedError(f"{app}: expected one {kind} in the resource tree, found {len(nodes)}")
        return nodes[0]

    def resource_action(self, user: str, app: str, node: Mapping[str, Any], action: str | None = None,
                        ) -> httpx.Response:
        """As the UI does: list the actions of a tree node (action None) or run one."""
        params = node_query(self.namespace, node)
        path = f"/api/v1/applications/{app}/resource/actions"
        if action is None:
            return self.api(user, "GET", path, params=params)
        return self.api(user, "POST", path, params=params, body=action)

def node_query(app_namespace: str, node: Mapping[str, Any]) -> dict[str, str]:
    """The query the UI sends to address one tree node (resource actions, live manifest)."""
    return {"appNamespace": app_namespace, "namespace": node.get("namespace", ""), "resourceName": node["name"],
            "version": node["version"], "kind": node["kind"], "group": node.get("group", "")}


def sync_status(app: Mapping[str, Any]) -> tuple[str, str, str]:
    """(sync status, health status, synced revision) of an Argo CD Application."""
    status = app.get("status") or {}
    sync = status.get("sync") or {}
    return sync.get("status", ""), (status.get("health") or {}).get("status", ""), sync.get("revision", "")


def operation_phase(app: Mapping[str, Any]) -> str:
    return str(((app.get("status") or {}).get("operationState") or {}).get("phase", ""))


def conditions(app: Mapping[str, Any], kind: str | None = None) -> list[dict[str, Any]]:
    found = list((app.get("status") or {}).get("conditions") or [])
    return [c for c in found if kind is None or c.get("type") == kind]


@functools.cache
def flags(binary_name: str, version: str) -> frozenset[str]:
    """The command-line flags Argo CD `version`'s component `binary_name` has (what its --help lists)."""
    proc = subprocess.run([str(tool("argocd", version)), "--help"], capture_output=True, text=True, timeout=30,
                          check=False, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                                            "ARGOCD_BINARY_NAME": binary_name})
    return frozenset(word.rstrip(",=") for word in proc.stdout.split() if word.startswith("--"))


# Where Argo CD's HTTP(S) to anything but loopback goes (Go never proxies loopback): a port nothing listens on.
CLOSED_PROXY = "http://127.0.0.1:9"


def start_argocd(kube: KubeTestBed, workdir: Path, *, redis: str, plugin_socket_dir: Path, settings: Settings,
                 namespace: str = "argocd", version: str = ARGOCD_VERSIONS[0], timeout: float = 90.0) -> ArgoCD:
    """Install Argo CD `version`'s settings into `namespace`, start repo-server and application controller."""
    workdir.mkdir(parents=True, exist_ok=True)
    home, tmp = workdir / "home", workdir / "tmp"
    dirs = {name: workdir / name for name in ("tls", "ssh", "gpg-keys", "gpg-source")}
    for d in (home, tmp, *dirs.values()):
        d.mkdir(exist_ok=True)
    started = time.monotonic()
    kube.ensure_namespace(namespace)
    for obj in [*settings_objects(namespace, settings, version), *install_rbac(namespace, version)]:
        kube.apply(obj, namespace=namespace, field_manager=FIELD_MANAGER)
    # What Argo CD's image has on PATH: its scripts (git-verify-wrapper.sh, tools/setup-gitops.sh copies them),
    # `helm`, with which the repo-server renders Helm charts (the pinned helm), and `argocd` itself: git's askpass
    # for a repository with a login is `GIT_ASKPASS=argocd` (util/askpass), which a private clone needs.
    path = os.pathsep.join([str(install_manifest(version).parent / "bin"), str(tool("helm").parent),
                            str(tool("argocd", version).parent), os.environ.get("PATH", "/usr/bin:/bin")])
    env = {
        "PATH": path, "HOME": str(home), "TMPDIR": str(tmp),
        "ARGOCD_FAKE_IN_CLUSTER": "true",
        "ARGOCD_TLS_DATA_PATH": str(dirs["tls"]), "ARGOCD_SSH_DATA_PATH": str(dirs["ssh"]),
        "ARGOCD_GNUPGHOME": str(dirs["gpg-keys"]), "ARGOCD_GPG_DATA_PATH": str(dirs["gpg-source"]),
        "ARGOCD_GPG_ENABLED": "false", "GIT_CONFIG_NOSYSTEM": "1",
        # the askpass server's socket (git's askpass `argocd` reads the same variable): the bed's, not /tmp's
        "ARGOCD_ASK_PASS_SOCK": str(workdir / "ask-pass.sock"),
        "HTTP_PROXY": CLOSED_PROXY, "HTTPS_PROXY": CLOSED_PROXY, "NO_PROXY": "127.0.0.1,localhost",
    }
    repo_port = free_port()
    argo = ArgoCD(kube, namespace, workdir, env, redis, f"127.0.0.1:{repo_port}", settings.users, version)
    try:
        repo_metrics, controller_metrics = free_port(), free_port()
        repo = argo._start("argocd-repo-server", [
            "--address", "127.0.0.1", "--port", str(repo_port), "--metrics-address", "127.0.0.1",
            "--metrics-port", str(repo_metrics), "--redis", redis, "--disable-tls", "--logformat", "text",
            "--parallelismlimit", "2",
            # v3.6+ defaults to a client CA for mTLS, which plaintext refuses: none here.
            *(["--client-ca-path="] if "--client-ca-path" in flags("argocd-repo-server", version) else [])],
            {"ARGOCD_PLUGINSOCKFILEPATH": str(plugin_socket_dir)})
        # One status and one operation processor: a handful of apps, and the machine is shared.
        kubeconfig = str(argo.kubeconfig("argocd-application-controller"))
        controller = argo._start("argocd-application-controller", [
            "--kubeconfig", kubeconfig, "--namespace", namespace, "--redis", redis,
            "--repo-server", argo.repo_server, "--repo-server-plaintext", "--repo-server-timeout-seconds",
            str(REPO_SERVER_TIMEOUT),
            "--metrics-port", str(controller_metrics), "--status-processors", "1", "--operation-processors", "1",
            "--kubectl-parallelism-limit", "4", "--logformat", "text"],
            {"HOSTNAME": "argocd-application-controller-0", "KUBECONFIG": kubeconfig})
        wait_for("argocd-repo-server /healthz", lambda: _healthy(f"http://127.0.0.1:{repo_metrics}/healthz"),
                 timeout, repo)
        wait_for("argocd-application-controller /healthz",
                 lambda: _healthy(f"http://127.0.0.1:{controller_metrics}/healthz"), timeout, controller)
        argo.startup_seconds = time.monotonic() - started
        return argo
    except BaseException:
        argo.stop()
        raise


def _healthy(url: str) -> bool | None:
    return True if httpx.get(url, timeout=2).status_code == 200 else None

