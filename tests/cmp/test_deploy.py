"""The sidecar patch yields a repo-server Deployment the real API server accepts, with Argo CD's requirements."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.renderer.helpers import REPO
from tests.testbed.kube import KubeTestBed


def patched_repo_server() -> dict[str, Any]:
    patch = yaml.safe_load((REPO / "deploy" / "argocd" / "repo-server-patch.yaml").read_text())
    pod = patch["spec"]["template"]["spec"]
    labels = {"app.kubernetes.io/name": "argocd-repo-server"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "argocd-repo-server"},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "containers": [{"name": "argocd-repo-server", "image": "quay.io/argoproj/argocd:v3.0.23"},
                               *pod["containers"]],
                "volumes": [{"name": "var-files", "emptyDir": {}}, {"name": "plugins", "emptyDir": {}},
                            *pod["volumes"]]}}}}


def test_sidecar_meets_argo_cd_requirements() -> None:
    sidecar = patched_repo_server()["spec"]["template"]["spec"]["containers"][1]
    assert sidecar["securityContext"]["runAsUser"] == 999
    mounts = {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]}
    assert mounts == {"var-files": "/var/run/argocd", "plugins": "/home/argocd/cmp-server/plugins",
                      "apprafter-cue-tmp": "/tmp"}
    assert "memory" in sidecar["resources"]["limits"]
    dockerfile = (REPO / "Dockerfile").read_text()
    for line in ('USER 999', 'ENTRYPOINT ["/var/run/argocd/argocd-cmp-server"]', "HOME=/tmp",
                 "COPY plugin.yaml /home/argocd/cmp-server/config/plugin.yaml"):
        assert line in dockerfile


@pytest.mark.testbed
def test_patched_repo_server_passes_a_server_side_dry_run(kube: KubeTestBed) -> None:
    accepted = kube.dry_run_apply([patched_repo_server()], namespace="argocd")
    names = [c["name"] for c in accepted[0]["spec"]["template"]["spec"]["containers"]]
    assert names == ["argocd-repo-server", "apprafter-cue"]


def test_the_sidecar_image_is_the_one_the_spec_names() -> None:
    spec_image = "ghcr.io/apprafter/argocd-cue-cmp"  # spec: M1.5 "CUE CMP sidecar (ghcr.io/apprafter/argocd-cue-cmp)"
    sidecar = patched_repo_server()["spec"]["template"]["spec"]["containers"][1]
    assert sidecar["image"].rsplit(":", 1)[0] == spec_image
    name = spec_image.rsplit("/", 1)[1]
    assert f'org.opencontainers.image.title="{name}"' in (REPO / "Dockerfile").read_text()
    assert f"[{name}]=Dockerfile" in (REPO / "tools" / "images.sh").read_text()  # what `make images` tags
    from platform_stack.source import evaluate

    component = evaluate()["values"]["components"]["cue-cmp"]
    assert component["values"]["image"]["repository"] == spec_image
