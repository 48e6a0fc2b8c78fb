"""The umbrella by digest, through the real Argo CD (repo-server and application controller of each supported
version): the PlatformStack controller (`apprafter operator`) verifies a release with cosign and writes the umbrella
Application naming that digest; Argo CD pulls the chart from a loopback registry that wants credentials (Debian's
docker-registry, the token protocol) through its native OCI source and installs what the verified chart renders.
Then the release's tag is moved to other content in the registry: a refresh, a manual sync and the controller's next
check change nothing Argo CD pulls or applies.

Its own API server: Argo CD here is in `argocd`, where the umbrella lives, and its controller acts on every
Application there. The component Applications name public chart repositories: Argo CD's HTTP goes to a closed
loopback port (tests/testbed/argocd.py), so they fail at once and nothing leaves the machine."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from platform_stack import umbrella
from tests.reconciler.conftest import install_our_crds
from tests.reconciler.operator_proc import FAST, Operator, operator_fixture
from tests.testbed.argocd import ARGOCD_API, ArgoCD, Settings, configmaps_of, start_argocd, with_component
from tests.testbed.distribution import AuthRegistry, distribution
from tests.testbed.gitops import DEPLOY
from tests.testbed.kube import KubeTestBed, start_kube
from tests.testbed.procs import tool, wait_for
from tests.testbed.redis import RedisServer, start_redis
from tests.testbed.stack_releases import KeyPair, Publisher, build_releases, key_pairs
from toolchain.tools import scrubbed_env

pytestmark = pytest.mark.gitops

API = "apprafter.io/v1alpha1"
NS, KEYS, CREDENTIALS = "apprafter-system", "platform-stack-keys", "registry-credentials"
# 1.1.1 moves keda: the content the 1.1.0 tag is moved to.
RELEASES = [("1.1.0", None, {}), ("1.1.1", ("keda", '"2.17.2"', '"2.18.0"'), {})]
# The components a solo stack may leave out, left out: fewer Applications for Argo CD to fail on (keda stays: its
# chart version is what the moved tag would change).
LEFT_OUT = ("sealed-secrets", "capsule", "cloudnative-pg", "backstage", "gateway",
            "network-policies", "service-providers")


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeTestBed]:
    kube = start_kube(tmp_path_factory.mktemp("kube"))
    try:
        install_our_crds(kube, tmp_path_factory.mktemp("crds"))
        yield kube
    finally:
        kube.stop()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    with distribution(tmp_path_factory.mktemp("registry"), "token") as reg:
        yield reg


@pytest.fixture(scope="module")
def publisher(registry: AuthRegistry, tmp_path_factory: pytest.TempPathFactory) -> Publisher:
    charts = build_releases(tmp_path_factory.mktemp("charts"), RELEASES)
    keys: dict[str, KeyPair] = key_pairs(tmp_path_factory.mktemp("keys"), ("release",))
    return Publisher(registry, charts, keys, tmp_path_factory.mktemp("publisher"))


@pytest.fixture(scope="module")
def stack_secrets(bed: KubeTestBed, registry: AuthRegistry, publisher: Publisher) -> None:
    """What the operator reads here: the release key and a pull-only login."""
    for namespace in (NS, umbrella.NAMESPACE):
        bed.ensure_namespace(namespace)
    public = base64.b64encode(publisher.keys["release"][1].read_bytes()).decode()
    bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": KEYS, "namespace": NS},
               "data": {"release.pub": public}})
    bed.apply(registry.pull_secret(CREDENTIALS, NS))


# The operator with its chart's RBAC (here and in `argocd`).
operator = operator_fixture("--no-leader-elect", *FAST, rbac=(NS, umbrella.NAMESPACE), requires=("stack_secrets",))


class Deployed:
    """One Argo CD version's run: its Argo CD, the repository it pulls from and the digest that was verified."""

    def __init__(self, argocd: ArgoCD, repository: str, digest: str) -> None:
        self.argocd, self.repository, self.digest = argocd, repository, digest


