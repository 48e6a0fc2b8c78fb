"""Shell completion of values from the repository: the environment names an app declares (for -e/--env)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

__all__ = ["environment_names"]


def _app_path(ctx: click.Context) -> Path:
    """The app the command line names so far: PATH, plan's --to, else the current directory.

    While the option being completed still lacks its value (`render PATH -e <TAB>`), click's resilient parse stops
    there and leaves the positional PATH unassigned, in ctx.args: it is read from there first."""
    positional = [arg for arg in ctx.args if not arg.startswith("-")]
    if positional:
        return Path(positional[0])
    for key in ("path", "to"):
        value = ctx.params.get(key)
        if value and not str(value).startswith("git:"):
            return Path(value)
    paths = ctx.params.get("paths")
    return Path(paths[0]) if paths else Path(".")


def environment_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """The declared environments starting with `incomplete` (none when the app cannot be read: a completion
    never prints an error)."""
    from renderer.load import load
    from renderer.validate import environments
    from toolchain.errors import AppRafterError

    try:
        names = environments(load(_app_path(ctx)))
    except (AppRafterError, OSError, MemoryError):
        return []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]
