"""The pull-request comment (compatibility.markdown) from plan documents: escaping, redaction, truncation, order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compatibility.markdown import render_markdown
from tests.renderer.helpers import MINIMAL, run_cli, write_app


def entry(app: str, env: str, status: str = "changed", gated: bool = False, changes: int = 1,
          value: Any = "ghcr.io/acme/demo:2") -> dict[str, Any]:
    return {"path": app, "app": app, "environment": env, "status": status, "gated": gated,
            "primary": "security-boundary" if gated else "safe", "classifications": [],
            "changes": [{"rule": "AR-S007", "field": f"field{i}", "classification": "security-boundary" if gated
                         else "safe", "from": "a", "to": value, "reason": "r"} for i in range(changes)],
            "approvedSpecHash": "sha256:ab" if gated else None,
            "migrationPlanName": f"{app}-{env}-0123456789" if gated else None}


def document(entries: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, Any] = {s: sum(e["status"] == s for e in entries)
                              for s in ("first-deployment", "changed", "unchanged", "removed")}
    counts["gated"] = sum(e["gated"] for e in entries)
    return {"gated": counts["gated"] > 0, "summary": counts, "plans": entries}


def test_nothing_a_user_wrote_becomes_markup_a_mention_or_a_link() -> None:
    hostile = "@octocat <script>x</script> | **b** [l](http://e.x) www.e.x #1 $x$ `c` ~s~"
    text = render_markdown(document([entry("a", "prod", value=hostile)]))
    assert "<script>" not in text and "@octocat" not in text and "http://" not in text
    assert "www." not in text and "**b**" not in text and "[l]" not in text and "`c`" not in text
    row = next(line for line in text.splitlines() if "field0" in line)
    assert row.count("|") == 8  # the user's `|` did not open a cell


def test_a_long_plan_keeps_the_table_and_the_gated_details_with_a_note() -> None:
    entries = [entry(f"app-{i:03d}", "prod", gated=i % 10 == 0, changes=5) for i in range(100)]
    full = render_markdown(document(entries), limit=10_000_000)
    cut = render_markdown(document(entries), limit=30_000)
    assert len(full) > 90_000 and len(cut) <= 30_000
    assert cut.count("\n| <code>app-") == 100  # every row
    gated = [f"app-{i:03d}" for i in range(0, 100, 10)]
    assert all(f"<summary><code>{a}</code>" in cut for a in gated)
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
