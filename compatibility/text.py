"""The human form of a plan, read like `terraform plan`: one line per change, then a summary line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from compatibility.classes import DATA_MIGRATION, REQUIRES_RESTART, REVIEW, SAFE, SECURITY_BOUNDARY, is_reviewed
from compatibility.migrationplan import name as plan_name
from compatibility.plan import Change, Plan

if TYPE_CHECKING:
    from compatibility.monorepo import Entry

__all__ = ["MIGRATION_COMMAND", "approve_command", "render_entries", "render_text"]

# ANSI colours per class; used only when the caller says the output is a terminal.
COLOURS = {SAFE: "32", REVIEW: "36", REQUIRES_RESTART: "33", DATA_MIGRATION: "31", SECURITY_BOUNDARY: "1;31",
           "breaking": "1;31"}
SYMBOLS = {"added": "+", "removed": "-", "changed": "~"}
MAX_VALUE = 60
MIGRATION_COMMAND = "apprafter migration"  # what a person approves or rejects a MigrationPlan with


def approve_command(plan: str, namespace: str | None = None) -> str:
    """The command that approves MigrationPlan `plan` (in `namespace`, when the message's reader may need it): every
    message that asks for an approval names it this way."""
    return f"{MIGRATION_COMMAND} approve {plan}" + (f" -n {namespace}" if namespace else "")


def _value(value: Any) -> str:
    if value is None:
        return "(absent)"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def symbol(change: Change) -> str:
    """+ added, - removed, ~ changed."""
    if change.from_ is None:
        return SYMBOLS["added"]
    return SYMBOLS["removed"] if change.to is None else SYMBOLS["changed"]


def _paint(text: str, classification: str, colour: bool) -> str:
    return f"\x1b[{COLOURS.get(classification, '0')}m{text}\x1b[0m" if colour else text


def render_text(plan: Plan, colour: bool = False, header: str = "", migration_plan: bool = True,
                first: bool = False, in_force: tuple[str, str] | None = None) -> str:
    """The plan as lines of text; ANSI colour only when `colour` (a TTY). A gated plan names the MigrationPlan the
    cluster will create for it (`migration_plan`: False for a change nothing in the cluster can hold); a first
    deployment (`first`) lists its additions, each with the class it would have as a change, and gates nothing: those
    of a class other than safe (what would gate, and review) are counted for review. `in_force`: (image, digest)
    the cluster runs the old side's image as (`imagePolicy.resolve: "digest"`, read from a CR's status)."""
    s = plan.subject
    lines = [header or (f"apprafter plan: {s.name}, environment {s.environment}" if s.scope == "application"
                        else f"apprafter plan: platform stack {s.from_version} -> {s.to_version}"), ""]
    if not plan.changes:
        lines.append("No changes.")
    for c in plan.changes:
        old = _value(c.from_)
        if in_force is not None and c.field == "image" and c.from_ == in_force[0]:
            old += f" (in force: {in_force[1]})"
        head = f"  {symbol(c)} {c.field}: {old} -> {_value(c.to)}"
        lines.append(_paint(f"{head}  [{c.classification}, {c.rule}] {c.reason}", c.classification, colour))
    if in_force is not None and not any(c.field == "image" for c in plan.changes):
        lines.append(f"  image: {in_force[0]} (in force: {in_force[1]}), unchanged")
    lines.append("")
    n = len(plan.changes)
    counts = f"{n} change{'s' if n != 1 else ''}, {len(plan.gated_changes)} gated"
    if first:
        review = sum(is_reviewed(c.classification) for c in plan.changes)
        reviewed = f", {review} for review ({', '.join(filter(is_reviewed, plan.classifications))})" if review else ""
        lines.append(_paint(f"Plan: {n} to add{reviewed}. Not gated: a first deployment has no baseline, so the "
                            "cluster applies it without approval.", plan.primary if review else SAFE, colour))
    elif plan.gated:
        classes = ", ".join(plan.classifications)
        lines.append(_paint(f"Plan: {counts}. Gated: {plan.primary} (classes: {classes}); approval needed for "
                            f"{plan.approved_spec_hash}", plan.primary, colour))
        if migration_plan:
            lines.append(f"MigrationPlan: {plan_name(plan)} (the operator creates it when this change reaches the "
                         f"cluster; `{approve_command(plan_name(plan))}` applies it)")
    else:
        lines.append(f"Plan: {counts}. Not gated: applies without approval.")
    return "\n".join(lines) + "\n"


HEADERS = {"first-deployment": "first deployment, no baseline to compare",
           "removed": "removed: nothing in the cluster holds a deletion (no MigrationPlan); classified as the app "
                      "scaled to zero, holding nothing"}


def render_entries(entries: Sequence[Entry], colour: bool = False) -> str:
    """`plan --all` as text: every app and environment that changes, then one summary line."""
    from compatibility.monorepo import summary

    blocks = []
    for entry in entries:
        if entry.status == "unchanged":
            continue
        where = f"apprafter plan: {entry.app}, environment {entry.environment} ({entry.path})"
        header = f"{where}: {HEADERS[entry.status]}" if entry.status in HEADERS else where
        if entry.renamed is not None:
            from compatibility.monorepo import rename_note

            header = f"{where}: {rename_note(entry)}"
        blocks.append(render_text(entry.plan, colour, header, migration_plan=entry.status != "removed",
                                  first=entry.status == "first-deployment"))
    counts = summary(entries)
    parts = [f"{counts[k]} {k.replace('-', ' ')}" for k in ("removed", "first-deployment", "changed", "unchanged")
             if counts[k]]
    total = f"All: {len(entries)} app-environment{'s' if len(entries) != 1 else ''}, {counts['gated']} gated"
    blocks.append(f"{total} ({', '.join(parts) or 'none'}).\n")
    return "\n".join(blocks)
