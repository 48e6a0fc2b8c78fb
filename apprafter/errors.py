"""How the CLI reports core exceptions: user problems exit 1, tool problems exit 2, nothing on stdout."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click

from renderer.errors import ToolFailure, UserError

P = ParamSpec("P")
R = TypeVar("R")


def reported(func: Callable[P, R]) -> Callable[P, R]:
    """Turn UserError/ToolFailure into stderr lines and exit codes 1/2."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except UserError as e:
            for problem in e.problems:
                click.echo(str(problem), err=True)
            sys.exit(1)
        except ToolFailure as e:
            click.echo(f"apprafter: {e}", err=True)
            sys.exit(2)

    return wrapper
