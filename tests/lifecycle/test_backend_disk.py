"""The storage-class backend's core (lifecycle/backends/disk.py): a disk claim's PersistentVolumeClaim (name, size,
class), when the claim is ready (Bound, or at once on a WaitForFirstConsumer class), a volume grown where its class
allows and never shrunk (the Size condition), another claim's volume left alone, and the drop (its own PVC only)."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.backends.contract import Apply, Delete, Gone, Ready, Seen, Site, Step, Waiting
from lifecycle.backends.disk import CORE, PVC, SIZES, STORAGE_CLASS, Volume, default_class
from lifecycle.backends.registry import core_for

SITE = Site("")


def claim(size: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "shop-disk", "namespace": "team", "labels": {"app.kubernetes.io/name": "shop"}},
            "spec": {"type": "disk", **({"size": size} if size else {})}}


def config(**given: Any) -> Any:
    found = CORE.configure({"metadata": {"name": "disk"}, "spec": {"type": "disk", "backend": "storage-class",
                                                                   "config": {"defaultSize": "10Gi", **given}}}, SITE)
    assert not isinstance(found, list), found
    return found


def storage_class(mode: str = "WaitForFirstConsumer", expand: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": "local"}, "volumeBindingMode": mode, "allowVolumeExpansion": expand}


def live(size: str, phase: str = "Bound", owner: str = "shop-disk") -> dict[str, Any]:
    return {"metadata": {"name": "shop-disk", "uid": "u-1", "labels": {"apprafter.io/claim": owner}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "resources": {"requests": {"storage": size}}}, "status": {"phase": phase}}


def provision(asked: str | None, pvc: dict[str, Any] | None, *classes: dict[str, Any], **given: Any) -> Step:
    cfg = config(**given)
    reads = CORE.reads(claim(asked), cfg)
    return CORE.provision(claim(asked), cfg, Seen(dict(zip(reads, (pvc, list(classes)), strict=True)), None, "", 0))


def size_reason(step: Step) -> str:
    assert isinstance(step.then, Ready | Waiting)
    [size] = step.then.conditions
    return size.reason


@pytest.mark.parametrize(("asked", "size"), [(None, "10Gi"), ("small", "5Gi"), ("xlarge", "500Gi"), ("3Gi", "3Gi"),
                                             ("1.5Gi", "1.5Gi")])
def test_the_size_comes_from_the_need_else_the_providers_default(asked: str | None, size: str) -> None:
    volume = CORE.volume(claim(asked), config(storageClassName="local"))
    assert isinstance(volume, Volume)
    assert (volume.name, volume.namespace, volume.size, volume.storage_class) == ("shop-disk", "team", size, "local")
    assert set(SIZES) == {"nano", "small", "medium", "large", "xlarge"}
    for bad in ("huge", "0", "-1Gi"):
        assert CORE.volume(claim(bad), config()) == (
            f"spec.size: {bad!r} is neither a named size (nano, small, medium, large, xlarge) nor a positive quantity")
    bare = CORE.configure({"metadata": {"name": "disk"}, "spec": {"type": "disk", "backend": "storage-class"}}, SITE)
    assert not isinstance(bare, list)
    assert CORE.volume(claim(), bare) == Volume("shop-disk", "team", "shop-disk", "disk", "1Gi", "ReadWriteOnce",
                                                None, "1Ti")  # the schema's: 1Gi, ReadWriteOnce, the default class


def test_a_new_volume_is_created_labelled_to_its_claim_and_not_owned_by_it() -> None:
    step = provision(None, None, {**storage_class(), "metadata": {"name": "local", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}})
    [made] = step.writes
    assert isinstance(made, Apply) and "ownerReferences" not in made.obj["metadata"]
    assert made.obj["metadata"]["labels"]["apprafter.io/claim"] == "shop-disk"
    assert made.obj["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    assert isinstance(step.then, Ready) and step.then.secret is None  # WaitForFirstConsumer: the pod binds it
    immediate = provision(None, None, storage_class("Immediate"), storageClassName="local")
    assert isinstance(immediate.then, Waiting) and immediate.then.reason == "VolumeNotBound"
    assert isinstance(provision(None, live("10Gi"), storage_class("Immediate")).then, Ready)
    assert not provision(None, live("10Gi"), storage_class("Immediate")).writes  # nothing to change


def test_a_volume_grows_where_its_class_allows_and_never_shrinks() -> None:
    grows = provision("20Gi", live("10Gi"), storage_class(expand=True))
    [grown] = grows.writes
    assert isinstance(grown, Apply) and grown.obj["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert grown.obj["spec"]["storageClassName"] == "local"  # immutable: applied as it is
    assert size_reason(grows) == "Expanding"
    fixed = provision("20Gi", live("10Gi"), storage_class(expand=False))
    assert not fixed.writes and size_reason(fixed) == "ExpansionNotSupported"
    unbound = provision("20Gi", live("10Gi", "Pending"), storage_class("Immediate", expand=True))
    assert not unbound.writes and size_reason(unbound) == "WaitingForBinding"
    refused = provision("5Gi", live("10Gi"), storage_class(expand=True))
    assert not refused.writes and size_reason(refused) == "SizeDecreaseRefused"
    assert isinstance(refused.then, Ready) and refused.then.connection["size"] == "10Gi"


def test_no_volume_is_made_or_grown_past_the_providers_max_size() -> None:
    """Issue 41: a need of 999999999Ti became a Ready PVC; the provider's maxSize (default 1Ti) bounds it."""
    huge = provision("999999999Ti", None, storage_class())
    assert not huge.writes and isinstance(huge.then, Waiting) and huge.then.reason == "SizeAboveLimit"
    assert huge.then.message == ("999999999Ti is above the provider's maxSize 1Ti: no volume is made (ask for less, "
                                 "or a provider that allows it)")
    capped = provision("30Gi", None, storage_class(), maxSize="20Gi")
    assert isinstance(capped.then, Waiting) and capped.then.reason == "SizeAboveLimit"
    at_limit = provision("20Gi", None, storage_class(), maxSize="20Gi")
    assert [type(w) for w in at_limit.writes] == [Apply]
    # an existing volume does not grow past it, and serves on at its size
    stays = provision("30Gi", live("10Gi"), storage_class(expand=True), maxSize="20Gi")
    assert not stays.writes and size_reason(stays) == "SizeAboveLimit"
    assert isinstance(stays.then, Ready) and stays.then.connection["size"] == "10Gi"


