"""`needs: disk` through the API server (reconciler/disk_claims.py, lifecycle/disk_backend.py) and gated deletion
(lifecycle/retention.py): an Application's disk claim gets its PersistentVolumeClaim `{app}-disk` (size, class and
access mode from the need and its provider), ready once Bound or at once on a WaitForFirstConsumer class; it grows,
never shrinks; deleting the claim keeps the volume and the same app gets it back; removing the need waits for a
data-migration plan, and approving it deletes the volume.

The bare API server runs no provisioner and no garbage collector: a test binds a PVC by writing its status phase (as
a provisioner's controller does), and a PVC deleted keeps its kubernetes.io/pvc-protection finalizer (the
controller-manager removes it): deleted means deletionTimestamp set. Real provisioning: test_disk_node.py."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lifecycle.retention import DROP_ANNOTATION, FINALIZER
from tests.reconciler.helpers import (
    API,
    add_provider,
    app,
    apply,
    condition,
    cr,
    edit,
    events,
    fresh_namespace,
    plan_phase,
    plans,
    wait,
    wait_phase,
    wait_showing,
)
from tests.reconciler.operator_proc import FAST, Operator, operator_fixture
from tests.renderer.helpers import run_cli
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

RUN = uuid.uuid4().hex[:8]
LATE, EAGER = f"disk-late-{RUN}", f"disk-eager-{RUN}"  # StorageClasses: WaitForFirstConsumer, Immediate


def needs(kind: str, size: str | None = None) -> dict[str, Any]:
    disk: dict[str, Any] = {"selector": {"bed": RUN, "disk": kind}, **({"size": size} if size else {})}
    return edit(needs={"disk": disk}, env={"LOG_LEVEL": "info"}, expose={"port": 8080})


@pytest.fixture(scope="module")
def providers(bed: KubeTestBed) -> Iterator[None]:
    """Two StorageClasses and a storage-class provider of each (as a cluster administrator makes them)."""
    for name, mode in ((LATE, "WaitForFirstConsumer"), (EAGER, "Immediate")):
        bed.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                   "provisioner": "example.com/none", "volumeBindingMode": mode, "allowVolumeExpansion": True},
                  field_manager="admin")
    for name, kind, cls in ((LATE, "late", LATE), (EAGER, "eager", EAGER)):
        add_provider(bed, name, "disk", "storage-class",
                     {"storageClassName": cls, "defaultSize": "1Gi", "accessMode": "ReadWriteOnce"},
                     labels={"bed": RUN, "disk": kind})
    yield
    for name in (LATE, EAGER):
        bed.delete(API, "ServiceProvider", name)
        bed.delete("storage.k8s.io/v1", "StorageClass", name)


operator = operator_fixture("--no-leader-elect", *FAST)


def claim(bed: KubeTestBed, namespace: str) -> dict[str, Any]:
    return bed.get(API, "ResourceClaim", "demo-disk", namespace) or {}


def volume(bed: KubeTestBed, namespace: str) -> dict[str, Any]:
    return bed.get("v1", "PersistentVolumeClaim", "demo-disk", namespace) or {}


def ready_claim(bed: KubeTestBed, namespace: str, timeout: float = 30) -> dict[str, Any]:
    return wait_showing(f"{namespace}/demo-disk ready", lambda: claim(bed, namespace).get("status") if (
        claim(bed, namespace).get("status") or {}).get("ready") is True else None, timeout,
        lambda: claim(bed, namespace).get("status"), "claim status now")


def size_is(bed: KubeTestBed, namespace: str, reason: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        said = condition(claim(bed, namespace).get("status") or {}, "Size") or {}
        return said if said.get("reason") == reason else None
    return wait_showing(f"Size {reason}", probe, 30, lambda: claim(bed, namespace).get('status'), "claim status now")


def bind(bed: KubeTestBed, namespace: str) -> None:
    """What a provisioner's controller does: the PVC Bound (its capacity what it asked for)."""
    info = bed.resource_for("v1", "PersistentVolumeClaim")
    asked = volume(bed, namespace)["spec"]["resources"]["requests"]["storage"]
    body = {"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": asked}}}
    resp = bed.http.patch(info.path("demo-disk", namespace) + "/status", content=json.dumps(body).encode(),
                          headers={"Content-Type": "application/merge-patch+json"})
    resp.raise_for_status()


