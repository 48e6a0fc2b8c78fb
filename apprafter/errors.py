"""How every command reports a failure: one line per problem on stderr, nothing on stdout, the error's exit code.

Every failure raised on purpose is a toolchain.errors.AppRafterError that carries its own lines and exit
code (1 for the user's input, 2 for a tool or environment problem with its remedy), or one of the controller
runtime's own errors (controller_runtime.errors.KubeFailure: the API server or the kubeconfig), reported as a
ToolFailure (exit 2); a MemoryError is the process's own memory budget running out (apprafter.budget), exit 2;
anything else is a bug and keeps its traceback. Kept free of click and of the runtime at import, so the plugin
entry can use it without importing either.
"""

from __future__ import annotations

import functools
import sys

from toolchain.errors import AppRafterError, ToolFailure
from toolchain.record import TYPE_CHECKING

if TYPE_CHECKING:  # types alone: `typing` stays off the plugin's path
    from collections.abc import Callable
    from typing import ParamSpec, TypeVar

    from controller_runtime.errors import KubeFailure

    P = ParamSpec("P")
    R = TypeVar("R")

__all__ = ["print_lines", "report", "reported"]


def print_lines(lines: list[str], limit: int | None = None) -> None:
    shown = lines if limit is None else lines[:limit]
    for line in shown:
        print(line, file=sys.stderr)
    if limit is not None and len(lines) > limit:
        print(f"... and {len(lines) - limit} more problems (run `apprafter validate`)", file=sys.stderr)


def report(error: AppRafterError | KubeFailure | MemoryError, limit: int | None = None) -> int:
    """Print the error's lines on stderr; return its exit code."""
    if isinstance(error, MemoryError):
        from apprafter.budget import OwnMemoryBudget

        error = OwnMemoryBudget()
    if not isinstance(error, AppRafterError):  # the runtime's: the cluster or the way to it, an environment problem
        error = ToolFailure(str(error))
    print_lines(error.lines(), limit)
    return error.exit_code


def reported(func: Callable[P, R]) -> Callable[P, R]:
    """Turn an AppRafterError or a runtime error into stderr lines and its exit code; anything else is a bug and
    raises."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from controller_runtime.errors import KubeFailure  # a command's run, never the plugin's: imported here

        try:
            return func(*args, **kwargs)
        except (AppRafterError, KubeFailure, MemoryError) as error:
            sys.exit(report(error))

    return wrapper
