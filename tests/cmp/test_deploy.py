"""The sidecar patch, built by the real kustomize onto each supported Argo CD version's install (deploy/argocd as a
component), yields a repo-server Deployment the real API server accepts, with Argo CD's requirements."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from tests.renderer.helpers import REPO
from tests.testbed.argocd import ARGOCD_VERSIONS, with_component
from tests.testbed.kube import KubeTestBed

VERSIONS = pytest.mark.parametrize("version", ARGOCD_VERSIONS, ids=[f"argocd-{v}" for v in ARGOCD_VERSIONS])


@functools.cache
def patched_repo_server(version: str = ARGOCD_VERSIONS[0]) -> dict[str, Any]:
    """argocd-repo-server as a kustomization of Argo CD `version`'s install with deploy/argocd makes it."""
    built = with_component(REPO / "deploy" / "argocd", version)
    [deployment] = [o for o in built if o["kind"] == "Deployment" and o["metadata"]["name"] == "argocd-repo-server"]
    return deployment


def sidecar(version: str = ARGOCD_VERSIONS[0]) -> dict[str, Any]:
    [container] = [c for c in patched_repo_server(version)["spec"]["template"]["spec"]["containers"]
                   if c["name"] == "apprafter-cue"]
    return container


@VERSIONS
def test_sidecar_meets_argo_cd_requirements(version: str) -> None:
    cue = sidecar(version)
    assert cue["securityContext"]["runAsUser"] == 999
    mounts = {m["name"]: m["mountPath"] for m in cue["volumeMounts"]}
    assert mounts == {"var-files": "/var/run/argocd", "plugins": "/home/argocd/cmp-server/plugins",
                      "apprafter-cue-tmp": "/tmp"}
    assert "memory" in cue["resources"]["limits"]
    volumes = {v["name"] for v in patched_repo_server(version)["spec"]["template"]["spec"]["volumes"]}
    assert set(mounts) <= volumes  # Argo CD's own var-files and plugins volumes, and ours
    dockerfile = (REPO / "Dockerfile").read_text()
    for line in ('USER 999', 'ENTRYPOINT ["/var/run/argocd/argocd-cmp-server"]', "HOME=/tmp",
                 "COPY plugin.yaml /home/argocd/cmp-server/config/plugin.yaml"):
        assert line in dockerfile


@pytest.mark.testbed
@VERSIONS
def test_patched_repo_server_passes_a_server_side_dry_run(kube: KubeTestBed, version: str) -> None:
    accepted = kube.dry_run_apply([patched_repo_server(version)], namespace="argocd")
    names = [c["name"] for c in accepted[0]["spec"]["template"]["spec"]["containers"]]
    assert sorted(names) == ["apprafter-cue", "argocd-repo-server"]  # kustomize puts the patch's container first


def test_the_sidecar_image_is_the_one_the_spec_names() -> None:
    spec_image = "ghcr.io/apprafter/argocd-cue-cmp"  # spec: M1.5 "CUE CMP sidecar (ghcr.io/apprafter/argocd-cue-cmp)"
    assert sidecar()["image"].rsplit(":", 1)[0] == spec_image
    name = spec_image.rsplit("/", 1)[1]
    assert f'org.opencontainers.image.title="{name}"' in (REPO / "Dockerfile").read_text()
    assert f"[{name}]=Dockerfile" in (REPO / "tools" / "images.sh").read_text()  # what `make images` tags
    from platform_stack.source import evaluate

    argocd = evaluate()["values"]["components"]["argocd"]  # the stack installs the sidecar with Argo CD
    assert argocd["values"]["repoServer"]["extraContainers"] == [sidecar()]
