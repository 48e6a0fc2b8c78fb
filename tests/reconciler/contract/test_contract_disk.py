"""The backend contract (suite.py) for storage-class: a claim's data is its PersistentVolumeClaim. On this tier no
provisioner writes files: a PVC's identity (its uid) and an annotation on it stand for the data, and a claim's reach
is the volume its app mounts (its own PVC, in its own namespace). Files on a real volume: tests/reconciler/
test_disk_node.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pytest

from lifecycle.backends.disk import CLAIM_LABEL
from tests.reconciler.contract.suite import *  # noqa: F403 - the contract's tests, run here for storage-class
from tests.reconciler.contract.suite import Handle
from tests.reconciler.helpers import API, add_provider, edit
from tests.reconciler.operator_proc import FAST, operator_fixture
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
CLASS = PROVIDER = f"ct-disk-{RUN}"
MARKER = "test.apprafter.io/marker"


class DiskContract:
    need = "disk"
    kept_apart = False  # its PVC is in the claim's namespace: it goes with it
    fields = None

    def __init__(self, bed: KubeTestBed) -> None:
        self.bed = bed

    def needs(self) -> dict[str, Any]:
        return edit(needs={"disk": {"selector": {"bed": RUN}}}, env={"LOG_LEVEL": "info"}, expose={"port": 8080})

    def volume(self, claim: Handle) -> dict[str, Any] | None:
        return self.bed.get("v1", "PersistentVolumeClaim", claim["connection"]["pvcName"], claim["namespace"])

    def write(self, claim: Handle, marker: str) -> None:
        found = self.volume(claim)
        assert found is not None
        self.bed.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
            "name": found["metadata"]["name"], "namespace": claim["namespace"], "annotations": {MARKER: marker}}},
            field_manager="the-app")

    def read(self, claim: Handle) -> str | None:
        found = self.volume(claim) or {}
        return (found.get("metadata", {}).get("annotations") or {}).get(MARKER)

    def denied(self, claim: Handle, other: Handle) -> None:
        mine, theirs = self.volume(claim), self.volume(other)
        assert mine is not None and theirs is not None
        assert mine["metadata"]["uid"] != theirs["metadata"]["uid"]
        # the app mounts the PVC of its claim's name in its own namespace: only its own is that
        assert (mine["metadata"]["namespace"], mine["metadata"]["labels"][CLAIM_LABEL]) == (
            claim["namespace"], f"demo-{self.need}")

    def dropped(self, claim: Handle) -> bool:
        found = self.volume(claim)
        return found is None or bool(found["metadata"].get("deletionTimestamp"))

    def settled(self) -> AbstractContextManager[None]:
        return nullcontext()


@pytest.fixture(scope="module")
def contract(bed: KubeTestBed) -> Iterator[DiskContract]:
    # WaitForFirstConsumer: the claim is ready at once (the app's pod binds the volume)
    bed.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": CLASS},
               "provisioner": "example.com/none", "volumeBindingMode": "WaitForFirstConsumer"}, field_manager="admin")
    add_provider(bed, PROVIDER, "disk", "storage-class", {"storageClassName": CLASS}, labels={"bed": RUN})
    yield DiskContract(bed)
    bed.delete(API, "ServiceProvider", PROVIDER)
    bed.delete("storage.k8s.io/v1", "StorageClass", CLASS)


operator = operator_fixture("--no-leader-elect", *FAST)
