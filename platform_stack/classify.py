"""Platform-scope change classification: two stack snapshots in, per-component + overall class out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from compatibility.classes import BREAKING, REQUIRES_RESTART, SAFE, rank, ranked
from compatibility.diff import leaf_diff
from compatibility.versions import kubernetes_version, stack_version

__all__ = ["ComponentChange", "StackClassification", "StackSnapshot", "classify_component", "classify_stack",
           "kubernetes_unmet"]


def highest(classes: list[str]) -> str:
    """The highest-ranked platform class of `classes` ("safe" for none); UnknownClass for a class it lacks."""
    return ranked(classes, "platform")[0] if classes else SAFE


@dataclass(frozen=True)
class StackSnapshot:
    """One side of a comparison: the stack version, its release metadata and the effective components.

    components: name -> effective config of an enabled component (effective.effective_components).
    compatibility: version -> {"minimumKubernetesVersion": str, "components": {name: class}}.
    """

    version: str
    minimum_kubernetes_version: str
    compatibility: dict[str, dict[str, Any]]
    components: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class ComponentChange:
    """The verdict on one component: what happened to it, its class, which fields moved, and why."""

    component: str
    change: str  # "added" | "removed" | "changed" | "unchanged"
    classification: str
    fields: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StackClassification:
    """The verdict on a stack change: overall class (the highest), per-component verdicts, stack reasons."""

    from_version: str
    to_version: str
    classification: str
    classifications: list[str]
    components: list[ComponentChange]
    reasons: list[str]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (keys as the dataclass fields)."""
        return asdict(self)


def _release_class(name: str, before: StackSnapshot, after: StackSnapshot) -> tuple[str, list[str]]:
    """Class of a changed component from the compatibility entries of the versions crossed."""
    low, high = stack_version(before.version), stack_version(after.version)
    if high < low:
        return BREAKING, [f"downgrade {before.version} -> {after.version}: no reverse migration metadata"]
    if high == low:
        return REQUIRES_RESTART, [f"config change within {after.version} (no release metadata covers it)"]
    classes: list[str] = []
    reasons: list[str] = []
    crossed = sorted((v for v in after.compatibility if low < stack_version(v) <= high), key=stack_version)
    for version in crossed:
        cls = after.compatibility[version].get("components", {}).get(name)
        if cls is None:
            classes.append(BREAKING)
            reasons.append(f"{version}: no compatibility class for {name} (fail closed)")
        else:
            classes.append(cls)
            reasons.append(f"{version}: {cls}")
    if not crossed:
        return BREAKING, [f"no compatibility entry between {before.version} and {after.version}"]
    return highest(classes), reasons


def classify_component(name: str, before: StackSnapshot, after: StackSnapshot) -> ComponentChange:
    """Verdict for one component present on either side."""
    old, new = before.components.get(name), after.components.get(name)
    if old is None and new is None:
        return ComponentChange(name, "unchanged", SAFE)
    if old is None:
        return ComponentChange(name, "added", SAFE, [], ["new component: installs alongside the stack"])
    if new is None:
        return ComponentChange(name, "removed", BREAKING, [],
                               ["component removed or disabled: Argo CD deletes what it deployed"])
    fields = [path for path, _, _ in leaf_diff(old, new)]
    if not fields:
        return ComponentChange(name, "unchanged", SAFE)
    cls, reasons = _release_class(name, before, after)
    if (old.get("selfManaged") or new.get("selfManaged")) and \
            rank(cls, "platform") < rank(REQUIRES_RESTART, "platform"):
        cls = REQUIRES_RESTART
        reasons.append("Argo CD manages itself: any change to it is at least requires-restart")
    return ComponentChange(name, "changed", cls, fields, reasons)


def kubernetes_unmet(after: StackSnapshot, kube_version: str) -> str | None:
    """Why a cluster on `kube_version` cannot run `after` (its minimumKubernetesVersion is above), else None."""
    if kubernetes_version(after.minimum_kubernetes_version) > kubernetes_version(kube_version):
        return (f"stack {after.version} needs Kubernetes >= {after.minimum_kubernetes_version}, cluster runs "
                f"{kube_version}")
    return None


def classify_stack(before: StackSnapshot, after: StackSnapshot,
                   kube_version: str | None = None) -> StackClassification:
    """Classify moving from `before` to `after`; a Kubernetes minimum above `kube_version` is breaking."""
    names = sorted(set(before.components) | set(after.components))
    components = [classify_component(name, before, after) for name in names]
    reasons: list[str] = []
    stack_classes: list[str] = []
    unmet = kubernetes_unmet(after, kube_version) if kube_version is not None else None
    if unmet is not None:
        stack_classes.append(BREAKING)
        reasons.append(unmet)
    classes = [c.classification for c in components] + stack_classes
    return StackClassification(before.version, after.version, highest(classes), ranked(classes, "platform"),
                               components, reasons)
