"""The one safe reader of YAML/JSON input: YAML 1.2, no duplicate keys or aliases, bounded, with node positions.

Every file a user or a registry hands us as YAML or JSON (Application CRs for `plan`, the platform file,
Chart.yaml/values.yaml in `stack classify`, overrides) goes through `parse`. It builds plain JSON-shaped
data (dict with string keys, list, str, int, float, bool, None) from ruamel.yaml's event stream without
recursion, so depth, node count and size are checked as the input is read, and it keeps the line and
column of every node so a problem found later is reported where it is written:

    doc = parse(text, "app.yaml")
    raise doc.error(("spec", "base", "replicas"), "expected an integer")
    # app.yaml:7:15: spec.base.replicas: expected an integer
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from renderer.errors import Problem, UserError

__all__ = ["DEFAULT_LIMITS", "FieldPath", "Limits", "YamlDocument", "dotted", "parse"]

FieldPath = tuple[str | int, ...]
_CORE = "tag:yaml.org,2002:"
# Tags a JSON-shaped input may spell out; anything else (!!binary, !!set, !custom, ...) is refused.
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null")}
_COLLECTION_TAGS = {_CORE + "map", _CORE + "seq"}
# Plain scalars ruamel resolves to types JSON has no word for: kept as the text that was written.
_AS_TEXT = {_CORE + t for t in ("timestamp", "merge", "value", "yaml")}
# First characters of every non-string plain scalar of the YAML 1.2 core schema (null, bool, int, float):
# any other plain scalar is a string without asking the resolver (most keys and values: a fast path).
_MAY_NOT_BE_TEXT = frozenset("0123456789+-.~nNtTfF")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Upper bounds on what one input may cost: bytes read, nesting depth, nodes built."""

    max_bytes: int = 1 << 20
    max_depth: int = 64
    max_nodes: int = 100_000


DEFAULT_LIMITS = Limits()


@dataclasses.dataclass
class _Node:
    """Where a node is written (1-based), where its mapping key is written, and its children's positions."""

    line: int
    col: int
    key_line: int = 0
    key_col: int = 0
    children: dict[str, _Node] | list[_Node] | None = None


def dotted(path: Sequence[str | int]) -> str:
    """A field path as the user reads it (cue's form): spec.base.paths.0."""
    return ".".join(str(p) for p in path)


@dataclasses.dataclass(frozen=True)
class YamlDocument:
    """One parsed document: its JSON-shaped data and the position of every node, by field path."""

    display: str
    data: Any
    _root: _Node | None = dataclasses.field(default=None, repr=False, compare=False)

    def _walk(self, path: Sequence[str | int]) -> tuple[_Node | None, int]:
        """The deepest node written on `path` and how many parts of the path it covers."""
        node, depth = self._root, 0
        for part in path:
            children = node.children if node is not None else None
            child: _Node | None = None
            if isinstance(children, dict) and isinstance(part, str):
                child = children.get(part)
            elif isinstance(children, list) and isinstance(part, int) and 0 <= part < len(children):
                child = children[part]
            if child is None:
                break
            node, depth = child, depth + 1
        return node, depth

    def has(self, path: Sequence[str | int]) -> bool:
        """True when every part of `path` is written in the document."""
        return self._walk(path)[1] == len(path) and self._root is not None

    def position(self, path: Sequence[str | int], *, at_key: bool = False) -> tuple[int, int]:
        """Line and column of the scalar at `path`, of the key of a mapping or list (of any key with at_key); for
        an unwritten path, the key of its deepest written ancestor (1:1 when nothing is written)."""
        node, depth = self._walk(path)
        if node is None:
            return 1, 1
        # An unwritten field is reported where its parent is written; a mapping or list where its key is (in
        # block style its own first line is its first entry's).
        if (at_key or depth < len(path) or node.children is not None) and node.key_line:
            return node.key_line, node.key_col
        return node.line, node.col

    def find(self, path: Sequence[str | int]) -> tuple[int, int]:
        """Where the field at `path` is written (its key; an item's own position), as PositionIndex.find."""
        return self.position(path, at_key=True)

    def problem(self, path: Sequence[str | int], message: str, *, at_key: bool = False) -> Problem:
        """A Problem at `path`, named by its dotted field path."""
        return Problem(self.display, *self.position(path, at_key=at_key), dotted(path), message)

    def error(self, path: Sequence[str | int], message: str, *, at_key: bool = False) -> UserError:
        return UserError([self.problem(path, message, at_key=at_key)])


def _unplaced(value: Any) -> _Node:
    """The node tree of a value that has no text: every field is there, none has a position (line 0)."""
    if isinstance(value, dict):
        return _Node(0, 0, children={str(k): _unplaced(v) for k, v in value.items()})
    if isinstance(value, list):
        return _Node(0, 0, children=[_unplaced(v) for v in value])
    return _Node(0, 0)


def unwritten(data: Any, display: str) -> YamlDocument:
    """A YamlDocument for data that was never text (an object the API server sent): `has` answers what is set,
    problems carry no position."""
    return YamlDocument(display, data, _unplaced(data))


