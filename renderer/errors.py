"""The core's error types: the project's one error tree (toolchain.errors), as the core's callers import it."""

from __future__ import annotations

from toolchain.errors import AppRafterError, Problem, ToolFailure, UserError

__all__ = ["AppRafterError", "Problem", "ToolFailure", "UserError"]