@pytest.fixture(scope="module")
def deployed(bed: KubeTestBed, registry: AuthRegistry, publisher: Publisher, operator: Operator, argocd_version: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    """Argo CD `argocd_version` in `argocd` (deploy/argocd's settings, a repository Secret for the registry), a
    release 1.1.0 signed in a repository of its own, and a PlatformStack pinned to it; once the umbrella is Synced."""
    workdir = tmp_path_factory.mktemp(f"argocd-{argocd_version}")
    repo = publisher.publish(f"stack-{argocd_version.replace('.', '-')}", [("1.1.0", "release")])
    repository = f"{registry.url}/{repo}/platform-stack"
    bed.apply({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "platform-stack-repository", "namespace": umbrella.NAMESPACE,
                            "labels": {"argocd.argoproj.io/secret-type": "repository"}},
               # What whoever installs Argo CD writes for a private, plain-HTTP OCI repository (docs/platform-stack.md).
               "stringData": {"type": "oci", "url": f"oci://{repository}", "username": registry.reader,
                              "password": registry.reader_password, "insecureOCIForceHttp": "true"}})
    redis: RedisServer = start_redis(workdir / "redis")
    argocd: ArgoCD | None = None
    try:
        settings = Settings(configmaps_of(with_component(DEPLOY, argocd_version)))
        argocd = start_argocd(bed, workdir / "argocd", redis=redis.address, plugin_socket_dir=workdir,
                              settings=settings, namespace=umbrella.NAMESPACE, version=argocd_version)
        bed.apply({"apiVersion": API, "kind": "PlatformStack", "metadata": {"name": "default", "namespace": NS},
                   "spec": {"channel": "stable", "pin": "1.1.0",
                            "source": {"repoURL": f"oci://{repository}", "insecure": True, "checkInterval": "10m",
                                       "secretRef": {"name": CREDENTIALS}},
                            "verify": {"provider": "cosign", "secretRef": {"name": KEYS}},
                            "values": {"tier": "solo", "domain": "example.com"},
                            "overrides": {name: {"enabled": False} for name in LEFT_OUT}}},
                  field_manager="platform-admin")
        digest = publisher.digest(repo, "1.1.0")
        argocd.wait(umbrella.NAME, f"Synced at {digest[:19]}",
                    lambda app: (app.get("status") or {}).get("sync", {}).get("revision") == digest
                    and ((app.get("status") or {}).get("operationState") or {}).get("phase") == "Succeeded")
        yield Deployed(argocd, repository, digest)
    finally:
        bed.delete(API, "PlatformStack", "default", NS)
        if argocd is not None:
            argocd.stop()
        redis.stop()
        clear_applications(bed)


def clear_applications(bed: KubeTestBed) -> None:
    """Every Argo CD Application in `argocd` gone, finalizers dropped (no Argo CD runs to honour them now)."""
    info = bed.resource_for(ARGOCD_API, "Application")
    for app in bed.http.get(info.path(None, umbrella.NAMESPACE)).json()["items"]:
        name = app["metadata"]["name"]
        bed.http.patch(info.path(name, umbrella.NAMESPACE), json={"metadata": {"finalizers": None}},
                       headers={"Content-Type": "application/merge-patch+json"})
        bed.delete(ARGOCD_API, "Application", name, umbrella.NAMESPACE)


def components(bed: KubeTestBed) -> dict[str, dict[str, Any]]:
    """The component Applications Argo CD applied from the umbrella, by name."""
    info = bed.resource_for(ARGOCD_API, "Application")
    items = bed.http.get(info.path(None, umbrella.NAMESPACE),
                         params={"labelSelector": "app.kubernetes.io/managed-by=apprafter-platform-stack"}).json()
    return {a["metadata"]["name"]: a for a in items["items"]}