def test_a_disk_need_gets_its_volume_ready_at_once_on_a_wait_for_first_consumer_class(
        bed: KubeTestBed, operator: Operator, providers: None) -> None:
    namespace = fresh_namespace(bed, "disk")
    started = time.monotonic()
    apply(bed, cr(namespace, needs("late", "small")))
    st = ready_claim(bed, namespace)
    print(f"Application with needs.disk -> claim ready (WaitForFirstConsumer): {time.monotonic() - started:.2f} s")
    pvc = volume(bed, namespace)
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"  # small, from the one table
    assert pvc["spec"]["storageClassName"] == LATE and pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert not pvc["metadata"].get("ownerReferences"), "the volume must outlive its claim"
    assert pvc["metadata"]["labels"]["apprafter.io/claim"] == "demo-disk"
    assert st["connection"] == {"pvcName": "demo-disk", "size": "5Gi", "storageClassName": LATE,
                                "accessMode": "ReadWriteOnce"}
    assert "WaitForFirstConsumer" in (condition(st, "Ready") or {})["message"]
    assert FINALIZER in claim(bed, namespace)["metadata"]["finalizers"]


def test_a_volume_past_the_providers_max_size_is_not_made_and_the_application_says_why(
        bed: KubeTestBed, operator: Operator, providers: None) -> None:
    """Issue 41: a need of 999999999Ti became a Ready PVC; past the provider's maxSize (default 1Ti) nothing is
    made, and the Application's ClaimsReady names the reason."""
    namespace = fresh_namespace(bed, "disk")
    apply(bed, cr(namespace, needs("late", "999999999Ti")))

    def refused() -> str | None:
        said = condition((app(bed, namespace).get("status") or {}), "ClaimsReady") or {}
        return str(said["message"]) if "maxSize" in str(said.get("message")) else None
    message = wait_showing("the Application's ClaimsReady naming maxSize", refused, 30,
                           lambda: app(bed, namespace).get("status"))
    assert "999999999Ti is above the provider's maxSize 1Ti" in message
    said = condition(claim(bed, namespace).get("status") or {}, "Ready") or {}
    assert (said.get("status"), said.get("reason")) == ("False", "SizeAboveLimit")
    assert not volume(bed, namespace)


def test_an_immediate_class_waits_for_bound_and_the_volume_grows_but_never_shrinks(
        bed: KubeTestBed, operator: Operator, providers: None) -> None:
    namespace = fresh_namespace(bed, "disk")
    apply(bed, cr(namespace, needs("eager", "2Gi")))
    wait("VolumeNotBound", lambda: (condition(claim(bed, namespace).get("status") or {}, "Ready") or {}).get(
        "reason") == "VolumeNotBound" or None, 30)
    assert (claim(bed, namespace)["status"]).get("ready") is False
    bind(bed, namespace)
    ready_claim(bed, namespace)

    apply(bed, cr(namespace, needs("eager", "3Gi")))
    wait_showing("request grown", lambda: volume(bed, namespace)["spec"]["resources"]["requests"]["storage"] == "3Gi"
                 or None, 30, lambda: claim(bed, namespace).get("status"), "claim status now")
    apply(bed, cr(namespace, needs("eager", "1Gi")))
    refused = size_is(bed, namespace, "SizeDecreaseRefused")
    assert refused["status"] == "False" and "never shrinks" in refused["message"]
    assert volume(bed, namespace)["spec"]["resources"]["requests"]["storage"] == "3Gi"
    assert claim(bed, namespace)["status"]["ready"] is True  # the app keeps its (larger) volume


