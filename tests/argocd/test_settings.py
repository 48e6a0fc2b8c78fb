"""deploy/argocd/ built by the real kustomize on Argo CD's own install: the settings the loop runs with, and the
repo-server with our plugin sidecar (tests/cmp/test_deploy.py) are what `kubectl apply -k deploy/argocd` applies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.testbed.argocd import configmaps_of, install_configmaps, kustomize_build
from tests.testbed.gitops import DEPLOY
from tests.testbed.procs import BedError
from toolchain.pins import pins


def test_patches_merge_into_the_installs_configmaps_keeping_argo_cds_own_keys(tmp_path: Path) -> None:
    built = kustomize_build(DEPLOY, tmp_path)
    plain, merged = install_configmaps(), configmaps_of(built)
    assert set(plain) == set(merged)  # no ConfigMap of our own: each patch lands on one of the install's
    assert {o["metadata"].get("namespace") for o in built if o["kind"] == "ConfigMap"} == {"argocd"}
    assert "resource.exclusions" in plain["argocd-cm"]
    assert plain["argocd-cm"].items() <= merged["argocd-cm"].items()
    assert {k for k in merged["argocd-cm"] if k.startswith("resource.customizations.") and "apprafter.io_" in k} == {
        "resource.customizations.health.apprafter.io_Application",
        "resource.customizations.health.apprafter.io_MigrationPlan",
        "resource.customizations.actions.apprafter.io_MigrationPlan"}
    assert "policy.apprafter.csv" in merged["argocd-rbac-cm"]
    assert merged["argocd-cmd-params-cm"]["controller.repo.server.timeout.seconds"] == "90"


def test_a_patch_of_a_configmap_the_install_lacks_is_refused_by_kustomize(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    shutil.copytree(DEPLOY, overlay)
    (overlay / "argocd-cm-patch.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-config}\ndata: {a: b}\n")
    (tmp_path / "build").mkdir()
    with pytest.raises(BedError, match=r"kustomize build .* failed .*argocd-config"):
        kustomize_build(overlay, tmp_path / "build")


def test_an_overlay_on_another_argo_cd_version_is_refused(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    shutil.copytree(DEPLOY, overlay)
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    version = pins()["ARGOCD_VERSION"]
    kustomization["resources"] = [r.replace(f"/{version}/", "/v2.14.0/") for r in kustomization["resources"]]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    (tmp_path / "build").mkdir()
    with pytest.raises(BedError, match=f"want one remote resource ending /argo-cd/{version}/manifests/install.yaml"):
        kustomize_build(overlay, tmp_path / "build")
