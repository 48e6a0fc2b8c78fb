"""The failure classes of the stack commands and the PlatformStack controller, in the project's error tree: the
user's (exit 1), a tool's and a registry's (2)."""

from __future__ import annotations

from toolchain.errors import ToolFailure, UserError

__all__ = ["RegistryFailure", "StackError", "StackToolError"]


class StackError(UserError):
    """A problem in the user's input (CUE source, chart, reference, key), already formatted: one line each."""

    def __init__(self, *lines: str) -> None:
        super().__init__(())
        self.args = ("\n".join(lines),)
        self.messages = list(lines)

    def lines(self) -> list[str]:
        return list(self.messages)


class StackToolError(ToolFailure):
    """A tool or environment failure (missing binary, timeout, registry down); names the remedy."""


class RegistryFailure(ToolFailure):
    """The registry refused, failed, timed out or replied with nonsense; the message names what to do."""