class _Frame:
    """A mapping or sequence being built: its data, its positions, and (for a mapping) the key awaiting a value."""

    __slots__ = ("data", "key", "key_mark", "node", "path")

    def __init__(self, data: dict[str, Any] | list[Any], node: _Node, path: FieldPath) -> None:
        self.data = data
        self.node = node
        self.path = path
        self.key: str | None = None
        self.key_mark: tuple[int, int] = (0, 0)


# A JSON surrogate-pair escape (\ud83d\ude00, as json.dumps writes astral characters) that the YAML
# scanner refuses; an even run of backslashes before it leaves the escape intact.
_SURROGATE_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})")
_PAIR_SHRINK = 2  # 12 characters (\uXXXX\uXXXX) become 10 (\UXXXXXXXX)


def _join_surrogate_pairs(source: str) -> tuple[str, dict[int, list[int]]]:
    """The text with pair escapes written as one \\U escape, and per line the new columns where that happened."""
    shifts: dict[int, list[int]] = {}

    def one(m: re.Match[str]) -> str:
        start = m.start() + len(m[1])
        line = source.count("\n", 0, start) + 1
        col = start - (source.rfind("\n", 0, start) + 1) + 1
        on_line = shifts.setdefault(line, [])
        on_line.append(col - _PAIR_SHRINK * len(on_line))
        code = 0x10000 + ((int(m[2], 16) - 0xD800) << 10) + (int(m[3], 16) - 0xDC00)
        return f"{m[1]}\\U{code:08X}"

    return _SURROGATE_PAIR.sub(one, source), shifts


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


class _Builder:
    """Turns ruamel.yaml events into data and positions, refusing what a JSON-shaped input cannot hold."""

    def __init__(self, display: str, limits: Limits, yaml: Any, shifts: dict[int, list[int]]) -> None:
        self.display, self.limits, self.shifts = display, limits, shifts
        self.resolver, self.constructor = yaml.resolver, yaml.constructor
        self.stack: list[_Frame] = []
        self.nodes = 0
        self.documents: list[tuple[Any, _Node, tuple[int, int]]] = []
        self.root: tuple[Any, _Node] | None = None
        self.document_mark = (1, 1)

    def mark(self, event: Any) -> tuple[int, int]:
        """1-based line and column of an event in the original text."""
        line, col = event.start_mark.line + 1, event.start_mark.column + 1
        moved = self.shifts.get(line)
        return (line, col + _PAIR_SHRINK * bisect.bisect_left(moved, col)) if moved else (line, col)

    def fail(self, at: tuple[int, int], path: FieldPath, message: str) -> UserError:
        return UserError([Problem(self.display, at[0], at[1], dotted(path), message)])

    def scalar(self, event: Any, path: FieldPath) -> Any:
        from ruamel.yaml.nodes import ScalarNode

        tag, value = (str(event.tag) if event.tag is not None else None), event.value
        if tag in (None, "!") and not event.style and event.implicit[0]:
            if value and value[0] not in _MAY_NOT_BE_TEXT:
                return value
            tag = str(self.resolver.resolve(ScalarNode, value, (True, False)))
        elif tag in (None, "!"):
            return value  # quoted, literal or folded: a string as written
        if tag in _AS_TEXT or tag == _CORE + "str":
            return value
        if tag not in _SCALAR_TAGS:
            raise self.fail(self.mark(event), path, f"YAML tag {tag} is not allowed here (plain JSON values only)")
        try:
            result = self.constructor.construct_object(ScalarNode(tag, value), deep=True)
        except (ValueError, ArithmeticError):
            raise self.fail(self.mark(event), path, f"{value[:40]!r} is not a valid {tag.rsplit(':', 1)[-1]}") from None
        if isinstance(result, float) and not math.isfinite(result):
            raise self.fail(self.mark(event), path, f"{value[:40]!r} is not a finite number (JSON has no inf/nan)")
        return result

    def count(self, event: Any, path: FieldPath) -> None:
        self.nodes += 1
        if self.nodes > self.limits.max_nodes:
            raise self.fail(self.mark(event), (), f"more than {self.limits.max_nodes} YAML nodes: refused")

    def child_path(self) -> FieldPath:
        if not self.stack:
            return ()
        top = self.stack[-1]
        if isinstance(top.data, list):
            return (*top.path, len(top.data))
        return (*top.path, top.key) if top.key is not None else top.path

    def place(self, value: Any, node: _Node) -> None:
        """Attach a finished value (or a just-started container) to its parent, or make it the root."""
        if not self.stack:
            self.root = (value, node)
            return
        top = self.stack[-1]
        if isinstance(top.data, list):
            top.data.append(value)
            assert isinstance(top.node.children, list)
            top.node.children.append(node)
            return
        assert top.key is not None and isinstance(top.node.children, dict)
        node.key_line, node.key_col = top.key_mark
        top.data[top.key] = value
        top.node.children[top.key] = node
        top.key = None

    def key(self, event: Any, top: _Frame) -> None:
        """A scalar in key position: a string, not seen before in this mapping."""
        key = self.scalar(event, top.path)
        if not isinstance(key, str):
            shown = event.value[:40]
            raise self.fail(self.mark(event), top.path, f"mapping key {shown or '(empty)'} is not a string (quote it: "
                            f"\"{shown}\")")
        if key in top.data:
            raise self.fail(self.mark(event), (*top.path, key), "duplicate key (the first one would be silently "
                            "overridden)")
        top.key, top.key_mark = key, self.mark(event)

    def event(self, event: Any) -> None:
        from ruamel.yaml import events

        top = self.stack[-1] if self.stack else None
        if isinstance(event, events.AliasEvent):
            raise self.fail(self.mark(event), self.child_path(), f"YAML alias *{event.anchor} is not allowed "
                            "(write the value out)")
        if isinstance(event, events.ScalarEvent):
            if top is not None and isinstance(top.data, dict) and top.key is None:
                self.key(event, top)
                return
            path = self.child_path()
            self.count(event, path)
            self.place(self.scalar(event, path), _Node(*self.mark(event)))
        elif isinstance(event, events.MappingStartEvent | events.SequenceStartEvent):
            if top is not None and isinstance(top.data, dict) and top.key is None:
                raise self.fail(self.mark(event), top.path, "mapping key is not a string (complex keys are not "
                                "allowed)")
            path = self.child_path()
            self.count(event, path)
            if len(self.stack) >= self.limits.max_depth:
                raise self.fail(self.mark(event), (), f"nested deeper than {self.limits.max_depth} levels: refused")
            if event.tag is not None and str(event.tag) != "!" and str(event.tag) not in _COLLECTION_TAGS:
                raise self.fail(self.mark(event), path, f"YAML tag {event.tag} is not allowed here (plain JSON values "
                                "only)")
            is_map = isinstance(event, events.MappingStartEvent)
            data: dict[str, Any] | list[Any] = {} if is_map else []
            node = _Node(*self.mark(event), children={} if is_map else [])
            self.place(data, node)
            self.stack.append(_Frame(data, node, path))
        elif isinstance(event, events.MappingEndEvent | events.SequenceEndEvent):
            self.stack.pop()
        elif isinstance(event, events.DocumentStartEvent):
            self.document_mark = self.mark(event)
        elif isinstance(event, events.DocumentEndEvent):
            if self.root is not None:
                value, node = self.root
                if value is not None:  # an empty document (a stray ---) holds nothing
                    self.documents.append((value, node, self.document_mark))
                self.root = None
            if len(self.documents) > 1:
                raise self.fail(self.documents[1][2], (), "expected one document, found more (a --- starts "
                                "another)")


