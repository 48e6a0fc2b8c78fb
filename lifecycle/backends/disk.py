"""The storage-class backend's core: a `disk` claim's PersistentVolumeClaim, its size, and what its status says.

The PVC is named what the renderer mounts (`{app}-disk`), in the claim's namespace, labelled to its claim and NOT
owned by it: the data outlives the claim, and the same app and need find their volume again. A volume only grows: a
size increase patches the request (when its StorageClass allows expansion), a decrease is refused and said in the
claim's second condition, Size. A disk has no connection Secret (the app mounts the PVC) and no client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from controller_runtime.kinds import GroupVersionKind
from controller_runtime.quantity import quantity
from lifecycle.backends.common import PROVIDER_LABEL, SIZE_CONDITION, config_of, provider_name
from lifecycle.backends.contract import Apply, Delete, Gone, Read, Ready, Seen, Site, Step, Waiting
from lifecycle.conditions import Condition
from renderer.names import NAME_LABEL

__all__ = ["BACKEND", "CLAIM_LABEL", "CORE", "DEFAULT_CLASS_ANNOTATION", "MANAGED_LABELS", "PVC", "SIZES",
           "SIZE_CONDITION", "STORAGE_CLASS", "StorageClassDisk", "Volume", "default_class", "volume_name"]

BACKEND, TYPE = "storage-class", "disk"
PVC = GroupVersionKind("v1", "PersistentVolumeClaim")
STORAGE_CLASS = GroupVersionKind("storage.k8s.io/v1", "StorageClass")
CLAIM_LABEL = "apprafter.io/claim"  # on the PVC: the claim it belongs to (no ownerReference: it outlives the claim)
MANAGED_LABELS: Mapping[str, str] = {"app.kubernetes.io/managed-by": "apprafter",
                                     "app.kubernetes.io/component": "disk"}
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
WAIT_FOR_CONSUMER = "WaitForFirstConsumer"
# A need's named size as a volume size: one table for every tier (a named size says how much data the app keeps,
# which does not change with the tier; the tier's share is the provider's defaultSize, for a need that names none).
SIZES: Mapping[str, str] = {"nano": "1Gi", "small": "5Gi", "medium": "20Gi", "large": "100Gi", "xlarge": "500Gi"}


class Volume(NamedTuple):
    """A claim's PersistentVolumeClaim as the claim and its provider ask for it."""

    name: str
    namespace: str
    claim: str
    provider: str
    size: str
    access_mode: str
    storage_class: str | None  # None: the cluster's default StorageClass
    max_size: str | None = None  # the provider's maxSize: no claim's volume is made or grown past it


def volume_name(claim: Mapping[str, Any]) -> str:
    """`{app}-disk`: the claimName renderer/manifests/workload.py mounts (the claim is `{app}-disk` too)."""
    meta = claim.get("metadata") or {}
    app = (meta.get("labels") or {}).get(NAME_LABEL)
    return f"{app}-disk" if app else str(meta.get("name") or "")