def test_the_volume_outlives_its_claim_and_the_same_app_gets_it_back(
        bed: KubeTestBed, operator: Operator, providers: None) -> None:
    namespace = fresh_namespace(bed, "disk")
    apply(bed, cr(namespace, needs("late")))
    ready_claim(bed, namespace)
    uid = volume(bed, namespace)["metadata"]["uid"]
    old = claim(bed, namespace)["metadata"]["uid"]
    # what the garbage collector does when the Application goes (the bare API server runs none); the Application
    # is still there, so its claim comes back
    bed.delete(API, "ResourceClaim", "demo-disk", namespace)
    wait("the claim made anew", lambda: claim(bed, namespace).get("metadata", {}).get("uid") not in (None, old)
         or None, 30)
    ready_claim(bed, namespace)
    assert volume(bed, namespace)["metadata"]["uid"] == uid and not volume(bed, namespace)["metadata"].get(
        "deletionTimestamp")
    wait("the DataRetained event", lambda: any("no approved data-migration plan" in e.get("note", "")
                                               for e in events(bed, namespace, "DataRetained")) or None, 30)


def test_removing_the_need_waits_for_a_data_migration_plan_and_approving_it_deletes_the_volume(
        bed: KubeTestBed, operator: Operator, providers: None, tmp_path: Path) -> None:
    namespace = fresh_namespace(bed, "disk")
    apply(bed, cr(namespace, needs("late")))
    ready_claim(bed, namespace)
    wait_phase(bed, namespace, "Ready")
    apply(bed, cr(namespace, edit(needs("late"), needs=None)))
    wait_phase(bed, namespace, "AwaitingMigrationApproval")
    [plan] = plans(bed, namespace)
    assert {c["type"] for c in plan["spec"]["changes"]} >= {"need-removed"}
    assert claim(bed, namespace) and not volume(bed, namespace)["metadata"].get("deletionTimestamp")

    name = plan["metadata"]["name"]
    result = run_cli("migration", "approve", name, "-n", namespace, "--kubeconfig", str(bed.kubeconfig))
    assert result.returncode == 0, result.stderr
    wait("the claim gone", lambda: not claim(bed, namespace) or None, 30)
    # deleted: on the bare API server its pvc-protection finalizer (the controller-manager's) keeps it listed
    wait("the volume deleted", lambda: not volume(bed, namespace) or volume(bed, namespace)["metadata"].get(
        "deletionTimestamp") or None, 30)
    # the Event is recorded once the drop is done, after the volume's delete: waited for, as any other writer's
    [dropped] = wait("the DataDropped event", lambda: events(bed, namespace, "DataDropped") or None, 30)
    assert name in dropped["note"] and "needs.disk" in dropped["note"]
    wait("plan applied", lambda: plan_phase(bed, namespace, name) == "applied" or None)


def test_an_administrator_drops_the_data_of_a_claim_by_its_annotation(
        bed: KubeTestBed, operator: Operator, providers: None) -> None:
    namespace = fresh_namespace(bed, "disk")
    apply(bed, cr(namespace, needs("late")))
    ready_claim(bed, namespace)
    info = bed.resource_for(API, "ResourceClaim")
    resp = bed.http.patch(info.path("demo-disk", namespace), params={"fieldManager": "admin"},
                          content=json.dumps({"metadata": {"annotations": {DROP_ANNOTATION: "admin"}}}).encode(),
                          headers={"Content-Type": "application/merge-patch+json"})
    resp.raise_for_status()
    uid = volume(bed, namespace)["metadata"]["uid"]
    bed.delete(API, "ResourceClaim", "demo-disk", namespace)
    wait("the volume deleted", lambda: (volume(bed, namespace).get("metadata") or {}).get("uid") != uid or volume(
        bed, namespace)["metadata"].get("deletionTimestamp") or None, 30)
    [dropped] = wait("the DataDropped event", lambda: events(bed, namespace, "DataDropped") or None, 30)
    assert "administrator" in dropped["note"]
