"""Fixtures of the Argo CD tier: our CRDs in the test bed, and the GitOps loop (tests/testbed/gitops.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.argocd.objects import PROD, STAGING
from tests.testbed.argocd import ARGOCD_VERSIONS
from tests.testbed.gitops import GitOpsLoop, install_apprafter_crds, start_loop
from tests.testbed.kube import KubeTestBed
from tests.testbed.rollouts import RolloutStandIn


@pytest.fixture(scope="session")
def apprafter_crds(kube: KubeTestBed, rollouts: RolloutStandIn, testbed_dir: Path) -> list[str]:
    """Our CRDs, as `apprafter crds` prints them, installed and served (and the bare bed's Deployments marked
    rolled out: tests/testbed/rollouts.py)."""
    return install_apprafter_crds(kube, testbed_dir)


@pytest.fixture(scope="module", params=ARGOCD_VERSIONS, ids=[f"argocd-{v}" for v in ARGOCD_VERSIONS])
def argocd_version(request: pytest.FixtureRequest) -> str:
    """Each supported Argo CD version in turn (the pin, then the oldest supported line): a module's tests run once
    per version."""
    return str(request.param)


@pytest.fixture(scope="module")
def loop(kube: KubeTestBed, apprafter_crds: list[str], testbed_dir: Path, argocd_version: str,
         ) -> Iterator[GitOpsLoop]:
    """The whole loop for one test module and Argo CD version, deploying into PROD and STAGING; torn down after it
    (Argo CD's controller watches every kind, and the webhook fails closed)."""
    running = start_loop(kube, testbed_dir / f"gitops-{argocd_version}", (PROD, STAGING), version=argocd_version)
    try:
        yield running
    finally:
        running.stop()