def default_class(classes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The cluster's default StorageClass (the one annotated so; several: the newest, as the API server picks)."""
    marked = [c for c in classes
              if ((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"]
    marked.sort(key=lambda c: str((c.get("metadata") or {}).get("creationTimestamp") or ""))
    return marked[-1] if marked else None


def _pvc(volume: Volume, live: Mapping[str, Any] | None) -> dict[str, Any]:
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


def _size(volume: Volume, live_size: str | None, phase: str, storage_class: Mapping[str, Any] | None,
          where: str) -> Condition:
    """The Size condition: the volume has the size asked for, grows to it, or cannot (refused: never shrinks)."""
    if live_size is None:
        return Condition(SIZE_CONDITION, "True", "AsRequested", f"{where} requested at {volume.size}")
    have, want = quantity(live_size), quantity(volume.size)
    if have is None or want is None or have == want:
        return Condition(SIZE_CONDITION, "True", "AsRequested", f"{where} is {live_size}")
    if volume.max_size is not None and want > (quantity(volume.max_size) or want):
        return Condition(SIZE_CONDITION, "False", "SizeAboveLimit", f"{volume.size} is above the provider's maxSize "
                         f"{volume.max_size}: {where} stays at {live_size}")
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


class StorageClassDisk:
    """The storage-class backend's core (lifecycle.backends.contract.Backend)."""

    backend, type, drop_needs_provider = BACKEND, TYPE, False

    def configure(self, provider: Mapping[str, Any], site: Site) -> Mapping[str, Any] | list[str]:
        config = config_of(provider, TYPE, BACKEND)
        return config if isinstance(config, list) else {**config, "provider": provider_name(provider)}

    def volume(self, claim: Mapping[str, Any], config: Mapping[str, Any]) -> Volume | str:
        """The claim's volume: size from the need (a quantity as it is, a named size from SIZES, none: the
        provider's defaultSize), access mode and class from the provider; or what is wrong with the size."""
        meta = claim.get("metadata") or {}
        asked = (claim.get("spec") or {}).get("size")
        size = SIZES.get(str(asked), str(asked)) if asked is not None else str(config["defaultSize"])
        value = quantity(size)
        if value is None or value <= 0:  # "0" or "-1Gi" parse, and no volume has that size
            return f"spec.size: {asked!r} is neither a named size ({', '.join(SIZES)}) nor a positive quantity"
        storage_class = config.get("storageClassName")
        return Volume(volume_name(claim), str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                      str(config["provider"]), size, str(config["accessMode"]),
                      str(storage_class) if storage_class else None, str(config["maxSize"]))

    def reads(self, claim: Mapping[str, Any], config: Mapping[str, Any]) -> Sequence[Read]:
        """The claim's PVC, and every StorageClass (the one it is of, or the default, is among them)."""
        namespace = str((claim.get("metadata") or {}).get("namespace") or "")
        return (Read(PVC, namespace, volume_name(claim)), Read(STORAGE_CLASS, None))

    def provision(self, claim: Mapping[str, Any], config: Mapping[str, Any], seen: Seen) -> Step:
        """Ready once the PVC is Bound, or at once when its class binds on the first consumer (WaitForFirstConsumer:
        the pod's scheduling binds it, and the pod waits for the claim: waiting for Bound would be a deadlock)."""
        volume = self.volume(claim, config)
        if isinstance(volume, str):
            return Step(Waiting("InvalidConfig", volume))
        pvc, classes = self.reads(claim, config)
        live = seen.get(pvc)
        where = f"PersistentVolumeClaim {volume.namespace}/{volume.name}"
        if live is not None:
            owner = ((live.get("metadata") or {}).get("labels") or {}).get(CLAIM_LABEL)
            if owner != volume.claim:
                return Step(Waiting("VolumeConflict", f"{where} exists and is not this claim's (label {CLAIM_LABEL}="
                                    f"{owner or '<none>'}): it is left alone; delete or rename it, or rename the app"))
            if (live.get("metadata") or {}).get("deletionTimestamp"):
                return Step(Waiting("VolumeDeleting", f"{where} is being deleted (its data was dropped): a new one "
                                    "is made once it is gone"))
        too_big = self.beyond(claim, config) if live is None else None
        if too_big is not None:
            return Step(Waiting("SizeAboveLimit", f"{too_big}: no volume is made (ask for less, or a provider that "
                                "allows it)"))
        spec = (live or {}).get("spec") or {}
        class_name = spec.get("storageClassName") or volume.storage_class
        by_name = {str((c.get("metadata") or {}).get("name")): c for c in seen.list(classes)}
        storage_class = by_name.get(class_name) if class_name else default_class(by_name.values())
        live_size = str((spec.get("resources") or {}).get("requests", {}).get("storage") or "") if live else None
        phase = str((live or {}).get("status", {}).get("phase") or "Pending")
        size = _size(volume, live_size, phase, storage_class, where)
        writes = (Apply(_pvc(volume, live)),) if live is None or size.reason == "Expanding" else ()
        class_name = (storage_class or {}).get("metadata", {}).get("name") or class_name
        connection = {"pvcName": volume.name, "size": live_size or volume.size,
                      "storageClassName": spec.get("storageClassName") or class_name or "",
                      "accessMode": volume.access_mode}
        if phase == "Bound" or (phase == "Pending" and (storage_class or {}).get("volumeBindingMode")
                                == WAIT_FOR_CONSUMER):
            said = "Bound" if phase == "Bound" else "binds when the app's pod is scheduled (WaitForFirstConsumer)"
            return Step(Ready(f"{where} ({connection['size']}, class {connection['storageClassName'] or 'the default'}"
                              f") {said}; mounted at the need's mountPath", connection, None, (size,)), writes)
        if phase == "Lost":
            return Step(Waiting("VolumeLost", f"{where} lost its PersistentVolume", conditions=(size,),
                                fields={"connection": connection}), writes)
        class_said = (f"StorageClass {class_name}" + ("" if storage_class is not None else ", which does not exist")
                      if class_name else "no default StorageClass exists")
        return Step(Waiting("VolumeNotBound", f"{where} is {phase}, not Bound yet ({class_said}: its provisioner "
                            "binds it)", conditions=(size,), fields={"connection": connection}), writes)

    def drop(self, claim: Mapping[str, Any], config: Mapping[str, Any], seen: Seen) -> Step:
        """Delete the claim's PVC, only while it is this claim's (its PersistentVolume goes by its reclaim policy,
        Delete for a dynamically provisioned one)."""
        pvc = self.reads(claim, config)[0]
        live = seen.get(pvc)
        mine = ((live or {}).get("metadata", {}).get("labels") or {}).get(CLAIM_LABEL) == claim["metadata"]["name"]
        if live is None or not mine:
            return Step(Gone())
        assert pvc.name is not None
        return Step(Gone(), (Delete(PVC, pvc.namespace, pvc.name, str(live["metadata"]["uid"])),))

    def beyond(self, claim: Mapping[str, Any], config: Mapping[str, Any]) -> str | None:
        """A size past the provider's maxSize."""
        volume = self.volume(claim, config)
        if isinstance(volume, str) or volume.max_size is None or (
                (quantity(volume.size) or 0) <= (quantity(volume.max_size) or 0)):
            return None
        return f"{volume.size} is above the provider's maxSize {volume.max_size}"

    def unsized(self, claim: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        return None  # every size is a volume's (its Size condition says what became of it)

    def kept_in(self, config: Mapping[str, Any]) -> None:
        return None  # the PVC is in the claim's namespace: deleted with it, never another namespace's

    def admit(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[tuple[str, str]]:
        return []  # the schema says all a storage-class provider may be


CORE = StorageClassDisk()
