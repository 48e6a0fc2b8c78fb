"""`apprafter cluster-bootstrap` through the real parts: an API server of its own that starts empty (etcd +
kube-apiserver, no CRD), Debian's docker-registry wanting a login with a platform-stack release pushed and signed by
`apprafter stack push|sign` and cosign (tests/testbed/stack_releases.py), and Argo CD's own install.yaml of the pinned
version (set-up copies it: tools/setup-gitops.sh). What a user relies on: wrong input fails with one line and nothing
created; --dry-run prints what a run applies and touches nothing; a run installs Argo CD, our sidecar settings, the
CRDs, the PlatformStack and the root Application naming the digest cosign verified; a second run changes nothing; an
Argo CD someone else installed is not installed again (only our settings go onto it)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle.bootstrap import KEYS_SECRET, SIDECAR_MANAGER
from platform_stack import umbrella
from renderer.manifests import KINDS
from renderer.names import OPERATOR_FIELD_MANAGER
from tests.platform_stack.conftest import applications as applications_of
from tests.platform_stack.conftest import cli, helm_template
from tests.reconciler.operator_proc import FAST, Operator
from tests.testbed.argocd import ARGOCD_VERSIONS, install_manifest, install_objects
from tests.testbed.crds import bed_crd_files
from tests.testbed.distribution import AuthRegistry, distribution
from tests.testbed.gitops import chart_operator
from tests.testbed.kube import KubeTestBed, start_kube
from tests.testbed.procs import wait_for
from tests.testbed.stack_releases import KeyPair, Publisher, build_releases, key_pairs
from toolchain.pins import pins

pytestmark = pytest.mark.testbed

API, NS = "apprafter.io/v1alpha1", "apprafter-system"
ARGOCD = ARGOCD_VERSIONS[0]  # the pin
REPO = "releases"
RELEASES = [("1.1.0", None, {}), ("1.2.0", ("keda", '"2.17.2"', '"2.18.0"'), {}), ("1.3.0", None, {})]
MINIMUMS = {"1.3.0": "9.0.0"}  # a Kubernetes no cluster runs
OUR_CRDS = {"applications.apprafter.io", "applicationbaselines.apprafter.io", "migrationplans.apprafter.io",
            "platformstacks.apprafter.io", "publichostnames.apprafter.io", "resourceclaims.apprafter.io"}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthRegistry]:
    with distribution(tmp_path_factory.mktemp("registry"), "htpasswd") as reg:
        yield reg


@pytest.fixture(scope="module")
def publisher(registry: AuthRegistry, tmp_path_factory: pytest.TempPathFactory) -> Publisher:
    """1.1.0 signed with the release key, 1.2.0 pushed but not signed, 1.3.0 signed but for Kubernetes 9; a second
    key that signed nothing."""
    charts = build_releases(tmp_path_factory.mktemp("charts"), RELEASES, MINIMUMS)
    keys: dict[str, KeyPair] = key_pairs(tmp_path_factory.mktemp("keys"), ("release", "other"))
    published = Publisher(registry, charts, keys, tmp_path_factory.mktemp("publisher"))
    published.publish(REPO, [("1.1.0", "release"), ("1.2.0", None), ("1.3.0", "release")])
    return published


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeTestBed]:
    """An API server with nothing in it: no CRD, no Argo CD."""
    kube = start_kube(tmp_path_factory.mktemp("kube"), install_crds=False)
    try:
        yield kube
    finally:
        kube.stop()


def bootstrap(bed: KubeTestBed, publisher: Publisher, *args: str, key: str = "release", version: str = "1.1.0",
              manifest: bool = True) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, logged in to the registry (DOCKER_CONFIG)."""
    return cli("cluster-bootstrap", f"oci://{publisher.registry.url}/{REPO}/platform-stack", "--version", version,
               "--key", str(publisher.keys[key][1]), "--tier", "solo", "--domain", "example.com",
               "--registry-secret", "registry-credentials", "--kubeconfig", str(bed.kubeconfig),
               *(("--argocd-manifest", str(install_manifest(ARGOCD))) if manifest else ()), *args,
               env={"DOCKER_CONFIG": publisher.env["DOCKER_CONFIG"], "APPRAFTER_TOOLS_DIR":
                    publisher.env["APPRAFTER_TOOLS_DIR"]})


