"""CRD upgrades as docs/install.md gives them, through a real API server: the operator chart's CRDs come from its
`crds/` directory, which Helm installs once and never changes (nor deletes); a new version's CRDs are applied with
`apprafter crds | kubectl apply --server-side --force-conflicts -f -`. Without --force-conflicts the API server
refuses: Helm's field manager owns every field it created. kubectl is not part of the test bed: its server-side apply
is one PATCH (application/apply-patch+yaml, fieldManager=kubectl, force=true|false), sent here as it sends it."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.platform_stack.conftest import helm, ok
from tests.renderer.helpers import REPO, run_cli
from tests.testbed.kube import KubeTestBed, start_kube

pytestmark = pytest.mark.testbed

CHART = REPO / "deploy" / "charts" / "apprafter-operator"
NAMESPACE, RELEASE = "apprafter-system", "apprafter-operator"
CRD_API = "apiextensions.k8s.io/v1"
APPLICATIONS = "applications.apprafter.io"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeTestBed]:
    """An API server of its own with the chart installed by `helm install` (its webhooks fail closed)."""
    kube = start_kube(tmp_path_factory.mktemp("kube"))
    try:
        kube.ensure_namespace("argocd")  # the chart grants the PlatformStack controller its Applications there
        kube.ensure_namespace("apprafter-gateway")  # and the operator the public Gateway's listeners there
        on(kube, "install", RELEASE, str(CHART), "--create-namespace")
        yield kube
    finally:
        kube.stop()


def on(bed: KubeTestBed, *args: str) -> str:
    return ok(helm(*args, "--namespace", NAMESPACE, "--kubeconfig", str(bed.kubeconfig)))


def cli_crds() -> list[dict[str, Any]]:
    """What `apprafter crds` prints."""
    result = run_cli("crds")
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def next_version(crds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The CRDs of a next release: a field added to Application's spec, a description reworded."""
    out = copy.deepcopy(crds)
    [app] = [c for c in out if c["metadata"]["name"] == APPLICATIONS]
    schema = app["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["description"] = "An AppRafter Application (next release)."
    schema["properties"]["spec"]["properties"]["nextField"] = {"type": "string"}
    return out


def kubectl_apply_server_side(bed: KubeTestBed, crd: dict[str, Any], force: bool) -> tuple[int, dict[str, Any]]:
    """`kubectl apply --server-side [--force-conflicts]` of one CRD: the status code and the server's answer."""
    resp = bed.http.patch(bed.resource_for(CRD_API, "CustomResourceDefinition").path(crd["metadata"]["name"]),
                          params={"fieldManager": "kubectl", "force": "true" if force else "false"},
                          content=json.dumps(crd).encode(), headers={"Content-Type": "application/apply-patch+yaml"})
    return resp.status_code, resp.json()


def stored(bed: KubeTestBed, name: str = APPLICATIONS) -> dict[str, Any]:
    crd = bed.get(CRD_API, "CustomResourceDefinition", name)
    assert crd is not None
    return crd


def test_helm_installs_the_crds_of_apprafter_crds(bed: KubeTestBed) -> None:
    for crd in cli_crds():
        live = stored(bed, crd["metadata"]["name"])
        assert [v["schema"] for v in live["spec"]["versions"]] == [v["schema"] for v in crd["spec"]["versions"]]
        managers = {(m["manager"], m["operation"]) for m in live["metadata"]["managedFields"]
                    if m.get("subresource") != "status"}  # the API server writes the status
        assert managers == {("helm", "Update")}  # Helm creates crds/ (not an apply)


def test_a_crd_upgrade_needs_force_conflicts_against_helms_field_manager(bed: KubeTestBed, tmp_path: Path) -> None:
    upgraded = next_version(cli_crds())
    [app] = [c for c in upgraded if c["metadata"]["name"] == APPLICATIONS]
    code, answer = kubectl_apply_server_side(bed, app, force=False)
    assert code == 409, answer
    assert answer["reason"] == "Conflict" and 'conflict with "helm"' in answer["message"]
    assert "nextField" not in json.dumps(stored(bed)["spec"])  # nothing of it was stored

    for crd in upgraded:  # the documented command, for every CRD
        code, answer = kubectl_apply_server_side(bed, crd, force=True)
        assert code == 200, answer
    schema = stored(bed)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"]["spec"]["properties"]["nextField"] == {"type": "string"}
    assert schema["description"] == "An AppRafter Application (next release)."

    # helm upgrade replaces the Deployments and leaves the CRDs as applied (crds/ is read on install only) ...
    on(bed, "upgrade", RELEASE, str(CHART), "--reuse-values", "--set", "operator.replicas=2")
    assert stored(bed)["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == schema
    # ... and the next CRD upgrade goes through without a conflict: kubectl owns what it took over
    again = copy.deepcopy(app)
    again["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "An AppRafter Application (and again)."
    assert kubectl_apply_server_side(bed, again, force=False)[0] == 200


def test_helm_uninstall_keeps_the_crds_and_every_object_of_them(bed: KubeTestBed) -> None:
    """Why the chart does not template its CRDs: uninstalling it must not delete every Application in the cluster."""
    on(bed, "uninstall", RELEASE)
    for crd in cli_crds():
        assert bed.get(CRD_API, "CustomResourceDefinition", crd["metadata"]["name"]) is not None
