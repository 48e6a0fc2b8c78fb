"""The plan as a pull-request comment (GitHub-flavoured Markdown), from the document `plan --all -o json` prints.

A summary line and table (app, environment, verdict, primary class, counts), then one `<details>` per app and
environment that changes, with its changes and the MigrationPlan it will create. Same input, same bytes: the
order is the document's. Past `limit` characters the details of the least severe entries are left out, with a
note saying so, and the table is cut last. Every value shown is the plan's (env literals only as their
sha256) and escaped, so nothing a user wrote can become markup, a link or a mention.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compatibility.text import MAX_VALUE, SYMBOLS, approve_command

__all__ = ["GITHUB_LIMIT", "TITLE", "render_failure", "render_markdown"]

TITLE = "## AppRafter plan"
# GitHub refuses a comment body over 65536 characters; leave room for the marker and the footer.
GITHUB_LIMIT = 60_000
VERDICTS = {"first-deployment": "first deployment", "unchanged": "no changes", "removed": "**removed**"}
# Which details stay when the comment is too long: the most severe first (lower = kept longer).
_KEEP_ORDER = {"removed": 0, "changed": 1, "first-deployment": 2, "unchanged": 3}


# What could become HTML, a table cell's end, emphasis, a link, math, a mention, an issue reference or an autolink
# (http:, www.) in GitHub's Markdown: written as character references, which render as the character itself.
_ACTIVE = frozenset("&<>|\\`*_~[]()!@#:.$\n\r")


def _text(value: Any) -> str:
    """Escaped for Markdown and HTML alike."""
    return "".join(f"&#{ord(ch)};" if ch in _ACTIVE else ch for ch in str(value))


def _code(value: Any) -> str:
    return f"<code>{_text(value)}</code>"


def _value(value: Any) -> str:
    if value is None:
        return "(absent)"
    import json

    shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return _code(shown if len(shown) <= MAX_VALUE else shown[: MAX_VALUE - 1] + "…")


def _verdict(entry: Mapping[str, Any]) -> str:
    status = entry["status"]
    if status == "changed":
        if entry["gated"]:
            return f"**gated**: approve MigrationPlan {_code(entry['migrationPlanName'])}"
        return "applies without approval"
    return VERDICTS[status]


def _counts(entry: Mapping[str, Any]) -> str:
    changes = entry["changes"]
    gated = sum(c["classification"] != "safe" for c in changes)
    return f"{len(changes)} ({gated} gated)" if gated else str(len(changes))


def _summary_line(summary: Mapping[str, Any]) -> str:
    total = sum(summary[s] for s in ("first-deployment", "changed", "unchanged", "removed"))
    parts = [f"**{summary['gated']} of {total} need approval**" if summary["gated"] else
             f"**nothing of {total} needs approval**"]
    for key, words in (("removed", "removed"), ("first-deployment", "first deployment"), ("changed", "changed"),
                       ("unchanged", "unchanged")):
        if summary[key]:
            parts.append(f"{summary[key]} {words}{'s' if key == 'first-deployment' and summary[key] > 1 else ''}")
    return " · ".join(parts)


def _title(entry: Mapping[str, Any]) -> str:
    return f"{_code(entry['app'])} / {_code(entry['environment'])}"


def _row(entry: Mapping[str, Any]) -> str:
    primary = entry["primary"] if entry["changes"] else "-"
    return f"| {_code(entry['app'])} | {_code(entry['environment'])} | {_verdict(entry)} | {primary} | " \
           f"{_counts(entry)} |"


def _explanation(entry: Mapping[str, Any]) -> str | None:
    if entry["status"] == "first-deployment":
        return "New in this pull request: no baseline to compare, nothing is gated."
    if entry["status"] == "removed":
        return ("Gone in this pull request. Nothing in the cluster holds a deletion (no MigrationPlan): once its "
                "Argo CD Application goes, its objects and claims are pruned. Classified as the app scaled to zero, "
                "holding nothing:")
    if entry["gated"]:
        name = entry["migrationPlanName"]
        return (f"After the merge the operator holds this change and creates MigrationPlan {_code(name)} "
                f"(approvedSpecHash {_code(entry['approvedSpecHash'])}); it applies once approved: "
                f"{_code(approve_command(name))}.")
    return None


def _details(entry: Mapping[str, Any]) -> str:
    lines = [f"<details><summary>{_title(entry)} ({_code(entry['path'])}): {_verdict(entry)}</summary>", ""]
    explanation = _explanation(entry)
    if explanation:
        lines += [explanation, ""]
    if entry["changes"]:
        lines += ["| | Field | From | To | Class | Rule | Why |", "|---|---|---|---|---|---|---|"]
        for c in entry["changes"]:
            symbol = SYMBOLS["added"] if c["from"] is None else SYMBOLS["removed"] if c["to"] is None \
                else SYMBOLS["changed"]
            lines.append(f"| {_text(symbol)} | {_code(c['field'])} | {_value(c['from'])} | {_value(c['to'])} | "
                         f"{c['classification']} | {c['rule']} | {_text(c['reason'])} |")
        lines.append("")
    lines += ["</details>", ""]
    return "\n".join(lines)


def render_markdown(document: Mapping[str, Any], limit: int = GITHUB_LIMIT) -> str:
    """The comment body for a plan document (`plan --all -o json`), at most about `limit` characters."""
    entries: Sequence[Mapping[str, Any]] = document["plans"]
    shown = [e for e in entries if e["status"] != "unchanged"]
    head = [TITLE, "", _summary_line(document["summary"]), ""]
    if not shown:
        return "\n".join([*head, "No app or environment changes."]) + "\n"
    table = ["| App | Environment | Verdict | Class | Changes |", "|---|---|---|---|---|"]
    rows = [_row(e) for e in shown]
    budget = limit - sum(len(line) + 1 for line in head + table) - 400  # the notes
    kept_rows = 0
    for row in rows:
        if budget - len(row) - 1 < 0:
            break
        budget -= len(row) + 1
        kept_rows += 1
    sections = {i: _details(e) for i, e in enumerate(shown[:kept_rows])}
    keep: set[int] = set()
    for i in sorted(sections, key=lambda i: (_KEEP_ORDER[shown[i]["status"]], not shown[i]["gated"], i)):
        if len(sections[i]) + 1 <= budget:
            keep.add(i)
            budget -= len(sections[i]) + 1
    out = [*head, *table, *rows[:kept_rows]]
    if kept_rows < len(rows):
        out.append(f"\n_{len(rows) - kept_rows} more rows left out to stay under {limit} characters._")
    out += [""] + [sections[i] for i in sorted(keep)]
    left_out = kept_rows - len(keep)
    if left_out:
        out.append(f"_Details of {left_out} app-environment{'s' if left_out > 1 else ''} left out to stay under "
                   f"{limit} characters: `apprafter plan --all` prints them all._")
    return "\n".join(out).rstrip("\n") + "\n"


def render_failure(lines: Sequence[str], invalid: bool) -> str:
    """The comment body when no plan could be made: the input is invalid (exit 1), or a tool failed (exit 2)."""
    what = "the input is invalid" if invalid else "a tool failed"
    body = "\n".join(_text(line) for line in lines)
    return f"{TITLE}\n\n**No plan: {what}.** Fix it and push again:\n\n<pre>\n{body}\n</pre>\n"
