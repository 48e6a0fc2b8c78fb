"""docs/cli.md, generated from the click commands themselves (tests/cli/test_reference.py keeps them equal).

    .venv/bin/python -m apprafter.reference > docs/cli.md
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from apprafter.cli import COMMANDS, SECTIONS, main
from apprafter.convention import ALIASES, OUTPUTS, SPELLINGS, VALUE_ALIASES

__all__ = ["EXIT_CODES", "reference"]

WIDTH = 110
EXIT_CODES = (
    ("0", "done; under `--detailed-exitcode` (`plan`, `stack plan`): done and nothing is gated"),
    ("1", "the user's input: a problem in a file (`file:line:col: field: message`, one line each, all at once), a "
          "usage error (an unknown flag, a missing or bad argument: never click's 2), a request the cluster refused; "
          "`lint --strict`: a warning too; `doctor`: a tool missing or unsupported; `cmp discover`: not an app; "
          "under `--detailed-exitcode` also "
          "every tool failure, so that 2 keeps one meaning"),
    ("2", "a tool or environment failure, with its remedy on stderr (cue missing or outside the supported "
          "range, cue out of its time or memory budget, git missing, a cluster or registry unreachable); under "
          "`--detailed-exitcode` instead: a change is gated (it needs a MigrationPlan approved, or removes an app "
          "or environment), and nothing else"),
)


def _commands(group: click.Group, prefix: str) -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix} {name}")


def _help(path: str, command: click.Command) -> str:
    parent = click.Context(main, info_name="apprafter", **main.context_settings)
    ctx = click.Context(command, info_name=path.split(" ", 1)[1], parent=parent, terminal_width=WIDTH,
                        max_content_width=WIDTH)
    return command.get_help(ctx)


def reference() -> str:
    """The whole page."""
    lines = ["# CLI reference", "",
             "Generated from the commands (`python -m apprafter.reference > docs/cli.md`; `tests/cli/test_reference.py`"
             " fails when it is stale). The recipe is in the [user guide](user-guide.md), pull requests in "
             "[CI and pull requests](ci.md).", "",
             "## One convention (kubectl's)", "",
             "Every command spells these concepts one way (`apprafter/convention.py`; `tests/cli/test_convention.py` "
             "walks every command against it):", "",
             "| flag | meaning |", "|---|---|"]
    for spelling in SPELLINGS:
        flags = ", ".join(f"`{f}`" for f in (spelling.short, spelling.long) if f)
        lines.append(f"| {flags} | {spelling.help} |")
    lines += ["", "What `-o` offers, per command (the first is the default; `yaml` is the `json` document in YAML, "
              "except for `render`, `crds` and `cluster-bootstrap`, whose YAML is the Kubernetes stream; `name` is "
              "kubectl's `kind[.group]/name`, one line per object):", "",
              "| command | `-o` | old spellings (hidden, one deprecation line on stderr) |", "|---|---|---|"]
    for path, formats in OUTPUTS.items():
        old = [f"`{flag}`" for flag in ALIASES.get(path, ())]
        old += [f"`-o {a}` (= `-o {b}`)" for a, b in VALUE_ALIASES.get(path, {}).items()]
        lines.append(f"| `{path}` | {', '.join(formats)} | {', '.join(old) or '-'} |")
    lines += ["", "Colour only on a terminal, never with `--no-color` or a non-empty `NO_COLOR`. Completion: "
              "`source <(apprafter completion bash)` (zsh, fish alike) completes commands, flags and, for `-e`, the "
              "environments the app declares (the app the command line names: `apprafter render apps/shop -e "
              "<TAB>`).", "",
              "## Exit codes (every command)", "", "| code | meaning |", "|---|---|"]
    lines += [f"| {code} | {meaning} |" for code, meaning in EXIT_CODES]
    lines += ["", "## Commands", "", "`apprafter --help` lists them by audience, as here; `--no-color` is accepted by "
              "every command and before any (`apprafter --no-color plan`).", "",
              "```text", _root_help().rstrip(), "```", ""]
    ctx = click.Context(main)
    for title, names in SECTIONS:
        lines += [f"### {title}", ""]
        for name in names:
            command = main.get_command(ctx, name) if name in COMMANDS else None
            if command is None or command.hidden:
                continue
            path = f"apprafter {name}"
            lines += [f"#### `{path}`", "", "```text", _help(path, command).rstrip(), "```", ""]
            if isinstance(command, click.Group):
                for sub_path, sub in _commands(command, path):
                    lines += [f"#### `{sub_path}`", "", "```text", _help(sub_path, sub).rstrip(), "```", ""]
    return "\n".join(lines)


def _root_help() -> str:
    ctx = click.Context(main, info_name="apprafter", terminal_width=WIDTH, max_content_width=WIDTH,
                        **main.context_settings)
    return main.get_help(ctx)


if __name__ == "__main__":
    print(reference(), end="")
