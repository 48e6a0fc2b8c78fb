"""The pull-request comment (compatibility.markdown) from plan documents: escaping, redaction, truncation, order."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from compatibility.markdown import render_markdown
from tests.renderer.helpers import MINIMAL, run_cli, write_app


def entry(app: str, env: str, status: str = "changed", gated: bool = False, changes: int = 1,
          value: Any = "ghcr.io/acme/demo:2", reason: str = "r") -> dict[str, Any]:
    return {"path": app, "app": app, "environment": env, "status": status, "gated": gated,
            "primary": "security-boundary" if gated else "safe", "classifications": [],
            "changes": [{"rule": "AR-S007", "field": f"field{i}", "classification": "security-boundary" if gated
                         else "safe", "from": "a", "to": value, "reason": reason} for i in range(changes)],
            "approvedSpecHash": "sha256:ab" if gated else None,
            "migrationPlanName": f"{app}-{env}-0123456789" if gated else None}


def document(entries: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, Any] = {s: sum(e["status"] == s for e in entries)
                              for s in ("first-deployment", "changed", "unchanged", "removed")}
    counts["gated"] = sum(e["gated"] for e in entries)
    return {"gated": counts["gated"] > 0, "summary": counts, "plans": entries}


def github_html(markdown: str) -> str:
    """The comment as GitHub's own Markdown (cmark-gfm: tables, autolinks, strikethrough), raw HTML let through
    (no tag filter), so that markup a value smuggled in would show as markup."""
    import cmarkgfm
    from cmarkgfm.cmark import Options

    return cmarkgfm.markdown_to_html_with_extensions(markdown, options=Options.CMARK_OPT_UNSAFE,
                                                     extensions=["table", "autolink", "strikethrough"])


def outside_code(html: str) -> str:
    return re.sub(r"<code>.*?</code>", "", html, flags=re.DOTALL)


HOSTILE = "@octocat <script>x</script> | **b** [l](http://e.x) www.e.x #1 $x$ `c` ~s~ a@b.co &amp; _i_"


def test_nothing_a_user_wrote_becomes_markup_a_mention_or_a_link() -> None:
    """As a value (a code span) and inside a sentence (escaped where Markdown reads syntax; a word with @ or # as a
    code span, since GitHub makes mentions and issue references out of plain text), through GitHub's parser."""
    text = render_markdown(document([entry("a", "prod", value=HOSTILE, reason=f"reason: {HOSTILE}")]))
    html = github_html(text)
    row = next(line for line in html.split("<tr>") if "field0" in line)
    assert row.count("<td>") == 7  # the user's `|` opened no cell
    for tag in ("<a ", "<script", "<strong>", "<em>", "<del>", "<math"):
        assert tag not in row, tag
    plain = outside_code(row)
    assert "@" not in plain and "#1" not in plain and "&amp;amp; _i_" in plain  # &amp; shown as typed
    assert "x&lt;/script&gt; | **b** [l](http://e.x) www.e.x" in row  # shown as written, inside the span
    assert "reason: " in plain and "x&lt;/script&gt; | **b** [l](http://e.x) www.e.x" in plain


def test_the_raw_comment_reads_as_written() -> None:
    """No character references in the raw text: an image and a hostname are written as they are."""
    text = render_markdown(document([entry("a", "prod", value="ghcr.io/acme/blog:2.0.1",
                                           reason="publishes a new external name shop.example.com")]))
    assert "&#" not in text and "`ghcr.io/acme/blog:2.0.1`" in text
    assert "| publishes a new external name shop.example.com |" in text


def test_a_long_plan_keeps_the_table_and_the_gated_details_with_a_note() -> None:
    entries = [entry(f"app-{i:03d}", "prod", gated=i % 10 == 0, changes=5) for i in range(100)]
    full = render_markdown(document(entries), limit=10_000_000)
    cut = render_markdown(document(entries), limit=30_000)
    assert len(full) > 60_000 and len(cut) <= 30_000
    assert cut.count("\n| `app-") == 100  # every row
    gated = [f"app-{i:03d}" for i in range(0, 100, 10)]
    assert all(f"<summary>{a} / prod " in cut for a in gated)
    kept = cut.count("<details>")
    assert 10 <= kept < 100
    assert f"_Details of {100 - kept} app-environments left out to stay under 30000 characters" in cut
    again = render_markdown(document(entries), limit=30_000)
    assert again == cut


def with_key(value: str) -> str:
    image = 'image: "ghcr.io/acme/demo:1.0.0"'
    return MINIMAL.replace(image, f'{image}\n\t\tenv: API_KEY: "{value}"')


def test_env_literals_appear_only_as_their_sha256(tmp_path: Path) -> None:
    old = write_app(tmp_path / "a", with_key("hunter2-secret"))
    new = write_app(tmp_path / "b", with_key("other-secret"))
    result = run_cli("plan", "--from", str(old), "--to", str(new), "-e", "prod", "-o", "markdown")
    assert result.returncode == 0, result.stderr
    assert "secret" not in result.stdout and "literalSha256" in result.stdout
    as_json = json.loads(run_cli("plan", "--from", str(old), "--to", str(new), "-e", "prod", "-o", "json").stdout)
    assert "secret" not in json.dumps(as_json)
