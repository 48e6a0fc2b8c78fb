"""deploy/argocd/ is a kustomize Component: patches only, built by the real kustomize onto each supported Argo CD
version's own install.yaml, as a user's kustomization does. The settings the loop runs with, and the repo-server
with our sidecar (tests/cmp/test_deploy.py), are what it makes; test_component.py applies it to a live install."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.testbed.argocd import (
    ARGOCD_VERSIONS,
    configmaps_of,
    install_configmaps,
    install_objects,
    kustomize_build,
    with_component,
)
from tests.testbed.gitops import DEPLOY

VERSIONS = pytest.mark.parametrize("version", ARGOCD_VERSIONS, ids=[f"argocd-{v}" for v in ARGOCD_VERSIONS])


def key(obj: dict[str, object]) -> tuple[str, str]:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    return str(obj["kind"]), str(meta["name"])


@VERSIONS
def test_patches_merge_into_the_installs_configmaps_keeping_argo_cds_own_keys(version: str, tmp_path: Path) -> None:
    built = with_component(DEPLOY, version)
    plain, merged = install_configmaps(version), configmaps_of(built)
    assert set(plain) == set(merged)  # no ConfigMap of our own: each patch lands on one of the install's
    assert {o["metadata"].get("namespace") for o in built if o["kind"] == "ConfigMap"} == {"argocd"}
    assert "resource.exclusions" in plain["argocd-cm"]
    for name in plain:
        assert plain[name].items() <= merged[name].items()
    assert {k for k in merged["argocd-cm"] if k.startswith("resource.customizations.") and "apprafter.io_" in k} == {
        "resource.customizations.health.apprafter.io_Application",
        "resource.customizations.health.apprafter.io_MigrationPlan",
        "resource.customizations.actions.apprafter.io_MigrationPlan"}
    assert "policy.apprafter.csv" in merged["argocd-rbac-cm"]
    assert merged["argocd-cmd-params-cm"]["controller.repo.server.timeout.seconds"] == "90"


@VERSIONS
def test_the_component_adds_no_object_and_carries_nothing_of_argo_cds(version: str, tmp_path: Path) -> None:
    built = with_component(DEPLOY, version)
    assert sorted(map(key, built)) == sorted(map(key, install_objects(version)))
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Component"
    assert set(kustomization) == {"apiVersion", "kind", "patches"}  # no resources: nothing fetched, offline
    (tmp_path / "alone").mkdir()
    assert kustomize_build(DEPLOY, tmp_path / "alone") == []  # on its own it is no install: it makes nothing


@VERSIONS
def test_the_component_patches_an_install_already_in_its_namespace(version: str, tmp_path: Path) -> None:
    """An install rendered into its namespace (Helm's output, a vendored copy): the patches select by kind and
    name, so they land whether the namespace is set before the component runs or after."""
    root = tmp_path / "namespaced"
    shutil.copytree(DEPLOY, root / "component")
    docs = install_objects(version)
    for doc in docs:
        if doc["kind"] not in ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
            doc["metadata"]["namespace"] = "gitops"
    (root / "install.yaml").write_text(yaml.dump_all(docs, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
    (root / "kustomization.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": ["install.yaml"],
         "components": ["component"]}))
    built = kustomize_build(root, tmp_path)
    by_key = {key(o): o for o in built}
    assert by_key[("ConfigMap", "argocd-rbac-cm")]["metadata"]["namespace"] == "gitops"
    assert "policy.apprafter.csv" in by_key[("ConfigMap", "argocd-rbac-cm")]["data"]
    containers = by_key[("Deployment", "argocd-repo-server")]["spec"]["template"]["spec"]["containers"]
    assert "apprafter-cue" in {c["name"] for c in containers}
    assert configmaps_of(built) == configmaps_of(with_component(DEPLOY, version))
