"""The core's error types: the project's one error tree (toolchain.errors), as the core's callers import it."""

from __future__ import annotations

from toolchain.errors import AppRafterError, Problem, ToolFailure, UserError, field_path, one_line

__all__ = ["AppRafterError", "Problem", "ToolFailure", "UserError", "field_path", "one_line"]
