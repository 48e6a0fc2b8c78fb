"""The test bed with the apprafter CRDs installed, and one operator subprocess per module that wants it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compatibility.crd import ALL_CRDS
from platform_stack.resource import PLATFORM_STACK
from renderer.crds import crd_documents
from renderer.emit import dump_stream
from tests.reconciler.operator_proc import FAST, Operator
from tests.testbed.kube import KubeTestBed
from tests.testbed.rollouts import RolloutStandIn


def install_our_crds(bed: KubeTestBed, directory: Path) -> KubeTestBed:
    path = directory / "apprafter-crds.yaml"
    path.write_text(dump_stream(crd_documents((*ALL_CRDS, PLATFORM_STACK))))
    bed.install_crds([path])
    return bed


@pytest.fixture(scope="module")
def bed(kube: KubeTestBed, rollouts: RolloutStandIn, tmp_path_factory: pytest.TempPathFactory) -> KubeTestBed:
    """The session's bare API server with our CRDs, its Deployments marked rolled out (tests/testbed/rollouts.py)."""
    return install_our_crds(kube, tmp_path_factory.mktemp("crds"))


@pytest.fixture(scope="module")
def operator(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """One operator for the module: every namespace, no leader election, fast resync and backoff."""
    op = Operator(bed, tmp_path_factory.mktemp("operator"), ("--no-leader-elect", *FAST)).start()
    try:
        yield op
    finally:
        op.stop()
