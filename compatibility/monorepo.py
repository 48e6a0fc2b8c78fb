"""The plan of a whole monorepo: every app and environment of two sides, paired by the app's directory.

Pure: both sides arrive loaded (renderer.render.load_all evaluates each side in one cue process); every pair
is classified by the one classifier (compatibility.application.plan), and every problem of either side is
reported at once, never classified. A pair present only on the new side is a first deployment: its additions are
listed with the class each would have as a change from an app that holds nothing (a new public endpoint, a claim,
a secret reference: what a reviewer looks at), yet nothing is gated, as in the cluster, which has no baseline to
hold against. One present only on the old side is removed, classified as the change to an app scaled to zero
that holds nothing (its needs, env references and exposure dropped), which is gated whenever it ran. Nothing in
the cluster can hold a deletion, so a removal gets no MigrationPlan: the pull request is where it is reviewed; its
claims' data is kept (lifecycle.retention: only an approved plan that removes a need drops it). A pair whose app
name or namespace differs is a rename, which the cluster (its baselines keyed by namespace, app and environment)
sees as the removal of the old app and the first deployment of the new: two entries, never a MigrationPlan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, Literal

from compatibility.application import DEFAULT_DOMAIN, Deployment
from compatibility.application import plan as classify_pair
from compatibility.migrationplan import name as plan_name
from compatibility.plan import Plan
from compatibility.sides import side
from renderer import validate
from renderer.errors import Problem, UserError
from renderer.load import LoadedApp

__all__ = ["STATUSES", "Entry", "Status", "entry_json", "first_deployment", "moved", "plan_all", "plan_document",
           "removal", "rename_note", "renamed", "summary"]

Status = Literal["first-deployment", "changed", "unchanged", "removed"]
STATUSES: tuple[Status, ...] = ("first-deployment", "changed", "unchanged", "removed")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One app and environment of the plan: where the app lives (its directory below the planned one), what
    happens to it, and the classifier's plan."""

    path: str
    app: str
    environment: str
    status: Status
    plan: Plan
    renamed: tuple[str, str] | None = None  # (old, new) "<namespace>/<app>" when the pair is a rename

    @property
    def gated(self) -> bool:
        return self.plan.gated

    @property
    def migration_plan(self) -> str | None:
        """The MigrationPlan the cluster will create for this change (none for a removal: nothing holds one)."""
        return plan_name(self.plan) if self.gated and self.status != "removed" else None

    @property
    def approved_spec_hash(self) -> str | None:
        return self.plan.approved_spec_hash if self.status != "removed" else None


def first_deployment(after: Deployment, domain: str = DEFAULT_DOMAIN) -> Plan:
    """The plan of an environment with no baseline: every addition, classified as the change from the same image
    holding nothing, and nothing gated (the cluster has nothing to hold: no approvedSpecHash)."""
    nothing = dataclasses.replace(after, spec={"image": after.spec["image"]})
    return dataclasses.replace(classify_pair(nothing, after, domain), approved_spec_hash=None)


KEPT = "its claim goes; its data is kept (retention: no approved plan removes the need), for the same app and need"


def removal(before: Deployment, domain: str = DEFAULT_DOMAIN) -> Plan:
    """A removed app or environment, classified as the change to the same app scaled to zero, holding nothing. A
    need it drops keeps its data (nothing approves dropping it), which the change's reason says."""
    spec = before.spec
    gone = {"image": spec["image"], "replicas": 0, **({"budget": spec["budget"]} if "budget" in spec else {})}
    result = classify_pair(before, dataclasses.replace(before, spec=gone), domain)
    changes = tuple(dataclasses.replace(c, reason=f"{c.field.split('.', 1)[1]}: {KEPT}") if c.rule == "AR-DM001"
                    else c for c in result.changes)
    return dataclasses.replace(result, changes=changes)


def _who(side: Deployment) -> str:
    return f"{side.namespace}/{side.app}" if side.namespace else side.app


