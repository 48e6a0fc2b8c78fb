"""Finds where a field path is written in a CUE file, so problems found after evaluation point at the user's line."""

from __future__ import annotations

import dataclasses
import re

Path = tuple[str | int, ...]
_IDENT = re.compile(r"[A-Za-z_$#][A-Za-z0-9_$#]*")
_LABEL_END = re.compile(r"[?!]?:(?!:)")


@dataclasses.dataclass
class _Frame:
    kind: str  # "struct" | "list"
    base: Path
    index: int = 0
    seen: bool = False


class PositionIndex:
    """Line/column (1-based) of every field label in a CUE source, by field path."""

    def __init__(self, text: str) -> None:
        self.labels: dict[Path, tuple[int, int]] = {}
        self._scan(text)

    def find(self, path: Path) -> tuple[int, int]:
        """Position of `path`, else of its deepest written ancestor, else 1:1."""
        for n in range(len(path), 0, -1):
            pos = self.labels.get(tuple(path[:n]))
            if pos:
                return pos
        return (1, 1)

    def has(self, path: Path) -> bool:
        return tuple(path) in self.labels

    def _scan(self, text: str) -> None:
        frames = [_Frame("struct", ())]
        chain: list[str] = []
        i, n, line, line_start = 0, len(text), 1, 0

        def element_path(col: int) -> Path:
            top = frames[-1]
            if top.kind == "list":
                top.seen = True
                self.labels.setdefault((*top.base, top.index), (line, col))
                return (*top.base, top.index)
            return (*top.base, *chain)

        def end_of_value() -> None:
            top = frames[-1]
            if top.kind == "list":
                if top.seen:
                    top.index += 1
                    top.seen = False
            else:
                chain.clear()

        while i < n:
            c = text[i]
            if c == "\n":
                end_of_value()
                line += 1
                line_start = i + 1
                i += 1
            elif c == "/" and text.startswith("//", i):
                j = text.find("\n", i)
                i = n if j < 0 else j
            elif c in "\"'" or (c == "#" and re.match(r"#+[\"']", text[i:])):
                start = i
                i = _skip_string(text, i)
                label = _string_label(text[start:i])
                m = _LABEL_END.match(text, _skip_spaces(text, i))
                if label is not None and m and frames[-1].kind == "struct":
                    self.labels.setdefault((*frames[-1].base, *chain, label), (line, start - line_start + 1))
                    chain.append(label)
                    i = m.end()
                elif frames[-1].kind == "list":
                    frames[-1].seen = True
                line += text.count("\n", start, i)
                if "\n" in text[start:i]:
                    line_start = text.rfind("\n", start, i) + 1
            elif c == "{":
                frames.append(_Frame("struct", element_path(i - line_start + 1)))
                chain.clear()
                i += 1
            elif c == "[":
                frames.append(_Frame("list", element_path(i - line_start + 1)))
                chain.clear()
                i += 1
            elif c in "}]":
                if len(frames) > 1:
                    frames.pop()
                i += 1
                if frames[-1].kind == "list":
                    frames[-1].seen = True
            elif c == ",":
                end_of_value()
                i += 1
            else:
                m = _IDENT.match(text, i)
                if m:
                    end = m.end()
                    lm = _LABEL_END.match(text, _skip_spaces(text, end))
                    if lm and frames[-1].kind == "struct":
                        self.labels.setdefault((*frames[-1].base, *chain, m.group()), (line, i - line_start + 1))
                        chain.append(m.group())
                        i = lm.end()
                        continue
                    if frames[-1].kind == "list":
                        frames[-1].seen = True
                    i = end
                else:
                    if not c.isspace() and frames[-1].kind == "list":
                        frames[-1].seen = True
                    i += 1


def _skip_spaces(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _skip_string(text: str, i: int) -> int:
    hashes = 0
    while text[i] == "#":
        hashes += 1
        i += 1
    quote = text[i]
    triple = text.startswith(quote * 3, i)
    close = (quote * 3 if triple else quote) + "#" * hashes
    i += 3 if triple else 1
    while i < len(text):
        if text[i] == "\\" and hashes == 0:
            i += 2
            continue
        if text.startswith(close, i):
            return i + len(close)
        if text[i] == "\n" and not triple:
            return i
        i += 1
    return i


def _string_label(token: str) -> str | None:
    """The label a simple double-quoted string spells, else None."""
    if token.startswith('"') and not token.startswith('"""') and token.endswith('"') and len(token) >= 2:
        body = token[1:-1]
        if "\\" not in body:
            return body
    return None
