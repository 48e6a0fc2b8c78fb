"""The storage-class backend's decisions (issue 31 item 4): a `disk` claim's PersistentVolumeClaim, its size, and
what the claim's status says. No I/O: reconciler/disk_claims.py reads the PVC and its StorageClass, calls these,
writes.

The PVC is named what the renderer mounts (`{app}-disk`), in the claim's namespace, labelled to its claim and NOT
owned by it: the data outlives the claim, and the same app and need find their volume again. A volume only grows:
a size increase patches the request (when its StorageClass allows expansion), a decrease is refused and said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any, NamedTuple

from lifecycle.binding import PROVISIONED
from lifecycle.conditions import Condition
from renderer.names import NAME_LABEL

__all__ = [
    "BACKEND",
    "CLAIM_LABEL",
    "DEFAULT_CLASS_ANNOTATION",
    "SIZES",
    "SIZE_CONDITION",
    "Plan",
    "Volume",
    "default_class",
    "drop_target",
    "plan",
    "serves",
    "size_bytes",
    "volume_name",
    "volume_of",
]

BACKEND = "storage-class"
CLAIM_LABEL = "apprafter.io/claim"  # on the PVC: the claim it belongs to (no ownerReference: it outlives the claim)
PROVIDER_LABEL = "apprafter.io/service-provider"
MANAGED_LABELS: Mapping[str, str] = {"app.kubernetes.io/managed-by": "apprafter",
                                     "app.kubernetes.io/component": "disk"}
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
SIZE_CONDITION = "Size"  # a second condition on disk claims: whether the volume has the size the need asks for
WAIT_FOR_CONSUMER = "WaitForFirstConsumer"
# A need's named size as a volume size: one table for every tier (a named size says how much data the app keeps,
# which does not change with the tier; the tier's share is the provider's defaultSize, for a need that names none).
SIZES: Mapping[str, str] = {"nano": "1Gi", "small": "5Gi", "medium": "20Gi", "large": "100Gi", "xlarge": "500Gi"}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P)?$")
_UNITS: Mapping[str, Decimal | int] = {"": 1, "m": Decimal("0.001"), "k": 1000, "M": 1000**2, "G": 1000**3,
                                       "T": 1000**4, "P": 1000**5, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
                                       "Ti": 2**40, "Pi": 2**50}


class Volume(NamedTuple):
    """A claim's PersistentVolumeClaim as the claim and its provider ask for it."""

    name: str
    namespace: str
    claim: str
    provider: str
    size: str
    access_mode: str
    storage_class: str | None  # None: the cluster's default StorageClass


class Plan(NamedTuple):
    """What the edge does for a claim: the PVC to apply (None: leave it as it is) and the claim's Ready and Size
    conditions and status fields."""

    apply: dict[str, Any] | None
    ready: Condition
    size: Condition | None
    fields: dict[str, Any]


