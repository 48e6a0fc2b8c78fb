"""The platform stack's AppRafter components point at this repository's operator chart and images, by name and
version: the apprafter-operator and apprafter-admission components install deploy/charts/apprafter-operator
(each one half of it), the argocd component carries the sidecar image `make images` builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lifecycle.crd import OPERATOR_CRDS
from platform_stack.resource import PLATFORM_STACK
from tests.charts.chart import CHART, VERSION, container, find, one, render
from tests.images.podman import IMAGES
from tests.platform_stack.conftest import ALL_TIERS, applications, helm_template
from tests.renderer.helpers import REPO

CHART_META = yaml.safe_load((CHART / "Chart.yaml").read_text())


def source(app: dict[str, Any]) -> tuple[str, str, str]:
    s = app["spec"]["source"]
    return s["repoURL"], s["chart"], s["targetRevision"]


def names(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_operator_and_admission_components_install_the_two_halves_of_the_operator_chart(stack_all: Path,
                                                                                        tier: str) -> None:
    apps = applications(helm_template(stack_all, "--set", f"tier={tier}"))
    operator, admission = apps["apprafter-operator"], apps["apprafter-admission"]
    for app in (operator, admission):
        assert source(app) == ("ghcr.io/apprafter/charts", CHART_META["name"], CHART_META["version"])
        assert app["spec"]["destination"]["namespace"] == "apprafter-system"
    assert "skipCrds" not in operator["spec"]["source"]["helm"]  # the operator's release carries the CRDs
    assert admission["spec"]["source"]["helm"]["skipCrds"] is True
    # Each component's values, through the real chart (its values.schema.json included).
    halves = [render(app["spec"]["source"]["helm"]["valuesObject"], "--include-crds", release=app["metadata"]["name"])
              for app in (operator, admission)]
    for objects, deployment in zip(halves, ("apprafter-operator", "apprafter-admission"), strict=True):
        [made] = find(objects, "Deployment")
        assert made["metadata"]["name"] == deployment
        assert container(made)["image"] == f"ghcr.io/apprafter/apprafter-operator:{VERSION}"
    crds = [names(find(objects, "CustomResourceDefinition")) for objects in halves]
    ours = {("CustomResourceDefinition", f"{kind.plural}.apprafter.io") for kind in (*OPERATOR_CRDS, PLATFORM_STACK)}
    assert crds[0] == ours and crds[1] == crds[0]  # in the chart; Argo CD skips them for the admission half
    replicas = [app["spec"]["source"]["helm"]["valuesObject"][half].get("replicas")
                for app, half in ((operator, "operator"), (admission, "webhook"))]
    whole = names(render({"operator": {"replicas": replicas[0] or 1}, "webhook": {"replicas": replicas[1] or 2}}))
    assert names(halves[0]) - crds[0] | names(halves[1]) - crds[1] == whole
    assert not (names(halves[0]) - crds[0]) & (names(halves[1]) - crds[1])
    # The webhook half trusts the operator half's ServiceAccount as the only writer of status.
    [webhook] = find(halves[1], "Deployment")
    assert "--operator-user=system:serviceaccount:apprafter-system:apprafter-operator" in container(webhook)["args"]
    assert one(halves[0], "ServiceAccount", "apprafter-operator")


def test_argocd_component_carries_the_plugin_as_deploy_argocd_helm_values_do(stack_all: Path) -> None:
    """The stack installs the CUE plugin with Argo CD (no chart of its own): the argocd Application's values hold
    deploy/argocd/helm-values.yaml whole, the sidecar being the image of this version."""
    values = applications(helm_template(stack_all, "--set", "tier=solo"))["argocd"]["spec"]["source"]["helm"][
        "valuesObject"]
    plugin = yaml.safe_load((REPO / "deploy" / "argocd" / "helm-values.yaml").read_text())
    assert values["repoServer"]["extraContainers"] == plugin["repoServer"]["extraContainers"]
    assert values["repoServer"]["volumes"] == plugin["repoServer"]["volumes"]
    for key, entries in plugin["configs"].items():
        assert values["configs"][key].items() >= entries.items(), key
    [sidecar] = values["repoServer"]["extraContainers"]
    repository, tag = sidecar["image"].rsplit(":", 1)
    assert (repository, tag) == ("ghcr.io/apprafter/argocd-cue-cmp", VERSION)
    assert repository.rsplit("/", 1)[1] in IMAGES
