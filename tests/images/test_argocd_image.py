"""Argo CD's image and its Redis as `make images` builds them (deploy/images/argocd.Dockerfile, redis.Dockerfile):
the pinned binary byte for byte under every component's name, as upstream's image lays it out; Debian's
redis-server as the entrypoint install.yaml's arguments run. They run as pods in test_bootstrap_node.py."""

from __future__ import annotations

import hashlib

import pytest

from tests.images.podman import Image, inspect, podman
from tests.testbed.argocd import ARGOCD_VERSIONS
from tests.testbed.procs import tool

pytestmark = pytest.mark.images

COMPONENTS = ("server", "repo-server", "cmp-server", "application-controller", "dex", "notifications",
              "applicationset-controller", "k8s-auth", "commit-server")


def test_argocd_image_is_the_pinned_binary_under_every_component_name(images: dict[str, Image]) -> None:
    ref = images["argocd"].ref
    listing = podman("run", "--rm", "--read-only", "--user", "999", ref, "sh", "-c",
                     "id -u; sha256sum /usr/local/bin/argocd; for f in /usr/local/bin/argocd-*; do "
                     "echo \"$f $(readlink \"$f\")\"; done; argocd version --client --short").stdout.splitlines()
    pinned = hashlib.sha256(tool("argocd").read_bytes()).hexdigest()
    assert listing[0] == "999"
    assert listing[1] == f"{pinned}  /usr/local/bin/argocd"
    assert sorted(listing[2:-1]) == sorted(f"/usr/local/bin/argocd-{c} /usr/local/bin/argocd" for c in COMPONENTS)
    assert listing[-1].startswith(f"argocd: {ARGOCD_VERSIONS[0]}+")
    config = inspect(ref)["Config"]
    assert config["Entrypoint"] == ["/usr/bin/tini", "--"]
    assert config["Labels"]["org.opencontainers.image.version"] == ARGOCD_VERSIONS[0]


def test_argocd_image_has_the_tools_the_repo_server_runs(images: dict[str, Image]) -> None:
    found = podman("run", "--rm", "--read-only", "--user", "999", images["argocd"].ref, "sh", "-c",
                   "for t in git gpg ssh tini helm kustomize git-verify-wrapper.sh gpg-wrapper.sh entrypoint.sh; do "
                   "command -v $t >/dev/null && echo $t; done").stdout.split()
    assert found == ["git", "gpg", "ssh", "tini", "helm", "kustomize", "git-verify-wrapper.sh", "gpg-wrapper.sh",
                     "entrypoint.sh"]


def test_redis_image_runs_debians_redis_server_as_install_yaml_calls_it(images: dict[str, Image]) -> None:
    ref = images["redis"].ref
    assert inspect(ref)["Config"]["Entrypoint"] == ["/usr/bin/redis-server"]
    version = podman("run", "--rm", "--read-only", "--user", "999", ref, "--version").stdout
    assert version.startswith("Redis server v=7.")
