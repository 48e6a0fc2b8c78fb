"""Turns cue's error text into one Problem per error, positioned in the user's file, never in injected ones."""

from __future__ import annotations

import re

from renderer.errors import Problem
from renderer.fieldpos import Positions

__all__ = ["CueError", "parse_errors", "to_problems"]

_POS = re.compile(r"^\s+(?:\./)?(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+)\s*$")
_HEADER = re.compile(r'^(?P<path>[A-Za-z_$#"][^\s:]*(?:\."[^"]*"[^\s:]*)*): (?P<msg>.*?):?$')
_CONFLICT = re.compile(r"^conflicting values (?P<a>.+?) and (?P<b>.+?)(?: \(mismatched types .*\))?$")
_DISJ = re.compile(r"^\d+ errors in empty disjunction$")

ENV_VALUE_HINT = ('must be a string literal, claim.<need>.<field>, or {secret: "<secret-name>/<key>"}')


class CueError:
    """One error as cue prints it: the field path, the message, every position cue names (file, line, col)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        self.positions: list[tuple[str, int, int]] = []
        self.alternatives: list[str] = []


def parse_errors(stderr: str) -> list[CueError]:
    """cue's error text, one CueError per error; the conflicts of an empty disjunction fold into it."""
    blocks: list[CueError] = []
    for raw in stderr.splitlines():
        if not raw.strip():
            continue
        pos = _POS.match(raw)
        if pos and blocks:
            blocks[-1].positions.append((pos["file"], int(pos["line"]), int(pos["col"])))
            continue
        header = _HEADER.match(raw)
        path, msg = (header["path"], header["msg"]) if header else ("", raw.rstrip(":").strip())
        if blocks and blocks[-1].path == path and _DISJ.match(blocks[-1].message):
            conflict = _CONFLICT.match(msg)
            if conflict:
                blocks[-1].alternatives.append(msg)
                continue
        blocks.append(CueError(path, msg))
    return blocks


def _split_path(path: str) -> tuple[str, ...]:
    return tuple(p.strip('"') for p in re.findall(r'"[^"]*"|[^.]+', path))


def _disjunction_message(block: CueError) -> str:
    pairs = [m for m in (_CONFLICT.match(a) for a in block.alternatives) if m]
    if not pairs:
        return "value matches none of the allowed forms"
    common = {pairs[0]["a"], pairs[0]["b"]}
    for m in pairs[1:]:
        common &= {m["a"], m["b"]}
    given = next(iter(common)) if len(common) == 1 else None
    allowed: list[str] = []
    for m in pairs:
        for v in (m["a"], m["b"]):
            if v != given and v not in allowed:
                allowed.append(v)
    if given is None:
        return "value matches none of the allowed forms"
    return f"{given} is not allowed: want one of {', '.join(allowed)}"


def _message(block: CueError, fields: tuple[str, ...]) -> str:
    in_env = len(fields) >= 2 and fields[-2] == "env"
    if in_env and (_DISJ.match(block.message) or block.message.startswith("conflicting values")):
        return ENV_VALUE_HINT
    if in_env and block.message == "field not allowed":
        return f"env key {fields[-1]!r} must match ^[A-Z_][A-Z0-9_]*$"
    if _DISJ.match(block.message):
        return _disjunction_message(block)
    return block.message


def to_problems(stderr: str, user_file: str, display: str, index: Positions,
                line1_shift: int = 0) -> list[Problem]:
    """One Problem per cue error; positions only from `user_file` (its name in cue's output)."""
    problems: list[Problem] = []
    env_values: list[tuple[str, ...]] = []  # env values reported whole: their branch errors are noise
    for block in parse_errors(stderr):
        fields = _split_path(block.path) if block.path else ()
        if any(fields[: len(v)] == v and len(fields) > len(v) for v in env_values):
            continue
        user_positions = [(line, col) for f, line, col in block.positions if f == user_file]
        if user_positions:
            line, col = user_positions[0]
            if line == 1:
                col = max(1, col - line1_shift)
        else:
            line, col = index.find(fields)
        message = _message(block, fields)
        if message == ENV_VALUE_HINT:
            env_values.append(fields)
        problems.append(Problem(display, line, col, block.path, message))
    return problems
