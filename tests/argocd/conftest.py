"""Fixtures of the Argo CD tier: our CRDs in the test bed, and the GitOps loop (tests/testbed/gitops.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.argocd.objects import PROD, STAGING
from tests.testbed.gitops import GitOpsLoop, install_apprafter_crds, start_loop
from tests.testbed.kube import KubeTestBed
from tests.testbed.rollouts import RolloutStandIn


@pytest.fixture(scope="session")
def apprafter_crds(kube: KubeTestBed, rollouts: RolloutStandIn, testbed_dir: Path) -> list[str]:
    """Our CRDs, as `apprafter crds` prints them, installed and served (and the bare bed's Deployments marked
    rolled out: tests/testbed/rollouts.py)."""
    return install_apprafter_crds(kube, testbed_dir)


@pytest.fixture(scope="module")
def loop(kube: KubeTestBed, apprafter_crds: list[str], testbed_dir: Path) -> Iterator[GitOpsLoop]:
    """The whole loop for one test module, deploying into PROD and STAGING; torn down after it (Argo CD's
    controller watches every kind, and the webhook fails closed)."""
    running = start_loop(kube, testbed_dir / "gitops", (PROD, STAGING))
    try:
        yield running
    finally:
        running.stop()
