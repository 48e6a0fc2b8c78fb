"""deploy/argocd/helm-values.yaml (Argo CD's Helm chart) is what scripts/argocd_helm_values.py makes of the
component's patches: the same sidecar, timeouts, resource customizations and approver role, by one source. Argo CD's
chart (argo-helm) is on no registry this machine reaches, so it is not rendered here (docs/argocd.md says what was
checked against it by hand)."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.renderer.helpers import REPO
from tests.testbed.gitops import DEPLOY

SCRIPT = REPO / "scripts" / "argocd_helm_values.py"


def test_the_helm_values_are_generated_from_the_patches() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_helm_values_carry_each_patch_whole() -> None:
    values = yaml.safe_load((DEPLOY / "helm-values.yaml").read_text())
    repo_server = yaml.safe_load((DEPLOY / "repo-server-patch.yaml").read_text())["spec"]["template"]["spec"]
    assert values["repoServer"] == {"extraContainers": repo_server["containers"], "volumes": repo_server["volumes"]}
    for name, key in (("argocd-cm", "cm"), ("argocd-cmd-params-cm", "params"), ("argocd-rbac-cm", "rbac")):
        assert values["configs"][key] == yaml.safe_load((DEPLOY / f"{name}-patch.yaml").read_text())["data"]
