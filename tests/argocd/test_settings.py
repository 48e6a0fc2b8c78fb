"""deploy/argocd/'s ConfigMap patches merge onto Argo CD's own install, which the loop runs with."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.testbed.argocd import kustomized_configmaps
from tests.testbed.gitops import CONFIGMAP_PATCHES, DEPLOY
from tests.testbed.procs import BedError


def test_the_loop_applies_exactly_the_kustomizations_configmap_patches() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert [p["path"] for p in kustomization["patches"]] == ["repo-server-patch.yaml", *CONFIGMAP_PATCHES]


def test_patches_merge_into_the_installs_configmaps_keeping_argo_cds_own_keys() -> None:
    plain = kustomized_configmaps([])
    merged = kustomized_configmaps([DEPLOY / f for f in CONFIGMAP_PATCHES])
    assert set(plain) == set(merged)  # no ConfigMap of our own: each patch lands on one of the install's
    assert "resource.exclusions" in plain["argocd-cm"]
    assert plain["argocd-cm"].items() <= merged["argocd-cm"].items()
    assert {k for k in merged["argocd-cm"] if k.startswith("resource.customizations.") and "apprafter.io_" in k} == {
        "resource.customizations.health.apprafter.io_Application",
        "resource.customizations.health.apprafter.io_MigrationPlan",
        "resource.customizations.actions.apprafter.io_MigrationPlan"}
    assert "policy.apprafter.csv" in merged["argocd-rbac-cm"]
    assert merged["argocd-cmd-params-cm"]["controller.repo.server.timeout.seconds"] == "90"


def test_a_patch_of_a_configmap_the_install_lacks_is_refused(tmp_path: Path) -> None:
    typo = tmp_path / "patch.yaml"
    typo.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-config}\ndata: {a: b}\n")
    with pytest.raises(BedError, match="not a patch of a ConfigMap of Argo CD's install"):
        kustomized_configmaps([typo])
