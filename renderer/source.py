"""A user's file as the renderer reads it (Source: its text, package, positions and time budget) and the Application
it evaluated to (LoadedApp): what every rule takes, whichever reader made it (cue, a YAML CR, an AdmissionReview)."""

from __future__ import annotations

import time
from pathlib import Path

from renderer.cue import Budget
from renderer.settings import TIMEOUT_ENV, limits
from toolchain.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any

    from renderer.fieldpos import Positions
    from renderer.positions import PositionIndex

__all__ = ["DEFAULT_PACKAGE", "LoadedApp", "Source"]

DEFAULT_PACKAGE = "apprafter"  # the package clause added to a user file without one


def _budget_end() -> float:
    return time.monotonic() + limits().timeout_s


class Source:  # a plain class, not a dataclass: `dataclasses` costs the plugin's start-up ~6 ms of imports
    """A user file read from inside its root, with what the injection needs to know about it.

    `positions` says where each field is written when the reader knows it already (a YAML CR); otherwise
    the CUE text is indexed when a problem first needs a position, once. Its time budget
    (APPRAFTER_CUE_TIMEOUT) starts when it is made and covers cue and the Python work on it.
    """

    __slots__ = ("_index", "budget_ends", "display", "package", "path", "positions", "text")

    def __init__(self, path: Path, display: str, text: str, package: str | None,
                 positions: Positions | None = None, budget_ends: float | None = None) -> None:
        self.path, self.display, self.text, self.package, self.positions = path, display, text, package, positions
        self.budget_ends = _budget_end() if budget_ends is None else budget_ends
        self._index: PositionIndex | None = None

    def __repr__(self) -> str:
        return f"Source({self.display!r}, package={self.package!r})"

    def replace(self, *, display: str | None = None, fresh_budget: bool = False) -> Source:
        """The same source under another name (e.g. git:<rev>:<path> for a file read from git), or with a new
        time budget (an app evaluated again alone after a batch)."""
        return Source(self.path, self.display if display is None else display, self.text, self.package,
                      self.positions, None if fresh_budget else self.budget_ends)

    @property
    def index(self) -> Positions:
        """Where each field is written: the reader's positions, else the CUE text's index (built once)."""
        return self.positions if self.positions is not None else self.cue_index

    @property
    def cue_index(self) -> PositionIndex:
        """The CUE text's index: labels, and where env values are written (for redaction); built on first use."""
        if self._index is None:
            from renderer.positions import PositionIndex  # only a problem needs it: valid apps never pay

            self._index = PositionIndex(self.text, self.check_time)
        return self._index

    def remaining(self) -> float:
        return self.budget_ends - time.monotonic()

    def check_time(self) -> None:
        if self.remaining() <= 0:
            raise Budget(f"working on {self.display} did not finish within the time budget and was stopped "
                         f"(raise {TIMEOUT_ENV}, or simplify the input)")

    def evaluable_text(self) -> tuple[str, int]:
        """The text cue sees and how far line 1 shifted (a package clause is added in place)."""
        if self.package:
            return self.text, 0
        prefix = f"package {DEFAULT_PACKAGE}, "
        return prefix + self.text, len(prefix)


class LoadedApp(Record):
    """An evaluated Application document and where it came from."""

    source: Source
    document: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.document["metadata"]["name"])
