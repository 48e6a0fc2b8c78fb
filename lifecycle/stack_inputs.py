"""What the PlatformStack controller reads before it decides, as pure functions: when the repository is looked at
again (the memo of the last check), the baseline in status, the plans as the gate sees them, what a failed check
found, the components' state from Argo CD, and the events a check's result calls for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from compatibility.gate import PlatformPlan, Rejection
from controller_runtime.outcomes import Classified, NextCheck
from lifecycle.notes import Note
from lifecycle.trust import foreign_writers
from platform_stack.channels import upgrade_available
from platform_stack.check_result import Baseline, Check, Finding
from platform_stack.errors import RegistryFailure, StackError
from toolchain.errors import AppRafterError, ToolFailure

__all__ = ["COMPONENT_LABEL", "COMPONENT_LABELS", "CheckMemo", "check_due", "components", "existing_plans",
           "finding_of", "memo_of", "read_baseline", "rejection", "reported"]

COMPONENT_LABELS = {"app.kubernetes.io/managed-by": "apprafter-platform-stack"}  # the chart's Application per component
COMPONENT_LABEL = "apprafter.io/component"


class CheckMemo(NamedTuple):
    """When the repository was last looked at, for which object, generation and plan phases."""

    uid: str
    generation: int
    at: float
    plans: frozenset[tuple[str, str]]


def _phases(plans: Iterable[Mapping[str, Any]]) -> frozenset[tuple[str, str]]:
    return frozenset((p["metadata"]["name"], str((p.get("status") or {}).get("phase") or "")) for p in plans)


def memo_of(obj: Mapping[str, Any], observed: int, plans: Iterable[Mapping[str, Any]], now: float) -> CheckMemo:
    """The check just made, remembered for the generation it looked at (`observed`, its status' observedGeneration),
    never the object's generation after the status write: a spec changed during the check is looked at at once."""
    return CheckMemo(obj["metadata"]["uid"], observed, now, _phases(plans))


def check_due(memo: CheckMemo | None, obj: Mapping[str, Any], plans: Sequence[Mapping[str, Any]], interval: float,
              now: float) -> NextCheck:
    """When the repository must be looked at again: now when never yet, for a new object or spec, or a plan that
    moved; else checkInterval after the last look."""
    meta = obj["metadata"]
    if memo is None or memo.uid != meta["uid"] or memo.generation != int(meta.get("generation") or 0) \
            or memo.plans != _phases(plans):
        return NextCheck.now()
    return NextCheck.after_last(memo.at, interval, now)


def existing_plans(plans: Iterable[Mapping[str, Any]]) -> list[PlatformPlan]:
    return [PlatformPlan.of(p) for p in plans]


def rejection(status: Mapping[str, Any]) -> Rejection | None:
    """status.rejectedPlan, when it is readable."""
    raw = status.get("rejectedPlan")
    if isinstance(raw, Mapping) and isinstance(raw.get("name"), str) and isinstance(raw.get("generation"), int):
        return Rejection(raw["name"], raw["generation"])
    return None


def read_baseline(obj: Mapping[str, Any], status_manager: str) -> Baseline | None:
    """What runs (status.lastApplied), trusted only when the operator wrote it; StackError says why not."""
    raw = (obj.get("status") or {}).get("lastApplied")
    if raw is None:
        return None
    foreign = foreign_writers(obj, "lastApplied", status_manager)
    if foreign:
        raise StackError(f"status.lastApplied was written by {', '.join(foreign)}, not by the operator")
    return Baseline.read(raw)


def finding_of(error: AppRafterError | Classified) -> Finding:
    """What a check that raised found: the registry unreachable, a tool or the cluster that failed (retried when the
    error's retry class says it may pass; the runtime's KubeError is of its own tree), or the spec's own problem
    (never retried: only a spec change makes it pass)."""
    if isinstance(error, RegistryFailure):
        return Finding("RegistryUnavailable", str(error), error.retryable)
    if isinstance(error, ToolFailure) or not isinstance(error, AppRafterError):
        return Finding("CheckFailed", str(error), error.retryable)
    return Finding("InvalidSpec", "; ".join(error.lines()), retryable=False)


def components(stored: Sequence[Mapping[str, Any]], children: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The chart's components with the sync and health Argo CD reports on each one's Application."""
    by_name = {(c.get("metadata", {}).get("labels") or {}).get(COMPONENT_LABEL): c for c in children}
    out = []
    for component in stored:
        entry = {k: v for k, v in component.items() if k not in ("sync", "health")}
        status = (by_name.get(component.get("name")) or {}).get("status") or {}
        sync, health = (status.get("sync") or {}).get("status"), (status.get("health") or {}).get("status")
        entry.update({k: v for k, v in (("sync", sync), ("health", health)) if isinstance(v, str) and v})
        out.append(entry)
    return out


def reported(result: Check, baseline: Baseline | None) -> list[Note]:
    """Events for what a check found: each unverified version, a moved tag, a newer version."""
    notes = [Note("VerificationFailed", f"{entry['version']} ({entry.get('digest', 'no digest')}) is not offered: "
                  f"{entry['reason']}", f"{entry['version']}@{entry.get('digest')}:{entry['reason']}", "Warning")
             for entry in result.unverified]
    if baseline is not None and result.current_digest != baseline.digest:
        now_names = result.current_digest or "nothing"
        notes.append(Note("TagMoved", f"tag {baseline.version} of the running version now names {now_names}, not the "
                          f"verified {baseline.digest}; the umbrella's automated sync is off until a verified version "
                          "is applied", f"{baseline.version}@{result.current_digest}", "Warning"))
    current = baseline.version if baseline else None
    if result.available and upgrade_available(current, result.available[0]):
        version, digest = result.available
        notes.append(Note("UpgradeAvailable", f"{version} ({digest}) verifies and is newer than {current}",
                          f"{version}@{digest}"))
    return notes
