"""docs/admission.md says what the code does: the phase table, the flags, the CEL messages it quotes."""

from __future__ import annotations

import re

from compatibility.authority import HUMAN_PHASES, PLATFORM_ONLY, REACHABLE_FROM
from tests.renderer.helpers import REPO, run_cli

DOC = (REPO / "docs" / "admission.md").read_text()


def test_the_phase_table_is_compatibility_authoritys() -> None:
    rows = {m["phase"]: (m["sources"], m["who"]) for m in re.finditer(
        r"^\| `(?P<phase>[a-z-]+)` \| (?P<sources>[^|]+) \| (?P<who>[^|]+) \|$", DOC, re.MULTILINE)}
    assert set(rows) == set(REACHABLE_FROM)
    for phase, (sources, who) in rows.items():
        written = set(re.findall(r"`([a-z-]+)`", sources.split(";")[0])) | ({None} if "none" in sources else set())
        assert written == REACHABLE_FROM[phase] - {phase}, phase
        assert ("person" in who) == (phase in HUMAN_PHASES), phase
        assert ("platform-scope" in sources) == (phase in PLATFORM_ONLY), phase


def test_every_flag_of_apprafter_webhook_is_documented() -> None:
    help_text = run_cli("webhook", "--help").stdout
    for flag in re.findall(r"(--[a-z-]+)", help_text):
        assert flag in DOC or flag in ("--help", "--no-color"), flag  # every command's: docs/cli.md
