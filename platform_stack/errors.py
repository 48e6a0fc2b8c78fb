"""The two failure classes of the stack commands: the user's to fix (exit 1) or the tool's (exit 2)."""

from __future__ import annotations


class StackError(Exception):
    """A problem in the user's input (CUE source, chart, reference, key); `lines` are one problem each."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


class StackToolError(Exception):
    """A tool or environment failure (missing binary, timeout, registry down); names the remedy."""