def moved(before: Deployment, after: Deployment) -> bool:
    """Whether two sides are two deployments to the cluster: another app name, or another namespace (both said)."""
    return before.app != after.app or (None not in (before.namespace, after.namespace)
                                       and before.namespace != after.namespace)


def rename_note(entry: Entry) -> str:
    """What the cluster does with one half of a rename, in words."""
    assert entry.renamed is not None
    old, new = entry.renamed
    if entry.status == "removed":
        return (f"renamed to {new}: the removal of {old} (its claims' data kept by retention), then the first "
                f"deployment of {new}; no MigrationPlan")
    return f"renamed from {old}: the first deployment of {new} (new, empty claims), after the removal of {old}"


def renamed(path: str, environment: str, before: Deployment, after: Deployment,
            domain: str = DEFAULT_DOMAIN) -> list[Entry]:
    """A rename as the cluster sees it: the removal of the old app and the first deployment of the new."""
    names = (_who(before), _who(after))
    return [Entry(path, before.app, environment, "removed", removal(before, domain), names),
            Entry(path, after.app, environment, "first-deployment", first_deployment(after, domain), names)]


def _deployments(apps: Mapping[str, LoadedApp], wanted: Collection[str] | None,
                 problems: list[Problem]) -> dict[tuple[str, str], Deployment]:
    """Every (path, environment) of one side, validated like render (problems collected, never classified)."""
    out: dict[tuple[str, str], Deployment] = {}
    for path, app in apps.items():
        for env in validate.environments(app):
            if wanted is not None and env not in wanted:
                continue
            try:
                found = side(app, env, required=True)
            except UserError as e:
                problems += e.problems
                continue
            assert found is not None  # required: declared
            out[(path, env)] = found
    return out


def plan_all(before: Mapping[str, LoadedApp], after: Mapping[str, LoadedApp],
             environments: Collection[str] | None = None, domain: str = DEFAULT_DOMAIN) -> list[Entry]:
    """Every app and environment of both sides (keyed by the app's directory), ordered by app, environment and
    path; UserError with every problem of both sides when any is invalid."""
    problems: list[Problem] = []
    old = _deployments(before, environments, problems)
    new = _deployments(after, environments, problems)
    if problems:
        raise UserError(problems)
    entries: list[Entry] = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key), new.get(key)
        if now is not None and was is not None and moved(was, now):
            entries += renamed(key[0], key[1], was, now, domain)
            continue
        if now is not None and was is not None:
            result = classify_pair(was, now, domain)
            status: Status = "changed" if result.changes else "unchanged"
        elif now is not None:
            result, status = first_deployment(now, domain), "first-deployment"
        else:
            assert was is not None
            result, status = removal(was, domain), "removed"
        subject = result.subject
        entries.append(Entry(key[0], subject.name, key[1], status, result))
    return sorted(entries, key=lambda e: (e.app, e.environment, e.path))


def summary(entries: Collection[Entry]) -> dict[str, Any]:
    """How many entries have each status, and how many are gated."""
    counts: dict[str, Any] = {status: sum(e.status == status for e in entries) for status in STATUSES}
    counts["gated"] = sum(e.gated for e in entries)
    return counts


def entry_json(entry: Entry) -> dict[str, Any]:
    """One entry of `plan --all -o json`: where, what happens, and the plan (the keys of `plan -o json`)."""
    plan = entry.plan
    return {"path": entry.path, "app": entry.app, "environment": entry.environment, "status": entry.status,
            "gated": entry.gated, "primary": plan.primary, "classifications": list(plan.classifications),
            "changes": [c.to_json() for c in plan.changes], "approvedSpecHash": entry.approved_spec_hash,
            "migrationPlanName": entry.migration_plan,
            "renamed": {"from": entry.renamed[0], "to": entry.renamed[1]} if entry.renamed else None}


def plan_document(entries: Collection[Entry]) -> dict[str, Any]:
    """`plan --all -o json`: whether anything is gated, the counts, and every entry in order."""
    return {"gated": any(e.gated for e in entries), "summary": summary(entries),
            "plans": [entry_json(e) for e in entries]}