def rendered(publisher: Publisher, version: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """What the verified chart renders with the umbrella's values (`helm template` of the .tgz that was pushed)."""
    app = umbrella.umbrella("x/platform-stack", version, "sha256:0", {"tier": "solo", "domain": "example.com"},
                            {name: {"enabled": False} for name in LEFT_OUT}, automated=True)
    values = tmp_path / "values.json"
    values.write_text(json.dumps(app["spec"]["source"]["helm"]["valuesObject"]))
    proc = subprocess.run([str(tool("helm")), "template", umbrella.NAME, str(publisher.charts[version]),
                           "--namespace", umbrella.NAMESPACE, "--values", str(values)],
                          capture_output=True, text=True, timeout=60, check=False, env=scrubbed_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(proc.stdout) if d}


def test_argo_cd_pulls_the_verified_chart_by_digest(bed: KubeTestBed, deployed: Deployed, publisher: Publisher,
                                                    tmp_path: Path) -> None:
    app = deployed.argocd.get(umbrella.NAME)
    assert app["spec"]["source"]["repoURL"] == f"oci://{deployed.repository}"
    assert app["spec"]["source"]["targetRevision"] == deployed.digest
    status = (bed.get(API, "PlatformStack", "default", NS) or {})["status"]
    assert status["lastApplied"]["digest"] == deployed.digest  # cosign verified this digest
    assert f"1.1.0 ({deployed.digest}) verified with release.pub" in next(
        c["message"] for c in status["conditions"] if c["type"] == "SourceVerified")
    assert app["status"]["sync"]["revision"] == deployed.digest  # and Argo CD pulled it
    live = components(bed)
    want = rendered(publisher, "1.1.0", tmp_path)
    assert sorted(live) == sorted(want)
    for name, child in want.items():
        assert live[name]["spec"]["source"] == child["spec"]["source"], name
        assert live[name]["metadata"]["labels"]["apprafter.io/stack-version"] == "1.1.0"
    assert live["keda"]["spec"]["source"]["targetRevision"] == "2.17.2"


def test_a_moved_tag_changes_nothing_argo_cd_pulls(bed: KubeTestBed, deployed: Deployed, publisher: Publisher,
                                                   operator: Operator) -> None:
    repo = deployed.repository.split("/")[1]
    before = {name: a["metadata"]["resourceVersion"] for name, a in components(bed).items()}
    moved = publisher.move_tag(repo, "1.1.0", publisher.charts["1.1.1"])
    assert moved != deployed.digest
    argocd = deployed.argocd

    # A hard refresh makes the repo-server generate again: it resolves the digest, not the tag. The controller
    # takes the annotation off once it has refreshed (status.reconciledAt has whole seconds: no event to wait on).
    argocd.refresh(umbrella.NAME, "hard")
    app = argocd.wait(umbrella.NAME, "hard refresh done", lambda a: "argocd.argoproj.io/refresh" not in (
        a["metadata"].get("annotations") or {}))
    assert (app["status"]["sync"]["status"], app["status"]["sync"]["revision"]) == ("Synced", deployed.digest)

    # A manual sync, as a person presses Sync while the tag is moved: the same digest, the same objects.
    started = str(((app.get("status") or {}).get("operationState") or {}).get("startedAt"))
    bed.http.patch(bed.resource_for(ARGOCD_API, "Application").path(umbrella.NAME, umbrella.NAMESPACE),
                   json={"operation": {"initiatedBy": {"username": "platform-admin"}, "sync": {"prune": True}}},
                   headers={"Content-Type": "application/merge-patch+json"})
    app = argocd.wait(umbrella.NAME, "the manual sync done", lambda a: str(
        ((a.get("status") or {}).get("operationState") or {}).get("startedAt")) != started and (
        a["status"]["operationState"]["phase"] == "Succeeded"))
    assert app["status"]["operationState"]["syncResult"]["revision"] == deployed.digest
    assert {name: a["metadata"]["resourceVersion"] for name, a in components(bed).items()} == before
    assert components(bed)["keda"]["spec"]["source"]["targetRevision"] == "2.17.2"

    # The controller's next check sees the moved tag (defence in depth): it reports it and re-applies nothing.
    info = bed.resource_for(API, "PlatformStack")
    bed.http.patch(info.path("default", NS), params={"fieldManager": "platform-admin"},
                   json={"spec": {"source": {"checkInterval": "11m"}}},
                   headers={"Content-Type": "application/merge-patch+json"})

    def tag_moved() -> dict[str, Any] | None:
        st = (bed.get(API, "PlatformStack", "default", NS) or {}).get("status") or {}
        ready = next((c for c in st.get("conditions") or [] if c["type"] == "Ready"), {})
        return st if ready.get("reason") == "TagMoved" else None

    st = wait_for("the controller to report the moved tag", tag_moved, 60, operator.proc)
    assert st["lastApplied"]["digest"] == deployed.digest
    app = argocd.get(umbrella.NAME)
    assert app["spec"]["source"]["targetRevision"] == deployed.digest
    assert "automated" not in (app["spec"].get("syncPolicy") or {})
    assert {name: a["metadata"]["resourceVersion"] for name, a in components(bed).items()} == before
