"""The plan as a pull-request comment (GitHub-flavoured Markdown), from the document `plan --all -o json` prints.

A summary line and table (app, environment, verdict, primary class, counts), then one `<details>` per app and
environment that changes (or is deployed for the first time), with its changes and the MigrationPlan it will create.
Same input, same bytes: the order is the document's. Past `limit` characters the details of the least severe
entries are left out, with a note saying so, and the table is cut last.

Written to be read raw as well as rendered: every value is a code span (inert in GitHub's Markdown: no markup, link,
mention or issue reference), our sentences escape only what Markdown would read as syntax (a backslash before it),
and the `<summary>` lines, which are HTML, escape only `&` and `<`. Env literals appear only as their sha256.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from compatibility.classes import is_gated, is_reviewed
from compatibility.text import MAX_VALUE, SYMBOLS, approve_command
from toolchain.errors import one_line

__all__ = ["GITHUB_LIMIT", "TITLE", "render_failure", "render_markdown"]

TITLE = "## AppRafter plan"
# GitHub refuses a comment body over 65536 characters; leave room for the marker and the footer.
GITHUB_LIMIT = 60_000
VERDICTS = {"unchanged": "no changes", "removed": "**removed**"}
# Which details stay when the comment is too long: the most severe first (lower = kept longer).
_KEEP_ORDER = {"removed": 0, "changed": 1, "first-deployment": 2, "unchanged": 3}
# What Markdown reads as syntax in running text (emphasis, code, links, HTML, a table cell's end, strikethrough,
# math, entities): a backslash before each makes it the character itself.
_SYNTAX = re.compile(r"([\\`*_\[\]<>|~$&])")
# What GitHub would turn into a link: `www.` and `scheme://` (a backslash before the dot or colon stops it).
_AUTOLINK = re.compile(r"(?i)\b(www)\.|:(?=//)")
_BACKTICKS = re.compile(r"`+")


def _code(value: Any, table: bool = True) -> str:
    """A code span: Markdown, links and mentions are inert inside one. In a table a `|` still ends the cell unless
    escaped (GitHub reads `\\|` inside a span as `|`)."""
    text = one_line(str(value))
    if table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or text.startswith(" ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _text(value: Any, table: bool = True) -> str:
    """Running text: syntax characters escaped, autolinks broken; a word with `@` or `#` (a mention or an issue
    reference, which GitHub makes out of plain text whatever the escaping) as a code span."""
    words = []
    for word in one_line(str(value)).split(" "):
        if "@" in word or "#" in word:
            words.append(_code(word, table))
        else:
            words.append(_AUTOLINK.sub(lambda m: f"{m[1]}\\." if m[1] else "\\:", _SYNTAX.sub(r"\\\1", word)))
    return " ".join(words)


def _html(value: Any) -> str:
    """Text inside the `<summary>` HTML: only `&` and `<` escaped."""
    return one_line(str(value)).replace("&", "&amp;").replace("<", "&lt;")


def _value(value: Any) -> str:
    if value is None:
        return "(absent)"
    import json

    shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return _code(shown if len(shown) <= MAX_VALUE else shown[: MAX_VALUE - 1] + "…")


def _verdict(entry: Mapping[str, Any], code: Any = _code) -> str:
    """The verdict in a table cell (names as code spans) or, with code=_html, in the `<summary>` line."""
    status = entry["status"]
    if status == "changed":
        if entry["gated"]:
            gated = "**gated**" if code is _code else "gated"
            return f"{gated}: approve MigrationPlan {code(entry['migrationPlanName'])}"
        return "applies without approval"
    if status == "first-deployment":
        return "first deployment, for review" if _reviewed(entry) else "first deployment"
    return VERDICTS[status] if code is _code else VERDICTS[status].strip("*")


def _reviewed(entry: Mapping[str, Any]) -> int:
    """How many changes are for review: those that would gate as a change, and review-class ones (a new claim)."""
    return sum(is_reviewed(c["classification"]) for c in entry["changes"])


def _counts(entry: Mapping[str, Any]) -> str:
    changes = entry["changes"]
    if entry["status"] == "first-deployment":
        review = _reviewed(entry)
        return f"{len(changes)} to add ({review} for review)" if review else f"{len(changes)} to add"
    gated = sum(is_gated(c["classification"]) for c in changes)
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


def _row(entry: Mapping[str, Any]) -> str:
    primary = entry["primary"] if entry["changes"] else "-"
    return f"| {_code(entry['app'])} | {_code(entry['environment'])} | {_verdict(entry)} | {primary} | " \
           f"{_counts(entry)} |"


def _explanation(entry: Mapping[str, Any]) -> str | None:
    renamed = entry.get("renamed")
    if renamed and entry["status"] == "removed":
        return (f"Renamed to {_code(renamed['to'], False)} in this pull request: the cluster keys a deployment by "
                f"namespace, app and environment, so this is the removal of {_code(renamed['from'], False)} (its "
                "objects pruned, its claims' data kept by retention) and the first deployment of "
                f"{_code(renamed['to'], False)} (new, empty claims). No MigrationPlan. Classified as the app scaled "
                "to zero, holding nothing:")
    if renamed:
        return (f"Renamed from {_code(renamed['from'], False)}: a first deployment, with new, empty claims "
                f"({_code(renamed['from'], False)}'s data stays with its name). Nothing is gated. What it adds:")
    if entry["status"] == "first-deployment":
        return ("New in this pull request: there is no baseline, so nothing is gated (the cluster applies it without "
                "approval). What it adds, each with the class it would have as a change:")
    if entry["status"] == "removed":
        return ("Gone in this pull request. Nothing in the cluster holds a deletion (no MigrationPlan): once its "
                "Argo CD Application goes, its objects and claims are pruned. Classified as the app scaled to zero, "
                "holding nothing:")
    if entry["gated"]:
        name = entry["migrationPlanName"]
        return (f"After the merge the operator holds this change and creates MigrationPlan {_code(name, False)} "
                f"(approvedSpecHash {_code(entry['approvedSpecHash'], False)}); it applies once approved: "
                f"{_code(approve_command(name), False)}.")
    return None


def _details(entry: Mapping[str, Any]) -> str:
    title = f"{_html(entry['app'])} / {_html(entry['environment'])} ({_html(entry['path'])})"
    lines = [f"<details><summary>{title}: {_verdict(entry, _html)}</summary>", ""]
    explanation = _explanation(entry)
    if explanation:
        lines += [explanation, ""]
    if entry["changes"]:
        lines += ["| | Field | From | To | Class | Rule | Why |", "|---|---|---|---|---|---|---|"]
        for c in entry["changes"]:
            symbol = SYMBOLS["added"] if c["from"] is None else SYMBOLS["removed"] if c["to"] is None \
                else SYMBOLS["changed"]
            lines.append(f"| {_code(symbol)} | {_code(c['field'])} | {_value(c['from'])} | {_value(c['to'])} | "
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
    """The comment body when no plan could be made: the input is invalid (exit 1), or a tool failed (exit 2); the
    lines as a fenced code block (literal, whatever they hold)."""
    what = "the input is invalid" if invalid else "a tool failed"
    body = "\n".join(one_line(line) for line in lines)
    fence = "`" * max(3, max((len(m) for m in _BACKTICKS.findall(body)), default=0) + 1)
    return f"{TITLE}\n\n**No plan: {what}.** Fix it and push again:\n\n{fence}text\n{body}\n{fence}\n"