def test_another_claims_volume_under_the_name_is_left_alone_and_never_dropped() -> None:
    conflict = provision(None, live("10Gi", owner="other"), storage_class())
    assert not conflict.writes and isinstance(conflict.then, Waiting) and conflict.then.reason == "VolumeConflict"
    going = live("10Gi")
    going["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    deleting = provision(None, going, storage_class())
    assert isinstance(deleting.then, Waiting) and deleting.then.reason == "VolumeDeleting"
    cfg = config()
    reads = CORE.reads(claim(), cfg)

    def drop(pvc: dict[str, Any] | None) -> Step:
        return CORE.drop(claim(), cfg, Seen(dict(zip(reads, (pvc, []), strict=True)), None, "", 0))
    assert drop(live("10Gi")) == Step(Gone(), (Delete(reads[0].kind, "team", "shop-disk", "u-1"),))
    assert drop(live("10Gi", owner="other")) == Step(Gone())  # not its own: left alone
    assert drop(None) == Step(Gone())
    assert CORE.drop_needs_provider is False  # its PVC is found from the claim alone


def test_the_default_class_is_the_newest_marked_one() -> None:
    classes: list[dict[str, Any]] = [{"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z",
                             "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}},
               {"metadata": {"name": "b"}}]
    assert (default_class(classes) or {})["metadata"]["name"] == "a" and default_class(classes[1:]) is None


def test_what_the_edge_reads_is_the_claims_pvc_and_every_storage_class() -> None:
    pvc, classes = CORE.reads(claim(), config())
    assert (pvc.kind, pvc.namespace, pvc.name) == (PVC, "team", "shop-disk")
    assert (classes.kind, classes.namespace, classes.name, classes.labels) == (STORAGE_CLASS, None, None, ())


def test_a_new_volume_says_its_size_and_connection_and_takes_the_providers_access_mode_and_class() -> None:
    step = provision("small", None, storage_class(), storageClassName="local", accessMode="ReadWriteMany")
    [made] = step.writes
    assert isinstance(made, Apply) and made.obj["spec"] == {
        "accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "5Gi"}}, "storageClassName": "local"}
    assert (made.obj["metadata"]["namespace"], made.obj["metadata"]["name"]) == ("team", "shop-disk")
    assert made.obj["metadata"]["labels"]["apprafter.io/service-provider"] == "disk"
    assert isinstance(step.then, Ready)
    assert step.then.connection == {"pvcName": "shop-disk", "size": "5Gi", "storageClassName": "local",
                                    "accessMode": "ReadWriteMany"}
    [size] = step.then.conditions
    assert (size.type, size.status, size.reason) == ("Size", "True", "AsRequested")
    bound = provision("small", live("5Gi"), storage_class("Immediate"))
    assert size_reason(bound) == "AsRequested" and isinstance(bound.then, Ready)


def test_an_existing_volume_keeps_its_access_modes_and_class_when_it_grows() -> None:
    rwx = live("10Gi")
    rwx["spec"]["accessModes"] = ["ReadWriteMany"]
    grows = provision("20Gi", rwx, storage_class(expand=True), storageClassName="other")
    [grown] = grows.writes
    assert isinstance(grown, Apply)
    assert (grown.obj["spec"]["accessModes"], grown.obj["spec"]["storageClassName"]) == (["ReadWriteMany"], "local")


def test_a_volume_that_waits_says_why_with_its_size_and_connection() -> None:
    invalid = provision("huge", None, storage_class())
    assert isinstance(invalid.then, Waiting) and invalid.then.reason == "InvalidConfig" and not invalid.writes
    assert "'huge'" in invalid.then.message
    missing = provision(None, None, storageClassName="gold")
    assert isinstance(missing.then, Waiting) and missing.then.reason == "VolumeNotBound"
    assert "StorageClass gold, which does not exist" in missing.then.message
    assert size_reason(missing) == "AsRequested" and missing.then.fields["connection"]["pvcName"] == "shop-disk"
    no_default = provision(None, None, storage_class())  # a class, but none marked the default
    assert isinstance(no_default.then, Waiting) and "no default StorageClass exists" in no_default.then.message
    lost = provision(None, live("10Gi", "Lost"), storage_class())
    assert isinstance(lost.then, Waiting) and lost.then.reason == "VolumeLost" and not lost.writes
    assert size_reason(lost) == "AsRequested" and lost.then.fields["connection"]["size"] == "10Gi"


def test_a_volume_is_dropped_from_the_claim_alone_once_its_provider_is_gone() -> None:
    gone = CORE.configure({"metadata": {"name": "disk"}}, SITE)  # the edge's provider of that name, no spec
    assert not isinstance(gone, list)
    reads = CORE.reads(claim(), gone)
    step = CORE.drop(claim(), gone, Seen(dict(zip(reads, (live("10Gi"), []), strict=True)), None, "", 0))
    assert step == Step(Gone(), (Delete(PVC, "team", "shop-disk", "u-1"),))


def test_the_newest_of_several_default_classes_is_the_default() -> None:
    def marked(name: str, created: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "creationTimestamp": created,
                             "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}}
    classes = [marked("new", "2026-03-01T00:00:00Z"), marked("old", "2026-01-01T00:00:00Z")]
    assert (default_class(classes) or {})["metadata"]["name"] == "new"
    assert (default_class(list(reversed(classes))) or {})["metadata"]["name"] == "new"
    step = provision(None, None, {**storage_class("Immediate"), **marked("old", "2026-01-01T00:00:00Z")},
                     {**storage_class(), **marked("new", "2026-03-01T00:00:00Z")})
    assert isinstance(step.then, Ready) and step.then.connection["storageClassName"] == "new"  # its WFFC: ready


def test_the_registry_gives_disk_claims_on_storage_class_providers_this_core() -> None:
    assert core_for("disk", "storage-class") is CORE and core_for("disk", None) is CORE
    assert core_for("disk", "cloudnative-pg") is None and core_for("redis", "storage-class") is None
