"""Error types shared by the core: user problems with positions (exit 1) and tool failures (exit 2)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, order=True)
class Problem:
    """One problem in the user's file, printed as `file:line:col: field: message`."""

    file: str
    line: int
    col: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class UserError(Exception):
    """The user's input is invalid; carries every problem found, in file order."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(set(problems))
        super().__init__("\n".join(str(p) for p in self.problems))


class ToolFailure(Exception):
    """A tool or environment problem (cue missing, crashed, out of time); the message names the remedy."""
