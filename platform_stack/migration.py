"""Platform scope of the MigrationPlan: `stack classify` verdicts rolled up by the same code as applications."""

from __future__ import annotations

from compatibility.diff import leaf_diff
from compatibility.plan import Plan
from compatibility.platform import PlatformChange, roll_up_platform
from platform_stack.classify import StackClassification, StackSnapshot


def platform_changes(result: StackClassification, before: StackSnapshot,
                     after: StackSnapshot) -> list[PlatformChange]:
    """One PlatformChange per moved field (or per added/removed component), with both sides' values."""
    out: list[PlatformChange] = []
    for comp in result.components:
        if comp.change == "unchanged":
            continue
        reason = "; ".join(comp.reasons) or f"component {comp.change}"
        old, new = before.components.get(comp.component), after.components.get(comp.component)
        if comp.change in ("added", "removed") or not comp.fields:
            out.append(PlatformChange(comp.component, "", "enabled" if old else None, "enabled" if new else None,
                                      comp.classification, reason))
            continue
        for dotted, from_, to in leaf_diff(old, new):
            out.append(PlatformChange(comp.component, dotted, from_, to, comp.classification, reason))
    if result.reasons and result.classification == "breaking" and not any(
            c.classification == "breaking" for c in out):
        # A stack-level verdict (e.g. the Kubernetes minimum) with no component carrying it.
        out.append(PlatformChange("stack", "minimumKubernetesVersion", before.minimum_kubernetes_version,
                                  after.minimum_kubernetes_version, "breaking", "; ".join(result.reasons)))
    return out


def stack_plan(result: StackClassification, before: StackSnapshot, after: StackSnapshot) -> Plan:
    """The platform-scope Plan (primary, classifications, changes, approvedSpecHash) for a stack change."""
    return roll_up_platform(platform_changes(result, before, after), result.from_version, result.to_version)
