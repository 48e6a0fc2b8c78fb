"""docs/cli.md is the commands' own help (apprafter.reference generates it): stale when a command changes."""

from __future__ import annotations

import subprocess
import sys

from tests.renderer.helpers import REPO


def test_the_cli_reference_is_generated_from_the_commands() -> None:
    # A process of its own, as a user's: click caches a command's help option the first time it is built, so a test
    # that ran a command module standalone earlier in this process would turn "-h, --help" into "--help".
    generated = subprocess.run([sys.executable, "-m", "apprafter.reference"], capture_output=True, text=True,
                               check=True, cwd=REPO).stdout
    assert (REPO / "docs" / "cli.md").read_text() == generated, \
        "docs/cli.md is stale: .venv/bin/python -m apprafter.reference > docs/cli.md"
