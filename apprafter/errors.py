"""How every command reports a failure: one line per problem on stderr, nothing on stdout, exit 1 or 2.

The user's errors (renderer/compatibility UserError, platform_stack StackError) exit 1; tool and
environment failures (ToolFailure, StackToolError) exit 2 with their remedy. Kept free of click so the
plugin entry can use it without importing click.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from renderer.errors import ToolFailure, UserError

P = ParamSpec("P")
R = TypeVar("R")
USER_EXIT, TOOL_EXIT = 1, 2


def describe(error: BaseException) -> tuple[list[str], int] | None:
    """stderr lines and exit code for a failure the user or the environment caused; None for a bug."""
    if isinstance(error, UserError):
        return [str(p) for p in error.problems], USER_EXIT
    if isinstance(error, MemoryError):
        from apprafter.budget import MEMORY_MESSAGE

        return [MEMORY_MESSAGE], TOOL_EXIT
    if isinstance(error, ToolFailure):
        return [f"apprafter: {error}"], TOOL_EXIT
    from platform_stack.errors import StackError, StackToolError

    if isinstance(error, StackError):
        return list(error.lines), USER_EXIT
    if isinstance(error, StackToolError):
        return [f"apprafter: {error}"], TOOL_EXIT
    return None


def print_lines(lines: list[str], limit: int | None = None) -> None:
    shown = lines if limit is None else lines[:limit]
    for line in shown:
        print(line, file=sys.stderr)
    if limit is not None and len(lines) > limit:
        print(f"... and {len(lines) - limit} more problems (run `apprafter validate`)", file=sys.stderr)


def reported(func: Callable[P, R]) -> Callable[P, R]:
    """Turn the failures `describe` knows into stderr lines and exit 1/2; anything else is a bug and raises."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except Exception as error:
            described = describe(error)
            if described is None:
                raise
            lines, code = described
            print_lines(lines)
            sys.exit(code)

    return wrapper