def _decode(text: str | bytes, display: str) -> str:
    if isinstance(text, str):
        return text
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = _line_col(text[: e.start].decode("utf-8", errors="replace"), e.start)
        raise UserError([Problem(display, line, col, "", "file is not UTF-8 text")]) from None


def _yaml_error(error: Exception, text: str, display: str, language: str) -> UserError:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if mark is not None:
        line, col = mark.line + 1, mark.column + 1
    elif isinstance(getattr(error, "position", None), int):
        line, col = _line_col(text, error.position)  # type: ignore[attr-defined]  # ReaderError has .position
    else:
        line, col = 1, 1
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    if type(error).__name__ == "ReaderError":
        problem = f"character {getattr(error, 'character', '?')!r} is not allowed in YAML"
    return UserError([Problem(display, line, col, "", f"not valid {language}: {problem}")])


def parse(text: str | bytes, display: str, *, json_only: bool = False, limits: Limits = DEFAULT_LIMITS,
          ) -> YamlDocument:
    """Parse one YAML 1.2 (or, with json_only, JSON) document; UserError with a position on anything else.

    An empty input gives data None; more than one document is an error.
    """
    size = len(text.encode() if isinstance(text, str) else text)
    if size > limits.max_bytes:
        raise UserError([Problem(display, 1, 1, "", f"file larger than {limits.max_bytes} bytes: refused")])
    source = _decode(text, display).removeprefix("\ufeff")
    shifts: dict[int, list[int]] = {}
    if json_only:
        _check_json(source, display)
        source, shifts = _join_surrogate_pairs(source)
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="safe", pure=True)  # the pure parser reads YAML 1.2 (libyaml, the C one, reads 1.1)
    yaml.version = (1, 2)
    builder = _Builder(display, limits, yaml, shifts)
    try:
        for event in yaml.parse(source):
            builder.event(event)
    except YAMLError as e:
        raise _yaml_error(e, source, display, "JSON" if json_only else "YAML") from None
    if not builder.documents:
        return YamlDocument(display, None, None)
    data, root, _ = builder.documents[0]
    return YamlDocument(display, data, root)


def _check_json(source: str, display: str) -> None:
    """JSON syntax as JSON parsers read it (YAML accepts more); depth is left to the YAML pass, which bounds it."""
    try:
        json.loads(source, parse_constant=str)  # NaN/Infinity stay text: JSON has no word for them
    except json.JSONDecodeError as e:
        raise UserError([Problem(display, e.lineno, e.colno, "", f"not valid JSON: {e.msg}")]) from None
    except RecursionError:
        return
