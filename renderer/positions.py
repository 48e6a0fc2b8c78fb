"""Finds where a field path is written in a CUE file, so problems found after evaluation point at the user's line.

The index is a trie of labels (one node per written label, keyed by its parent node), built in one pass of
a tokenizer: time and memory are linear in the file's size, however deep or long its label chains.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Path = tuple[str | int, ...]
ROOT = 0
# Paths longer than this are never asked for (the schema is at most ~8 deep); deeper labels are scanned, not kept.
MAX_DEPTH = 32
_TOKEN = re.compile(r"""[ \t\r\f\v]*(?:
    (?P<nl>\n)
  | (?P<comment>//[^\n]*)
  | (?P<string>\#*(?:\"\"\"|'''|"|'))
  | (?P<ident>[A-Za-z_$\#][A-Za-z0-9_$\#]*)
  | (?P<open>[{\[])
  | (?P<close>[}\]])
  | (?P<comma>,)
  | (?P<other>[^\s])
)""", re.VERBOSE)
_LABEL_END = re.compile(r"[ \t]*[?!]?:(?!:)")
_CHECK_EVERY = 4096  # tokens between two looks at the clock
# What a node is in an Application: env values are tracked so no message shows what they hold.
_ROOT, _OTHER, _SPEC, _ENVIRONMENTS, _SCOPE, _ENV_MAP, _ENV_VALUE = range(7)


def _role(parent: int, key: str | int) -> int:
    if parent in (_ENV_MAP, _ENV_VALUE):
        return _ENV_VALUE
    if parent == _SCOPE and key == "env":
        return _ENV_MAP
    if parent == _ENVIRONMENTS:
        return _SCOPE
    if parent == _SPEC:
        return {"base": _SCOPE, "environments": _ENVIRONMENTS}.get(str(key), _OTHER)
    return _SPEC if parent == _ROOT and key == "spec" else _OTHER


class _Frame:
    """An open struct or list: its node, and where its labels start on the shared label chain."""

    __slots__ = ("chain_base", "index", "is_list", "node", "seen")

    def __init__(self, node: int, is_list: bool, chain_base: int) -> None:
        self.node = node
        self.is_list = is_list
        self.chain_base = chain_base
        self.index = 0
        self.seen = False


class PositionIndex:
    """Line/column (1-based) of every field label in a CUE source, by field path; and, for redaction, where the
    env values of the Application are written and the string literals among them."""

    def __init__(self, text: str, check_time: Callable[[], None] | None = None) -> None:
        self._children: dict[tuple[int, str | int], int] = {}
        self._positions: list[tuple[int, int]] = [(1, 1)]
        self._depth: list[int] = [0]
        self._roles: list[int] = [_ROOT]
        self.env_literals: list[str] = []  # string literals written as (part of) an env value
        self.literals: set[str] = set()  # every other string literal: values a message may show as written
        self.env_value_positions: set[tuple[int, int]] = set()  # where each token of an env value starts
        self._scan(text, check_time or (lambda: None))

    def find(self, path: Path) -> tuple[int, int]:
        """Position of `path`, else of its deepest written ancestor, else 1:1."""
        node, best = ROOT, (1, 1)
        for part in path:
            child = self._children.get((node, part))
            if child is None:
                break
            node, best = child, self._positions[child]
        return best

    def has(self, path: Path) -> bool:
        """Whether `path` itself is written in the file."""
        node = ROOT
        for part in path:
            child = self._children.get((node, part))
            if child is None:
                return False
            node = child
        return True

    def children(self, path: Path) -> list[str | int]:
        """The labels written directly under `path`, in the order first written (a scan of the index: for errors)."""
        node = ROOT
        for part in path:
            child = self._children.get((node, part))
            if child is None:
                return []
            node = child
        return [key for (parent, key), _ in sorted(self._children.items(), key=lambda item: item[1])
                if parent == node]

    def _child(self, parent: int, key: str | int, line: int, col: int) -> int:
        """The node for `key` under `parent`, created at (line, col) when first written."""
        node = self._children.get((parent, key))
        if node is not None:
            return node
        depth = self._depth[parent] + 1
        if depth > MAX_DEPTH:
            return parent  # too deep to be asked for: stay on the ancestor, keep scanning
        node = len(self._positions)
        self._children[(parent, key)] = node
        self._positions.append((line, col))
        self._depth.append(depth)
        self._roles.append(_role(self._roles[parent], key))
        return node

    def in_env_value(self, line: int, col: int) -> bool:
        """Whether a token of an env value starts at line:col (cue points at the values an error involves)."""
        return (line, col) in self.env_value_positions

    def _scan(self, text: str, check_time: Callable[[], None]) -> None:
        frames = [_Frame(ROOT, is_list=False, chain_base=0)]
        # Nodes of the labels written so far in each open field (a: b: c: ...); a frame owns chain[chain_base:],
        # so closing a struct gives the enclosing field its labels back without copying them.
        chain: list[int] = []
        i, n, line, line_start, count = 0, len(text), 1, 0, 0

        def end_of_value() -> None:
            top = frames[-1]
            if top.is_list:
                if top.seen:
                    top.index += 1
                    top.seen = False
            else:
                del chain[top.chain_base:]

        def parent(top: _Frame) -> int:
            return chain[-1] if len(chain) > top.chain_base else top.node

        def container_node(col: int) -> int:
            """The node a '{' or '[' at col opens: a list element, or the labels written just before it."""
            top = frames[-1]
            if top.is_list:
                top.seen = True
                return self._child(top.node, top.index, line, col)
            return parent(top)

        def value_token(col: int) -> bool:
            """Note a value token at col; whether it belongs to an env value."""
            top = frames[-1]
            if top.is_list:
                top.seen = True
            in_env = self._roles[top.node if top.is_list else parent(top)] == _ENV_VALUE
            if in_env:
                self.env_value_positions.add((line, col))
            return in_env

        def label(key: str, col: int, after: int) -> int:
            """Record a label if one ends at `after`; returns where scanning continues."""
            top = frames[-1]
            m = _LABEL_END.match(text, after)
            if m and not top.is_list:
                chain.append(self._child(parent(top), key, line, col))
                return m.end()
            value_token(col)
            return after

        while i < n:
            count += 1
            if count % _CHECK_EVERY == 0:
                check_time()
            m = _TOKEN.match(text, i)
            if m is None:  # only trailing blanks are left
                break
            kind = m.lastgroup or "other"
            start, i = m.start(kind), m.end()
            if kind == "nl":
                end_of_value()
                line += 1
                line_start = i
            elif kind == "comment":
                continue
            elif kind == "string":
                end = _skip_string(text, start, i)
                newlines = text.count("\n", start, end)
                token_line, col = line, start - line_start + 1
                if newlines:
                    line += newlines
                    line_start = text.rfind("\n", start, end) + 1
                key = _string_label(text, start, end)
                saved_line, line = line, token_line
                after = label(key, col, end) if key is not None and not newlines else end
                if after == end:
                    in_env = value_token(col)
                    if in_env and not _is_rule(text, start):
                        self.env_literals.append(_body(text, start, i, end))
                    elif not in_env:
                        self.literals.add(_body(text, start, i, end))
                line = saved_line
                i = after
            elif kind == "ident":
                i = label(m.group("ident"), start - line_start + 1, i)
            elif kind == "open":
                col = start - line_start + 1
                if not frames[-1].is_list:
                    value_token(col)
                node = container_node(col)
                frames.append(_Frame(node, is_list=text[start] == "[", chain_base=len(chain)))
            elif kind == "close":
                if len(frames) > 1:
                    del chain[frames.pop().chain_base:]
                if frames[-1].is_list:
                    frames[-1].seen = True
            elif kind == "comma":
                end_of_value()
            else:
                value_token(start - line_start + 1)


def _skip_string(text: str, start: int, after_open: int) -> int:
    """End offset of the string literal opened at start (its delimiter ends at after_open)."""
    opener = text[start:after_open]
    hashes = len(opener) - len(opener.lstrip("#"))
    quote = opener[hashes:]
    close = quote + "#" * hashes
    multiline = len(quote) == 3
    i = after_open
    n = len(text)
    while i < n:
        j = text.find(close, i)
        stop = n if j < 0 else j
        if not multiline:
            newline = text.find("\n", i, stop)
            if newline >= 0:
                return newline  # unterminated: cue reports it; resume on the next line
        if j < 0:
            return n
        if hashes == 0 and _escaped(text, after_open, j):
            i = j + 1
            continue
        return j + len(close)
    return n


_ESCAPE = re.compile(r'\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)', re.DOTALL)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
                   '"': '"', "'": "'", "/": "/"}


def unquote(token: str) -> str | None:
    """The value of a double-quoted CUE (or Go-quoted) string token, escapes decoded; None if it is not one."""
    if len(token) < 2 or token[0] != '"' or token[-1] != '"':
        return None

    def one(m: re.Match[str]) -> str:
        escape = m.group()[1:]
        if escape in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[escape]
        if escape[0] in "xuU":
            return chr(int(escape[1:], 16)) if int(escape[1:], 16) <= 0x10FFFF else m.group()
        return chr(int(escape, 8)) if escape.isdigit() else m.group()

    return _ESCAPE.sub(one, token[1:-1])


def _body(text: str, start: int, after_open: int, end: int) -> str:
    """What a string literal holds: escapes decoded for a simple one, as written for raw and multi-line ones."""
    opener = text[start:after_open]
    hashes = len(opener) - len(opener.lstrip("#"))
    closing = opener[hashes:] + "#" * hashes
    terminated = end - after_open >= len(closing) and text.startswith(closing, end - len(closing))
    raw = text[after_open:end - len(closing)] if terminated else text[after_open:end]
    if opener == '"' and terminated:
        return unquote(text[start:end]) or raw
    if len(opener) - hashes == 3 and "\n" in raw:  # multi-line: drop the first line break and the indentation
        body, _, last = raw[raw.index("\n") + 1:].rpartition("\n")
        return "\n".join(line.removeprefix(last) for line in body.split("\n"))
    return raw


def _escaped(text: str, lower: int, j: int) -> bool:
    """Whether the character at j follows an odd number of backslashes."""
    k = j
    while k > lower and text[k - 1] == "\\":
        k -= 1
    return (j - k) % 2 == 1


def _string_label(text: str, start: int, end: int) -> str | None:
    """The label a simple double-quoted string spells (escapes decoded), else None."""
    if text[start] != '"' or text.startswith('"""', start) or end - start < 2 or text[end - 1] != '"':
        return None
    body = text[start + 1:end - 1]
    return body if "\\" not in body else unquote(text[start:end])


def _is_rule(text: str, start: int) -> bool:
    """Whether the string at start is the operand of =~ or !~ (a pattern, not a value)."""
    j = start
    while j > 0 and text[j - 1] in " \t":
        j -= 1
    return text[j - 2:j] in ("=~", "!~")
