"""lifecycle.disk_backend: a disk claim's PersistentVolumeClaim (name, size, class), when the claim is ready (Bound,
or at once on a WaitForFirstConsumer class), and its size: grown where the class allows, never shrunk."""

from __future__ import annotations

from typing import Any

import pytest

from lifecycle.disk_backend import SIZES, Volume, default_class, drop_target, plan, serves, size_bytes, volume_of


def claim(size: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "shop-disk", "namespace": "team", "labels": {"app.kubernetes.io/name": "shop"}},
            "spec": {"type": "disk", **({"size": size} if size else {})}}


def provider(**config: Any) -> dict[str, Any]:
    return {"metadata": {"name": "disk"}, "spec": {"type": "disk", "backend": "storage-class", "config": {
        "defaultSize": "10Gi", "accessMode": "ReadWriteOnce", **config}}}


def storage_class(mode: str = "WaitForFirstConsumer", expand: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": "local"}, "volumeBindingMode": mode, "allowVolumeExpansion": expand}


def live(size: str, phase: str = "Bound", owner: str = "shop-disk") -> dict[str, Any]:
    return {"metadata": {"name": "shop-disk", "labels": {"apprafter.io/claim": owner}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "resources": {"requests": {"storage": size}}}, "status": {"phase": phase}}


@pytest.mark.parametrize(("asked", "size"), [(None, "10Gi"), ("small", "5Gi"), ("xlarge", "500Gi"), ("3Gi", "3Gi"),
                                             ("1.5Gi", "1.5Gi")])
def test_the_size_comes_from_the_need_else_the_providers_default(asked: str | None, size: str) -> None:
    volume = volume_of(claim(asked), provider(storageClassName="local"))
    assert isinstance(volume, Volume)
    assert (volume.name, volume.namespace, volume.size, volume.storage_class) == ("shop-disk", "team", size, "local")
    assert set(SIZES) == {"nano", "small", "medium", "large", "xlarge"}


def test_a_new_volume_is_created_labelled_to_its_claim_and_not_owned_by_it() -> None:
    volume = volume_of(claim(), provider())
    assert isinstance(volume, Volume)
    decided = plan(volume, None, storage_class())
    assert decided.apply is not None and "ownerReferences" not in decided.apply["metadata"]
    assert decided.apply["metadata"]["labels"]["apprafter.io/claim"] == "shop-disk"
    assert decided.apply["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    assert decided.fields["ready"] is True  # WaitForFirstConsumer: the pod's scheduling binds it
    immediate = plan(volume, None, storage_class("Immediate"))
    assert immediate.fields["ready"] is False and immediate.ready.reason == "VolumeNotBound"
    assert plan(volume, live("10Gi"), storage_class("Immediate")).fields["ready"] is True


def test_a_volume_grows_where_its_class_allows_and_never_shrinks() -> None:
    volume = volume_of(claim("20Gi"), provider())
    assert isinstance(volume, Volume)
    grows = plan(volume, live("10Gi"), storage_class(expand=True))
    assert grows.apply is not None and grows.apply["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert grows.apply["spec"]["storageClassName"] == "local"  # immutable: applied as it is
    assert grows.size is not None and grows.size.reason == "Expanding"
    fixed = plan(volume, live("10Gi"), storage_class(expand=False))
    assert fixed.apply is None and fixed.size is not None and fixed.size.reason == "ExpansionNotSupported"
    unbound = plan(volume, live("10Gi", "Pending"), storage_class(expand=True))
    assert unbound.apply is None and unbound.size is not None and unbound.size.reason == "WaitingForBinding"
    smaller = volume_of(claim("5Gi"), provider())
    assert isinstance(smaller, Volume)
    refused = plan(smaller, live("10Gi"), storage_class(expand=True))
    assert refused.apply is None and refused.size is not None and refused.size.reason == "SizeDecreaseRefused"
    assert refused.fields["ready"] is True and refused.fields["connection"]["size"] == "10Gi"


def test_another_claims_volume_under_the_name_is_left_alone() -> None:
    volume = volume_of(claim(), provider())
    assert isinstance(volume, Volume)
    decided = plan(volume, live("10Gi", owner="other"), storage_class())
    assert decided.apply is None and decided.ready.reason == "VolumeConflict"
    assert not drop_target(claim(), live("10Gi", owner="other")) and drop_target(claim(), live("10Gi"))
    going = live("10Gi")
    going["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    assert plan(volume, going, storage_class()).ready.reason == "VolumeDeleting"


def test_quantities_and_the_default_class() -> None:
    assert size_bytes("1Gi") == 2**30 and size_bytes("1.5G") == 1_500_000_000 and size_bytes("big") is None
    classes = [{"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z",
                             "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}},
               {"metadata": {"name": "b"}}]
    assert (default_class(classes) or {})["metadata"]["name"] == "a" and default_class(classes[1:]) is None
    assert serves(claim(), provider()) and not serves({"spec": {"type": "pg"}}, provider())
    assert volume_of(claim("huge"), provider()) == [
        "spec.size: 'huge' is neither a named size (nano, small, medium, large, xlarge) nor a quantity"]
