"""The human form of a plan, read like `terraform plan`: one line per change, then a summary line."""

from __future__ import annotations

import json
from typing import Any

from compatibility.classes import DATA_MIGRATION, REQUIRES_RESTART, SAFE, SECURITY_BOUNDARY
from compatibility.plan import Change, Plan

__all__ = ["render_text"]

# ANSI colours per class; used only when the caller says the output is a terminal.
COLOURS = {SAFE: "32", REQUIRES_RESTART: "33", DATA_MIGRATION: "31", SECURITY_BOUNDARY: "1;31", "breaking": "1;31"}
SYMBOLS = {"added": "+", "removed": "-", "changed": "~"}
MAX_VALUE = 60


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


def render_text(plan: Plan, colour: bool = False, header: str = "") -> str:
    """The plan as lines of text; ANSI colour only when `colour` (a TTY)."""
    s = plan.subject
    lines = [header or (f"apprafter plan: {s.name}, environment {s.environment}" if s.scope == "application"
                        else f"apprafter plan: platform stack {s.from_version} -> {s.to_version}"), ""]
    if not plan.changes:
        lines.append("No changes.")
    for c in plan.changes:
        head = f"  {symbol(c)} {c.field}: {_value(c.from_)} -> {_value(c.to)}"
        lines.append(_paint(f"{head}  [{c.classification}, {c.rule}] {c.reason}", c.classification, colour))
    lines.append("")
    n = len(plan.changes)
    counts = f"{n} change{'s' if n != 1 else ''}, {len(plan.gated_changes)} gated"
    if plan.gated:
        classes = ", ".join(plan.classifications)
        lines.append(_paint(f"Plan: {counts}. Gated: {plan.primary} (classes: {classes}); approval needed for "
                            f"{plan.approved_spec_hash}", plan.primary, colour))
    else:
        lines.append(f"Plan: {counts}. Not gated: applies without approval.")
    return "\n".join(lines) + "\n"
