"""The GitOps loop on loopback: a git server, Redis, our plugin under Argo CD's plugin server, Argo CD's
repo-server and application controller (API server on demand) and the test bed's kube-apiserver with Argo
CD's and our CRDs. Shared by the loop tests (tests/argocd) and scripts/demo_gitops.sh."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from compatibility.crd import ALL_CRDS
from renderer.crds import crd_documents
from renderer.emit import dump_stream
from tests.testbed.argocd import (
    ARGOCD_API,
    IN_CLUSTER,
    ArgoCD,
    LocalUser,
    Settings,
    kustomized_configmaps,
    operation_phase,
    start_argocd,
    sync_status,
)
from tests.testbed.cmp import CmpServer, start_cmp_server
from tests.testbed.gitserver import GitServer, start_git_server
from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import BedError
from tests.testbed.redis import RedisServer, start_redis
from toolchain.tools import ToolError, resolve

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "argocd"
APPRAFTER_API = "apprafter.io/v1alpha1"
# deploy/argocd/kustomization.yaml's patches of Argo CD's ConfigMaps (the repo-server patch needs a pod).
CONFIGMAP_PATCHES = ("argocd-cmd-params-cm-patch.yaml", "argocd-cm-patch.yaml", "argocd-rbac-cm-patch.yaml")
ARGOCD_NAMESPACE = "argocd-loop"  # not `argocd`: other test-bed tests may use that namespace for their own ends
APPROVER = LocalUser("approver", "role:apprafter-approver")
VIEWER = LocalUser("viewer", "role:readonly")
# Until the operator joins the loop (issue 9), tests and the demo write its status under this field manager.
STAND_IN = "stand-in-for-the-operator"


@dataclasses.dataclass
class GitOpsLoop:
    """Every part of the loop, running. `timings` collects what each step cost (seconds), by step name."""

    kube: KubeTestBed
    git: GitServer
    redis: RedisServer
    cmp: CmpServer
    argocd: ArgoCD
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

    def wait_synced(self, name: str, revision: str, timeout: float = 120.0) -> dict[str, Any]:
        """Until Argo CD reports `name` Synced at `revision` and its sync operation Succeeded."""
        return self.argocd.wait(name, f"Synced at {revision[:8]}", lambda app: sync_status(app)[0] == "Synced"
                                and sync_status(app)[2] == revision and operation_phase(app) == "Succeeded",
                                timeout)

    def push(self, repo: str, files: Mapping[str, str], message: str, *apps: str) -> str:
        """Commit to `repo`, then tell Argo CD as its git webhook would (refresh `apps`); returns the sha."""
        sha = self.git.commit(repo, files, message)
        for app in apps:
            self.argocd.refresh(app)
        return sha

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        started = time.monotonic()
        yield
        self.timings[step] = time.monotonic() - started

    def apprafter_application(self, name: str, namespace: str) -> dict[str, Any] | None:
        return self.kube.get(APPRAFTER_API, "Application", name, namespace)

    def write_status(self, kind: str, name: str, namespace: str, status: Mapping[str, Any],
                     field_manager: str = STAND_IN) -> None:
        """Server-side apply `status` to one of our objects through its status subresource."""
        info = self.kube.resource_for(APPRAFTER_API, kind)
        body = {"apiVersion": APPRAFTER_API, "kind": kind, "metadata": {"name": name, "namespace": namespace},
                "status": dict(status)}
        resp = self.kube.http.patch(info.path(name, namespace) + "/status", json=body,
                                    params={"fieldManager": field_manager, "force": "true"},
                                    headers={"Content-Type": "application/apply-patch+yaml"})
        if resp.status_code >= 300:
            raise BedError(f"{kind} {namespace}/{name} status: {resp.status_code} {resp.text[:1000]}")

    def stop(self) -> None:
        self.argocd.stop()
        self.cmp.stop()
        self.git.stop()
        self.redis.stop()


def install_apprafter_crds(kube: KubeTestBed, workdir: Path) -> list[str]:
    """Our CRDs as `apprafter crds` prints them (Argo CD's come with the test bed); waits until served."""
    path = workdir / "apprafter-crds.yaml"
    path.write_text(dump_stream(crd_documents(ALL_CRDS)))
    return kube.install_crds([path])


def plugin_path() -> list[str]:
    """What the sidecar image has on PATH: `apprafter` (this interpreter's venv) and the pinned cue."""
    try:
        cue = resolve("cue")
    except ToolError as exc:
        import pytest

        pytest.fail(f"the loop needs cue: {exc}", pytrace=False)
    return [str(Path(sys.executable).parent), str(cue.parent)]


def start_loop(kube: KubeTestBed, workdir: Path, *, namespace: str = ARGOCD_NAMESPACE) -> GitOpsLoop:
    """Start every part of the loop but the API server (started on first use); stop() tears it all down."""
    workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        install_apprafter_crds(kube, workdir)
        redis = start_redis(workdir / "redis")
        stack.callback(redis.stop)
        git = start_git_server(workdir / "git")
        stack.callback(git.stop)
        plugin_dir, sockets = workdir / "plugin", workdir / "plugins"
        plugin_dir.mkdir(exist_ok=True)
        sockets.mkdir(exist_ok=True)
        shutil.copy(REPO / "plugin.yaml", plugin_dir / "plugin.yaml")
        cmp = start_cmp_server(plugin_dir, workdir / "cmp", path=plugin_path(), socket_dir=sockets)
        stack.callback(cmp.stop)
        configmaps = kustomized_configmaps([DEPLOY / f for f in CONFIGMAP_PATCHES])
        settings = Settings(configmaps, (APPROVER, VIEWER))
        argocd = start_argocd(kube, workdir / "argocd", redis=redis.address, plugin_socket_dir=sockets,
                              settings=settings, namespace=namespace)
        stack.pop_all()
    return GitOpsLoop(kube, git, redis, cmp, argocd)
