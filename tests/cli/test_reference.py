"""docs/cli.md is the commands' own help (apprafter.reference generates it): stale when a command changes."""

from __future__ import annotations

from apprafter.reference import reference
from tests.renderer.helpers import REPO


def test_the_cli_reference_is_generated_from_the_commands() -> None:
    assert (REPO / "docs" / "cli.md").read_text() == reference(), \
        "docs/cli.md is stale: .venv/bin/python -m apprafter.reference > docs/cli.md"