def serves(claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> bool:
    """Whether this backend provisions the claim: a disk claim bound to a storage-class provider."""
    return (provider is not None and (provider.get("spec") or {}).get("backend") == BACKEND
            and (claim.get("spec") or {}).get("type") == "disk")


def size_bytes(quantity: Any) -> Decimal | None:
    """A Kubernetes quantity in bytes (None: not one)."""
    found = _QUANTITY.match(str(quantity)) if quantity is not None else None
    return Decimal(found.group(1)) * _UNITS[found.group(2) or ""] if found else None


def volume_name(claim: Mapping[str, Any]) -> str:
    """`{app}-disk`: the claimName renderer/manifests/workload.py mounts (the claim is `{app}-disk` too)."""
    meta = claim.get("metadata") or {}
    app = (meta.get("labels") or {}).get(NAME_LABEL)
    name = str(meta.get("name") or "")
    return f"{app}-disk" if app else name


def volume_of(claim: Mapping[str, Any], provider: Mapping[str, Any]) -> Volume | list[str]:
    """The claim's volume: size from the need (a quantity as it is, a named size from SIZES, none: the provider's
    defaultSize), access mode and class from the provider; or what is wrong (each `field: problem`)."""
    meta = claim.get("metadata") or {}
    config = (provider.get("spec") or {}).get("config") or {}
    config = config if isinstance(config, Mapping) else {}
    asked = (claim.get("spec") or {}).get("size")
    problems = []
    size = SIZES.get(str(asked), str(asked)) if asked is not None else config.get("defaultSize")
    if size is None:
        problems.append(f"ServiceProvider {(provider.get('metadata') or {}).get('name')}: spec.config.defaultSize "
                        "is not set and the need names no size")
    elif size_bytes(size) is None or not size_bytes(size):
        problems.append(f"spec.size: {asked!r} is neither a named size ({', '.join(SIZES)}) nor a quantity"
                        if asked is not None else f"spec.config.defaultSize: {size!r} is not a quantity")
    if problems:
        return problems
    storage_class = config.get("storageClassName")
    return Volume(volume_name(claim), str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                  str((provider.get("metadata") or {}).get("name") or ""), str(size),
                  str(config.get("accessMode") or "ReadWriteOnce"), str(storage_class) if storage_class else None)


def default_class(classes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The cluster's default StorageClass (the one annotated so; several: the newest, as the API server picks)."""
    marked = [c for c in classes
              if ((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"]
    marked.sort(key=lambda c: str((c.get("metadata") or {}).get("creationTimestamp") or ""))
    return marked[-1] if marked else None


def _object(volume: Volume, live: Mapping[str, Any] | None) -> dict[str, Any]:
    """The PVC to apply: the rest of its spec is immutable, so an existing one keeps its access modes and class
    (applied as they are: a field this manager applied and leaves out would be removed)."""
    labels = {**MANAGED_LABELS, CLAIM_LABEL: volume.claim, PROVIDER_LABEL: volume.provider}
    was = (live or {}).get("spec") or {}
    storage_class = was.get("storageClassName") if live is not None else volume.storage_class
    spec: dict[str, Any] = {"accessModes": list(was.get("accessModes") or [volume.access_mode]),
                            "resources": {"requests": {"storage": volume.size}},
                            **({"storageClassName": storage_class} if storage_class else {})}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": volume.name, "namespace": volume.namespace, "labels": labels}, "spec": spec}


def _waiting(reason: str, message: str) -> Plan:
    return Plan(None, Condition(PROVISIONED, "False", reason, message), None, {"ready": False})


def plan(volume: Volume, live: Mapping[str, Any] | None, storage_class: Mapping[str, Any] | None) -> Plan:
    """What to do for the claim given its live PVC (None: none yet) and the StorageClass it is (or will be) of
    (None: unknown, or no default class). Ready once the PVC is Bound, or at once when its class binds on the first
    consumer (WaitForFirstConsumer: the pod's scheduling binds it, and the pod waits for the claim: waiting for
    Bound would be a deadlock)."""
    where = f"PersistentVolumeClaim {volume.namespace}/{volume.name}"
    if live is None:
        live_size, phase = None, "Pending"
        apply: dict[str, Any] | None = _object(volume, None)
    else:
        owner = ((live.get("metadata") or {}).get("labels") or {}).get(CLAIM_LABEL)
        if owner != volume.claim:
            return _waiting("VolumeConflict", f"{where} exists and is not this claim's (label {CLAIM_LABEL}="
                            f"{owner or '<none>'}): it is left alone; delete or rename it, or rename the app")
        if (live.get("metadata") or {}).get("deletionTimestamp"):
            return _waiting("VolumeDeleting", f"{where} is being deleted (its data was dropped): a new one is made "
                            "once it is gone")
        live_size = str(((live.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage") or "")
        phase = str((live.get("status") or {}).get("phase") or "Pending")
        apply = None
    size = _size(volume, live_size, phase, storage_class, where)
    if size is not None and size.reason == "Expanding":
        apply = _object(volume, live)
    class_name = (storage_class or {}).get("metadata", {}).get("name") or volume.storage_class
    connection = {"pvcName": volume.name, "size": live_size or volume.size,
                  "storageClassName": (live or {}).get("spec", {}).get("storageClassName") or class_name or "",
                  "accessMode": volume.access_mode}
    waits_for_pod = (storage_class or {}).get("volumeBindingMode") == WAIT_FOR_CONSUMER
    if phase == "Bound" or (phase == "Pending" and waits_for_pod):
        said = "Bound" if phase == "Bound" else "binds when the app's pod is scheduled (WaitForFirstConsumer)"
        ready = Condition(PROVISIONED, "True", "Provisioned", f"{where} ({connection['size']}, class "
                          f"{connection['storageClassName'] or 'the default'}) {said}; mounted at the need's mountPath")
        return Plan(apply, ready, size, {"ready": True, "connection": connection})
    if phase == "Lost":
        return Plan(apply, Condition(PROVISIONED, "False", "VolumeLost", f"{where} lost its PersistentVolume"),
                    size, {"ready": False, "connection": connection})
    class_said = (f"StorageClass {class_name}" + ("" if storage_class is not None else ", which does not exist")
                  if class_name else "no default StorageClass exists")
    return Plan(apply, Condition(PROVISIONED, "False", "VolumeNotBound", f"{where} is {phase}, not Bound yet "
                                 f"({class_said}: its provisioner binds it)"), size,
                {"ready": False, "connection": connection})


def _size(volume: Volume, live_size: str | None, phase: str, storage_class: Mapping[str, Any] | None,
          where: str) -> Condition | None:
    """The Size condition: the volume has the size asked for, grows to it, or cannot (refused: never shrinks)."""
    if live_size is None:
        return Condition(SIZE_CONDITION, "True", "AsRequested", f"{where} requested at {volume.size}")
    have, want = size_bytes(live_size), size_bytes(volume.size)
    if have is None or want is None or have == want:
        return Condition(SIZE_CONDITION, "True", "AsRequested", f"{where} is {live_size}")
    if want < have:
        return Condition(SIZE_CONDITION, "False", "SizeDecreaseRefused", f"{volume.size} is below the volume's "
                         f"{live_size}: a volume never shrinks (that would be a copy of the data to a new, smaller "
                         f"volume); {where} stays at {live_size}")
    if storage_class is not None and storage_class.get("allowVolumeExpansion") is not True:
        return Condition(SIZE_CONDITION, "False", "ExpansionNotSupported", f"{volume.size} is above the volume's "
                         f"{live_size}, and StorageClass {storage_class['metadata']['name']} does not allow volume "
                         f"expansion: {where} stays at {live_size}")
    if phase != "Bound":
        return Condition(SIZE_CONDITION, "False", "WaitingForBinding", f"{where} grows to {volume.size} once it is "
                         "Bound (an unbound claim's request cannot change)")
    return Condition(SIZE_CONDITION, "True", "Expanding", f"{where} requested at {volume.size} (was {live_size}); "
                     "its provisioner expands the volume")


def drop_target(claim: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """Whether `live` is the claim's PVC, and so the one to delete when its data is dropped."""
    meta = claim.get("metadata") or {}
    return live is not None and ((live.get("metadata") or {}).get("labels") or {}).get(CLAIM_LABEL) == meta.get("name")
