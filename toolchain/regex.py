"""`lazy(pattern)`: a regular expression compiled on its first use, for module-level patterns off the common path.

sre compiles in Python: 20-1000 µs a pattern, paid at import by every render and plugin run for patterns that
only an error, a crash or a rare field ever reaches (docs/measurements.md, issue 44).
"""

from __future__ import annotations

import re

from toolchain.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

__all__ = ["Lazy", "lazy"]


class Lazy:
    """The re.Pattern methods the code uses, each compiling the pattern on first call."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern, self.flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.compiled().search(text, pos)

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.compiled().match(text, pos)

    def fullmatch(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.compiled().fullmatch(text, pos)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled().finditer(text)

    def findall(self, text: str) -> list[Any]:
        return self.compiled().findall(text)

    def sub(self, repl: str | Callable[[re.Match[str]], str], text: str, count: int = 0) -> str:
        return self.compiled().sub(repl, text, count)


def lazy(pattern: str, flags: int = 0) -> Lazy:
    """`re.compile(pattern, flags)` when first used."""
    return Lazy(pattern, flags)
