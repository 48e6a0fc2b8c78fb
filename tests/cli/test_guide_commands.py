"""docs/user-guide.md is a recipe of `apprafter` commands and git (the spec's rev 16, ADR 0058): every command in
its shell blocks is one of those (or the set-up's pip and go), and every `apprafter` line parses as the CLI parses
it (a renamed flag or command fails here, not in a reader's terminal). The commands' behaviour is tested where they
run: tests/cli/test_app_local.py, the GitOps loop (tests/argocd/test_gitops_loop.py) and the node
(tests/images/test_bootstrap_node.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from apprafter.cli import main

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "user-guide.md"
ALLOWED = {"apprafter", "git", "pip", "go", "export", "mkdir"}


def _commands() -> list[str]:
    """Each command of the guide's sh blocks, comments and `&&`-chains split."""
    blocks = re.findall(r"```sh\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    commands = []
    for block in blocks:
        for line in block.splitlines():
            line = re.sub(r"\s[<>]\s*\S+", "", line.split("  #", 1)[0]).strip()  # a redirection is the shell's
            commands.extend(part.strip() for part in line.split("&&") if part.strip())
    return commands


def test_the_guide_runs_only_apprafter_and_git() -> None:
    commands = _commands()
    assert any(c.startswith("apprafter app add") for c in commands)
    assert {shlex.split(c)[0] for c in commands} <= ALLOWED, commands


def _rest(context: click.Context) -> list[str]:
    """The tokens a group left for its subcommand (click 8.2 keeps the first apart until click 9)."""
    return [*getattr(context, "_protected_args", []), *context.args]


@pytest.mark.parametrize("command", [c for c in _commands() if c.startswith("apprafter ")])
def test_every_apprafter_line_parses(command: str) -> None:
    args = shlex.split(command)[1:]
    context = main.make_context("apprafter", list(args), resilient_parsing=False)
    group: click.Command = main
    while isinstance(group, click.Group) and _rest(context):  # down to the command the line names
        name, sub, rest = group.resolve_command(context, _rest(context))
        assert sub is not None, f"{command}: no command {name}"
        context = sub.make_context(str(name), list(rest), parent=context)
        group = sub
    assert isinstance(group, click.Command) and not isinstance(group, click.Group), command