def one_line_failure(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def untouched(bed: KubeTestBed) -> None:
    """Nothing of a bootstrap is in the cluster."""
    assert bed.get("v1", "Namespace", "argocd") is None
    assert bed.get("v1", "Namespace", NS) is None
    crds = bed.http.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").json()["items"]
    assert crds == []


def objects_of(stream: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(stream) if doc]


def ident(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"]


def live(bed: KubeTestBed, obj: Mapping[str, Any]) -> dict[str, Any]:
    api_version, kind, namespace, name = ident(obj)
    found = bed.get(api_version, kind, name, namespace or None)
    assert found is not None, f"{kind} {namespace}/{name} was not applied"
    return found


def managers(obj: Mapping[str, Any]) -> set[str]:
    return {str(e.get("manager")) for e in obj["metadata"].get("managedFields") or []}


# --- wrong input: one line, exit 1, nothing created (the API server is still empty) ---------------------------------

def test_argo_cd_absent_and_no_manifest_names_the_flag(bed: KubeTestBed, publisher: Publisher) -> None:
    line = one_line_failure(bootstrap(bed, publisher, manifest=False))
    assert line == ("--argocd-manifest: Argo CD is not installed in namespace argocd (missing "
                    "crd/applications.argoproj.io, deployment/argocd-repo-server, "
                    "statefulset/argocd-application-controller): pass --argocd-manifest FILE, the install.yaml of "
                    "the Argo CD release (v3.1 or later) to install")
    untouched(bed)


def test_a_key_that_did_not_sign_it_is_refused(bed: KubeTestBed, publisher: Publisher) -> None:
    line = one_line_failure(bootstrap(bed, publisher, key="other"))
    digest = publisher.digest(REPO, "1.1.0")
    assert line.startswith(f"oci://{publisher.registry.url}/{REPO}/platform-stack:1.1.0@{digest}: verify: "), line
    untouched(bed)


def test_an_unsigned_version_is_refused(bed: KubeTestBed, publisher: Publisher) -> None:
    line = one_line_failure(bootstrap(bed, publisher, version="1.2.0"))
    assert f"platform-stack:1.2.0@{publisher.digest(REPO, '1.2.0')}: verify: " in line
    assert "signature" in line, line
    untouched(bed)


def test_a_version_without_a_tag_is_refused(bed: KubeTestBed, publisher: Publisher) -> None:
    line = one_line_failure(bootstrap(bed, publisher, version="9.9.9"))
    assert "tag 9.9.9 not found" in line, line
    untouched(bed)


def test_a_version_the_clusters_kubernetes_cannot_run_is_refused(bed: KubeTestBed, publisher: Publisher) -> None:
    line = one_line_failure(bootstrap(bed, publisher, version="1.3.0"))
    assert line == (f"--version: stack 1.3.0 needs Kubernetes >= 9.0.0, cluster runs {pins()['KUBERNETES_VERSION']}: "
                    "pick a version this cluster can run, or upgrade Kubernetes first")
    untouched(bed)


def test_a_missing_manifest_file_is_refused(bed: KubeTestBed, publisher: Publisher, tmp_path: Path) -> None:
    line = one_line_failure(bootstrap(bed, publisher, "--argocd-manifest", str(tmp_path / "install.yaml"),
                                      manifest=False))
    assert line == f"{tmp_path / 'install.yaml'}: --argocd-manifest: no such file"
    untouched(bed)


def test_an_api_server_that_cannot_be_reached_is_a_tool_failure(bed: KubeTestBed, publisher: Publisher,
                                                                 tmp_path: Path) -> None:
    config = yaml.safe_load(bed.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable = tmp_path / "kubeconfig"
    unreachable.write_text(yaml.safe_dump(config))
    proc = bootstrap(bed, publisher, "--kubeconfig", str(unreachable))
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.startswith("apprafter: cannot reach the API server (")
    assert proc.stderr.endswith("(server https://127.0.0.1:1: check --kubeconfig and --context)\n"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    untouched(bed)


# --- the run from empty ------------------------------------------------------------------------------------------

class Run:
    """The dry run on the empty API server, then the run, then the run again."""

    def __init__(self, dry: subprocess.CompletedProcess[str], dry_again: subprocess.CompletedProcess[str],
                 first: subprocess.CompletedProcess[str]) -> None:
        self.dry, self.dry_again, self.first = dry, dry_again, first
        self.objects = objects_of(dry.stdout)


@pytest.fixture(scope="module")
def run(bed: KubeTestBed, publisher: Publisher) -> Run:
    dry = bootstrap(bed, publisher, "--dry-run")
    dry_again = bootstrap(bed, publisher, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    untouched(bed)
    first = bootstrap(bed, publisher)
    assert first.returncode == 0, first.stderr
    return Run(dry, dry_again, first)


def test_dry_run_prints_the_objects_deterministically_and_touches_nothing(run: Run) -> None:
    assert run.dry.stdout == run.dry_again.stdout
    kinds = {o["kind"] for o in run.objects}
    assert {"Namespace", "CustomResourceDefinition", "Deployment", "StatefulSet", "ConfigMap", "PlatformStack",
            "Application", "Secret"} <= kinds
    assert run.dry.stderr.splitlines()[-1].startswith(f"would apply {len(run.objects)} objects, 0 unchanged")
    assert run.dry.stderr.startswith("Argo CD is not installed in namespace argocd (missing ")


def test_the_run_applies_what_the_dry_run_printed(bed: KubeTestBed, run: Run) -> None:
    applied = re.findall(r"^(?:created|applied) (\S+)/(\S+)(?: -n (\S+))? \(", run.first.stdout, re.M)
    printed = [(o["kind"].lower(), o["metadata"]["name"], o["metadata"].get("namespace") or "") for o in run.objects]
    assert sorted(applied) == sorted(printed)
    for obj in run.objects:
        live(bed, obj)


def test_the_platform_stack_and_the_root_application_by_the_verified_digest(bed: KubeTestBed, publisher: Publisher,
                                                                             run: Run) -> None:
    stack = bed.get(API, "PlatformStack", "default", NS)
    assert stack is not None
    repository = f"{publisher.registry.url}/{REPO}/platform-stack"
    assert stack["spec"] == {
        "channel": "stable", "autoUpgrade": True,  # the solo tier: auto-upgrade on, no pin (spec §3.11)
        "source": {"repoURL": f"oci://{repository}", "insecure": True, "secretRef": {"name": "registry-credentials"}},
        "values": {"tier": "solo", "domain": "example.com"},
        "verify": {"provider": "cosign", "secretRef": {"name": KEYS_SECRET}}}
    keys = bed.get("v1", "Secret", KEYS_SECRET, NS)
    assert keys is not None
    assert base64.b64decode(keys["data"]["release.pub"]) == publisher.keys["release"][1].read_bytes()
    root = bed.get(umbrella.API_VERSION, umbrella.KIND, umbrella.NAME, umbrella.NAMESPACE)
    assert root is not None
    digest = publisher.digest(REPO, "1.1.0")  # what `stack push` got from the registry and cosign signed
    assert root["spec"]["source"] == {"repoURL": f"oci://{repository}", "targetRevision": digest, "path": ".",
                                      "helm": {"valuesObject": {"tier": "solo", "domain": "example.com"}}}
    assert root["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    assert root["metadata"]["annotations"][umbrella.DIGEST_ANNOTATION] == digest
    # Written as the PlatformStack controller writes it: its next apply owns every field (and may drop one).
    assert managers(root) == {OPERATOR_FIELD_MANAGER}


def test_argo_cd_with_the_sidecar_settings_and_the_crds(bed: KubeTestBed, run: Run) -> None:
    for name in ("applications.argoproj.io", *OUR_CRDS):
        crd = bed.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
        assert crd is not None, name
        assert any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"])
    repo_server = bed.get("apps/v1", "Deployment", "argocd-repo-server", "argocd")
    assert repo_server is not None
    containers = {c["name"]: c for c in repo_server["spec"]["template"]["spec"]["containers"]}
    assert {"argocd-repo-server", "apprafter-cue"} <= set(containers)
    assert SIDECAR_MANAGER in managers(repo_server)
    cm = bed.get("v1", "ConfigMap", "argocd-cm", "argocd")
    assert cm is not None and "resource.customizations.health.apprafter.io_Application" in cm["data"]
    rbac = bed.get("v1", "ConfigMap", "argocd-rbac-cm", "argocd")
    assert rbac is not None and "role:apprafter-approver" in rbac["data"]["policy.apprafter.csv"]
    params = bed.get("v1", "ConfigMap", "argocd-cmd-params-cm", "argocd")
    assert params is not None and params["data"]["controller.repo.server.timeout.seconds"] == "90"
    # Issue 34: the project tenants' Argo CD Applications belong in permits apprafter.io Applications alone.
    tenants = bed.get("argoproj.io/v1alpha1", "AppProject", "apprafter-tenants", "argocd")
    assert tenants is not None and tenants["spec"]["namespaceResourceWhitelist"] == [
        {"group": "apprafter.io", "kind": "Application"}]
    assert not tenants["spec"].get("clusterResourceWhitelist")


def test_a_second_run_changes_nothing_and_says_so(bed: KubeTestBed, publisher: Publisher, run: Run) -> None:
    before = {ident(o): live(bed, o)["metadata"]["resourceVersion"] for o in run.objects}
    again = bootstrap(bed, publisher)
    assert again.returncode == 0, again.stderr
    assert "nothing to change" in again.stdout.splitlines()[-1]
    assert "Argo CD found in namespace argocd" in again.stdout
    assert not re.search(r"^(created|applied) ", again.stdout, re.M)
    assert {ident(o): live(bed, o)["metadata"]["resourceVersion"] for o in run.objects} == before
    dry = bootstrap(bed, publisher, "--dry-run")
    assert dry.returncode == 0 and dry.stdout == "", dry.stderr


def test_a_second_run_leaves_an_upgraded_stack_alone(bed: KubeTestBed, publisher: Publisher, run: Run) -> None:
    """After `apprafter platform upgrade` (a pin), the loader does not undo it: it created the PlatformStack once."""
    pinned = cli("platform", "upgrade", "--to", "1.2.0", "--kubeconfig", str(bed.kubeconfig))
    assert pinned.returncode == 0, pinned.stderr
    again = bootstrap(bed, publisher)
    assert again.returncode == 0, again.stderr
    assert "platformstack/default: exists: left as it is" in again.stdout
    stack = bed.get(API, "PlatformStack", "default", NS)
    assert stack is not None and stack["spec"]["pin"] == "1.2.0"


# --- an Argo CD someone else installed --------------------------------------------------------------------------

def root_versions(kube: KubeTestBed, since: str, until: str) -> list[tuple[str, dict[str, Any]]]:
    """Every version of the root Application written after resourceVersion `since`, in order, up to the one at
    `until`: the API server's watch from `since` replays each write (ADDED, MODIFIED) with the object as written."""
    path = f"/apis/{umbrella.API_VERSION}/namespaces/{umbrella.NAMESPACE}/applications"
    params = {"watch": "1", "resourceVersion": since, "fieldSelector": f"metadata.name={umbrella.NAME}",
              "timeoutSeconds": "60"}
    seen: list[tuple[str, dict[str, Any]]] = []
    with kube.http.stream("GET", path, params=params, timeout=90) as stream:
        for line in stream.iter_lines():
            event = json.loads(line) if line else None
            if event is None:
                continue
            assert event["type"] in ("ADDED", "MODIFIED"), event
            seen.append((event["type"], event["object"]))
            if event["object"]["metadata"]["resourceVersion"] == until:
                return seen
    raise AssertionError(f"the watch did not reach resourceVersion {until}: {[t for t, _ in seen]}")


def test_an_installed_argo_cd_is_not_installed_again_and_the_operator_takes_over(
        publisher: Publisher, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Argo CD applied as its guide says (kubectl, server-side), then the loader with a manifest at hand: it installs
    nothing of Argo CD's, only puts our settings on the four objects they patch; the team tier pins the version. Then
    the operator's PlatformStack controller verifies the same release with the key the loader stored, records it as
    applied, and finds the root Application already what it would write (no write). Issue 40: `--gateway-class
    traefik` is in every version of the root Application from the first (Argo CD syncs that one before any operator
    runs), and the `gateway` component the published chart makes of it names traefik."""
    kube = start_kube(tmp_path_factory.mktemp("kube-argocd"), install_crds=False)
    operator: Operator | None = None
    try:
        kube.ensure_namespace("argocd")
        for obj in install_objects(ARGOCD):
            kube.apply(obj, namespace="argocd", field_manager="kubectl")
        installed = [ident({**o, "metadata": {**o["metadata"], "namespace": "argocd"}})
                     for o in install_objects(ARGOCD)]
        applications = f"/apis/{umbrella.API_VERSION}/namespaces/{umbrella.NAMESPACE}/applications"

        def served() -> dict[str, Any] | None:
            resp = kube.http.get(applications)
            return resp.json() if resp.status_code == 200 else None
        listed = wait_for("Argo CD's Application kind served", served, 60, interval=0.1)
        assert listed["items"] == []
        before = listed["metadata"]["resourceVersion"]  # every write of the root comes after this
        proc = cli("cluster-bootstrap", f"oci://{publisher.registry.url}/{REPO}/platform-stack", "--version",
                   "1.1.0", "--key", str(publisher.keys["release"][1]), "--tier", "team",
                   "--argocd-manifest", str(install_manifest(ARGOCD)), "--kubeconfig", str(kube.kubeconfig),
                   "--registry-secret", "registry-credentials", "--gateway-class", "traefik",
                   env={"DOCKER_CONFIG": publisher.env["DOCKER_CONFIG"]})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("Argo CD found in namespace argocd (crd/applications.argoproj.io, "), proc.stdout
        patched = {("Deployment", "argocd-repo-server"), ("ConfigMap", "argocd-cm"),
                   ("ConfigMap", "argocd-cmd-params-cm"), ("ConfigMap", "argocd-rbac-cm")}
        for api_version, kind, _, name in installed:
            namespace = "argocd" if kube.resource_for(api_version, kind).namespaced else None
            found = kube.get(api_version, kind, name, namespace)
            assert found is not None
            expected = {"kubectl", SIDECAR_MANAGER} if (kind, name) in patched else {"kubectl"}
            assert managers(found) - {"kube-controller-manager", "kube-apiserver"} == expected, (kind, name)
        stack = kube.get(API, "PlatformStack", "default", NS)
        assert stack is not None
        assert stack["spec"]["autoUpgrade"] is False and stack["spec"]["pin"] == "1.1.0"
        assert json.dumps(stack["spec"]["values"]) == '{"tier": "team"}'
        # Its first version (generation 1: the spec was never written again) has the class asked.
        assert stack["metadata"]["generation"] == 1
        assert stack["spec"]["overrides"] == {"gateway": {"values": {"gatewayClassName": "traefik"}}}

        root = kube.get(umbrella.API_VERSION, umbrella.KIND, umbrella.NAME, umbrella.NAMESPACE)
        assert root is not None
        kube.install_crds([f for f in bed_crd_files() if any(k.plural in f.name for k in KINDS)])  # children's kinds
        kube.apply(publisher.registry.pull_secret("registry-credentials", NS))
        operator = chart_operator(kube, tmp_path_factory.mktemp("operator"), ("--no-leader-elect", *FAST),
                                  (NS, umbrella.NAMESPACE)).start()
        digest = publisher.digest(REPO, "1.1.0")

        def applied() -> dict[str, Any] | None:
            st = (kube.get(API, "PlatformStack", "default", NS) or {}).get("status") or {}
            ready = next((c for c in st.get("conditions") or [] if c["type"] == "Ready"), {})
            return st if ready.get("reason") == "Applied" else None
        st = wait_for("the PlatformStack Applied", applied, 60, interval=0.1)
        assert st["currentVersion"] == "1.1.0" and st["lastApplied"]["digest"] == digest
        after = kube.get(umbrella.API_VERSION, umbrella.KIND, umbrella.NAME, umbrella.NAMESPACE)
        assert after is not None
        # Every version of the root Application ever written, the overrides in each from the first; and only one:
        # the loader's, which the controller found already what it would write.
        versions = root_versions(kube, before, after["metadata"]["resourceVersion"])
        for kind, version in versions:
            assert version["spec"]["source"]["helm"]["valuesObject"].get("overrides") == stack["spec"]["overrides"], \
                (kind, version["metadata"]["resourceVersion"])
        assert [kind for kind, _ in versions] == ["ADDED"]
        assert after["metadata"]["resourceVersion"] == root["metadata"]["resourceVersion"]
        # What Argo CD makes of the first version: the published chart's `gateway` Application names traefik.
        values = tmp_path_factory.mktemp("values") / "values.yaml"
        values.write_text(json.dumps(versions[0][1]["spec"]["source"]["helm"]["valuesObject"]))
        gateway = applications_of(helm_template(publisher.charts["1.1.0"], "-f", str(values)))["gateway"]
        assert gateway["spec"]["source"]["helm"]["valuesObject"]["gatewayClassName"] == "traefik"
    finally:
        if operator is not None:
            operator.stop()
        kube.stop()
