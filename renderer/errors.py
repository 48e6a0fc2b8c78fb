"""Error types shared by the core: user problems with positions (exit 1) and tool failures (exit 2)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

_IDENTIFIER = re.compile(r"[A-Za-z_$#][A-Za-z0-9_$#]*|\d+")
# Line breaks and other control characters a user's label or value may carry: escaped when printed.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def field_path(path: Sequence[str | int]) -> str:
    """A field path the way cue prints one: labels that are not identifiers are quoted (`env."a b"`)."""
    return ".".join(str(p) if _IDENTIFIER.fullmatch(str(p)) else _quote(str(p)) for p in path)


def _quote(label: str) -> str:
    return '"' + one_line(label.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def one_line(text: str) -> str:
    """text with every line break and control character escaped, so a problem is always one line."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


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
        text = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        return one_line(text)


class UserError(Exception):
    """The user's input is invalid; carries every problem found, in file order."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(set(problems))
        super().__init__("\n".join(str(p) for p in self.problems))


class ToolFailure(Exception):
    """A tool or environment problem (cue missing, crashed, out of time); the message names the remedy."""
