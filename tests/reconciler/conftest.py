"""The test bed with the apprafter CRDs installed, and one operator subprocess per module that wants it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from lifecycle.crd import OPERATOR_CRDS
from platform_stack.resource import PLATFORM_STACK
from renderer.crds import crd_documents
from renderer.emit import dump_stream
from renderer.manifests import KINDS
from tests.reconciler.helpers import CREATED, forget
from tests.reconciler.operator_proc import FAST, Operator, operator_fixture
from tests.testbed.crds import bed_crd_files
from tests.testbed.kube import KubeTestBed, start_kube
from tests.testbed.rollouts import RolloutStandIn, start_rollouts
from tests.testbed.sealed_secrets import SealedSecrets, start_sealed_secrets

# The hostnames the tests' Applications ask for (example.com and the webapp example's shop.acme.example), granted
# to every namespace as a cluster administrator of a one-team cluster would (docs/operator.md "Public hostnames").
TEST_HOSTNAMES = {"apiVersion": "apprafter.io/v1alpha1", "kind": "HostnamePolicy", "metadata": {"name": "test-bed"},
                  "spec": {"allNamespaces": True, "allowedHostnames": {
                      "allowedRegex": r"([a-z0-9-]+\.)*example\.com|shop\.acme\.example"}}}


def install_our_crds(bed: KubeTestBed, directory: Path) -> KubeTestBed:
    path = directory / "apprafter-crds.yaml"
    path.write_text(dump_stream(crd_documents((*OPERATOR_CRDS, PLATFORM_STACK))))
    bed.install_crds([path])
    bed.apply(TEST_HOSTNAMES)
    return bed


@contextlib.contextmanager
def own_test_bed(workdir: Path) -> Iterator[KubeTestBed]:
    """A test bed of one's own (for a test that stops its etcd or API server): our CRDs and the child kinds', its
    Deployments marked rolled out (tests/testbed/rollouts.py)."""
    kube = start_kube(workdir / "kube", install_crds=False)
    stand_in = start_rollouts(kube)  # it lists again after a restart, as the controller-manager would
    try:
        kube.install_crds([f for f in bed_crd_files() if any(k.plural in f.name for k in KINDS)])
        yield install_our_crds(kube, workdir)
    finally:
        stand_in.stop()
        kube.stop()


@pytest.fixture(scope="module")
def bed(kube: KubeTestBed, rollouts: RolloutStandIn, tmp_path_factory: pytest.TempPathFactory) -> KubeTestBed:
    """The session's bare API server with our CRDs, its Deployments marked rolled out (tests/testbed/rollouts.py)."""
    return install_our_crds(kube, tmp_path_factory.mktemp("crds"))


# One operator for the module: every namespace, no leader election, fast resync and backoff.
operator = operator_fixture("--no-leader-elect", *FAST)


@pytest.fixture(scope="module")
def sealed_secrets(bed: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SealedSecrets]:
    """The real SealedSecrets controller on the module's bed (its CRD installed), stopped after the module."""
    controller = start_sealed_secrets(bed, tmp_path_factory.mktemp("sealed-secrets"))
    try:
        yield controller
    finally:
        controller.stop()


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
