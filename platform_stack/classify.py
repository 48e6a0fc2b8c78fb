"""Platform-scope change classification: two stack snapshots in, per-component + overall class out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from platform_stack.chart import semver_key

# Ranked lowest to highest (spec §3.8, platform scope).
CLASSES: tuple[str, ...] = ("safe", "requires-restart", "data-migration", "breaking")
MAX_FIELDS = 20


def rank(classification: str) -> int:
    """Position of a class in CLASSES; unknown classes rank as breaking (fail closed)."""
    return CLASSES.index(classification) if classification in CLASSES else len(CLASSES) - 1


def highest(classes: list[str]) -> str:
    """The highest-ranked class of `classes` ("safe" for none)."""
    return max(classes, key=rank, default="safe")


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


def changed_fields(before: Any, after: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two JSON-like values differ (maps compared key by key, anything else as a whole)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for key in sorted(set(before) | set(after), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in before or key not in after:
                out.append(path)
            else:
                out.extend(changed_fields(before[key], after[key], path))
        return out
    return [] if before == after else [prefix or "."]


def _release_class(name: str, before: StackSnapshot, after: StackSnapshot) -> tuple[str, list[str]]:
    """Class of a changed component from the compatibility entries of the versions crossed."""
    low, high = semver_key(before.version), semver_key(after.version)
    if high < low:
        return "breaking", [f"downgrade {before.version} -> {after.version}: no reverse migration metadata"]
    if high == low:
        return "requires-restart", [f"config change within {after.version} (no release metadata covers it)"]
    classes: list[str] = []
    reasons: list[str] = []
    crossed = sorted((v for v in after.compatibility if low < semver_key(v) <= high), key=semver_key)
    for version in crossed:
        cls = after.compatibility[version].get("components", {}).get(name)
        if cls is None:
            classes.append("breaking")
            reasons.append(f"{version}: no compatibility class for {name} (fail closed)")
        else:
            classes.append(cls)
            reasons.append(f"{version}: {cls}")
    if not crossed:
        return "breaking", [f"no compatibility entry between {before.version} and {after.version}"]
    return highest(classes), reasons


def classify_component(name: str, before: StackSnapshot, after: StackSnapshot) -> ComponentChange:
    """Verdict for one component present on either side."""
    old, new = before.components.get(name), after.components.get(name)
    if old is None and new is None:
        return ComponentChange(name, "unchanged", "safe")
    if old is None:
        return ComponentChange(name, "added", "safe", [], ["new component: installs alongside the stack"])
    if new is None:
        return ComponentChange(name, "removed", "breaking", [],
                               ["component removed or disabled: Argo CD deletes what it deployed"])
    fields = changed_fields(old, new)
    if not fields:
        return ComponentChange(name, "unchanged", "safe")
    cls, reasons = _release_class(name, before, after)
    if (old.get("selfManaged") or new.get("selfManaged")) and rank(cls) < rank("requires-restart"):
        cls = "requires-restart"
        reasons.append("Argo CD manages itself: any change is at least requires-restart (spec §3.10)")
    more = [f"... {len(fields) - MAX_FIELDS} more"] if len(fields) > MAX_FIELDS else []
    shown = fields[:MAX_FIELDS] + more
    return ComponentChange(name, "changed", cls, shown, reasons)


def kube_version_key(version: str) -> tuple[int, ...]:
    """(major, minor, patch) of "v1.31.2", "1.31" or "1.31.0-0"."""
    core = version.strip().lstrip("v").split("-", 1)[0].split("+", 1)[0]
    parts = [int(p) for p in core.split(".") if p.isdigit()]
    return tuple([*parts, 0, 0, 0][:3])


def classify_stack(before: StackSnapshot, after: StackSnapshot,
                   kube_version: str | None = None) -> StackClassification:
    """Classify moving from `before` to `after`; a Kubernetes minimum above `kube_version` is breaking."""
    names = sorted(set(before.components) | set(after.components))
    components = [classify_component(name, before, after) for name in names]
    reasons: list[str] = []
    stack_classes: list[str] = []
    if kube_version is not None and \
            kube_version_key(after.minimum_kubernetes_version) > kube_version_key(kube_version):
        stack_classes.append("breaking")
        reasons.append(f"stack {after.version} needs Kubernetes >= {after.minimum_kubernetes_version}, "
                       f"cluster runs {kube_version}")
    classes = [c.classification for c in components] + stack_classes
    present = sorted(set(classes), key=rank, reverse=True)
    return StackClassification(before.version, after.version, highest(classes), present, components, reasons)
