"""The test bed with the apprafter CRDs installed, and one operator subprocess per module that wants it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lifecycle.crd import OPERATOR_CRDS
from platform_stack.resource import PLATFORM_STACK
from renderer.crds import crd_documents
from renderer.emit import dump_stream
from tests.reconciler.helpers import CREATED, forget
from tests.reconciler.operator_proc import FAST, Operator
from tests.testbed.kube import KubeTestBed


def install_our_crds(bed: KubeTestBed, directory: Path) -> KubeTestBed:
    path = directory / "apprafter-crds.yaml"
    path.write_text(dump_stream(crd_documents((*OPERATOR_CRDS, PLATFORM_STACK))))
    bed.install_crds([path])
    return bed


@pytest.fixture(scope="module")
def bed(kube: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> KubeTestBed:
    return install_our_crds(kube, tmp_path_factory.mktemp("crds"))


@pytest.fixture(scope="module")
def operator(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """One operator for the module: every namespace, no leader election, fast resync and backoff."""
    op = Operator(bed, tmp_path_factory.mktemp("operator"), ("--no-leader-elect", *FAST)).start()
    try:
        yield op
    finally:
        op.stop()


@pytest.fixture(autouse=True)
def forgotten(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the module's operator, its deployments are retired for good (helpers.forget): a
    public hostname it held would otherwise stay its own (it outlives the Application) and refuse the next test's."""
    CREATED.clear()
    yield
    if "operator" in request.fixturenames and CREATED:
        op: Operator = request.getfixturevalue("operator")
        forget(op.bed, op.log, op.records_namespace, list(CREATED))
    CREATED.clear()
