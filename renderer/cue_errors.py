"""Turns cue's error report into one Problem per error, positioned in the user's file, never in injected ones.

cue prints each error as a header `<field path>: <message>` followed by indented `file:line:col` lines.
The path is read label by label (identifiers, quoted labels, indices), so no line makes the parser
backtrack. A message about an env value never shows a string value, and every message goes through the
caller's Redactor (the env literals the caller knows). A bare word cue could not resolve is the user's own
identifier and is shown, unless it is (or comes from) an env value; renderer.hints adds what a YAML habit or a
misspelt field needs to hear.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection

from renderer import hints, patterns
from renderer.errors import Problem
from renderer.positions import Path, PositionIndex, unquote
from renderer.redact import Redactor, is_env_path, shown, strip_values

__all__ = ["CueError", "parse_errors", "to_problems"]

_POS = re.compile(r"^\s+(?:\./)?(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+)\s*$")
_LABEL = re.compile(r'[A-Za-z_$#][A-Za-z0-9_$#]*|"(?:[^"\\]|\\.)*"|\d+|\[\]')
_CONFLICT = re.compile(r"^conflicting values (?P<a>.+?) and (?P<b>.+?)(?: \(mismatched types .*\))?$")
_DISJ = re.compile(r"^\d+ errors in empty disjunction$")
# What cue puts in front of an error in an imported package (the user's package is one): our plumbing.
_IMPORT_NOISE = re.compile(r"^(?:apprafter\.local/\S*: )?(?:import failed: )*")
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_OUT_OF_BOUND = re.compile(rf"^invalid value (?P<value>{_QUOTED}) \(out of bound =~(?P<re>{_QUOTED})\)$")
_TOO_LONG = re.compile(rf"^invalid value (?P<value>{_QUOTED}) \(does not satisfy strings\.MaxRunes\((?P<n>\d+)\)\)$")
_NUMBER_OUT = re.compile(r"^invalid value (?P<value>-?[0-9][0-9.eE+-]*) \(out of bound [<>]=?-?[0-9.]+\)$")
_QUOTED_NUMBER = re.compile(r'^conflicting values (?P<value>"-?[0-9]+(?:\.[0-9]+)?") and (?:int|number|float) '
                            r"\(mismatched types string and (?:int|number|float)\)$")
# The schema's own error() messages for map keys, by the field that holds the map.
_KEY_ERRORS = {"environments": ("environment name", "_dnsLabel"), "labels": ("label key", "_labelKey"),
               "annotations": ("annotation key", "_labelKey")}
MAX_MESSAGE = 4096  # longer cue messages are cut (after redaction) before they are read or printed
TOP_LEVEL = "field not allowed at top level (an Application has apiVersion, kind, metadata, spec)"
ENV_VALUE_HINT = ('must be a string literal, claim.<need>.<field>, or {secret: "<secret-name>/<key>"}')
NO_FORM = "value matches none of the allowed forms"
EOF = "expected '}', found 'EOF'"
_INCOMPLETE = re.compile(r"incomplete value (?P<constraint>.+)")
_UNDEFINED = re.compile(r"undefined field: (?P<label>[A-Za-z_$][A-Za-z0-9_$]*)")


class CueError:
    """One error as cue prints it: the field path (as printed and as labels), the message, every position cue
    names (file, line, col)."""

    def __init__(self, path: str, fields: Path, message: str) -> None:
        self.path = path
        self.fields = fields
        self.message = message
        self.positions: list[tuple[str, int, int]] = []
        self.alternatives: list[str] = []


def _unquote(token: str) -> str:
    return unquote(token) or token[1:-1]


def split_header(line: str) -> tuple[Path, str, str] | None:
    """(fields, the path as printed, message) when the line starts with a field path and ': ', else None."""
    fields: list[str | int] = []
    i = 0
    while True:
        m = _LABEL.match(line, i)
        if m is None:
            return None
        token = m.group()
        fields.append(_unquote(token) if token.startswith('"') else token)
        i = m.end()
        if line.startswith(": ", i):
            return tuple(fields), line[:i], line[i + 2:]
        if not line.startswith(".", i):
            return None
        i += 1


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
        header = split_header(raw)
        fields, path, message = header if header else ((), "", raw)
        message = _IMPORT_NOISE.sub("", message[:MAX_MESSAGE], count=1).rstrip(":").strip()
        if blocks and blocks[-1].path == path and _DISJ.match(blocks[-1].message) and _CONFLICT.match(message):
            blocks[-1].alternatives.append(message)
            continue
        blocks.append(CueError(path, fields, message))
    return blocks


def _disjunction_message(block: CueError) -> str:
    pairs = [m for m in (_CONFLICT.match(a) for a in block.alternatives) if m]
    if not pairs:
        return NO_FORM
    common = {pairs[0]["a"], pairs[0]["b"]}
    for m in pairs[1:]:
        common &= {m["a"], m["b"]}
    given = next(iter(common)) if len(common) == 1 else None
    allowed: list[str] = []
    for m in pairs:
        for v in (m["a"], m["b"]):
            v = "a struct" if v.startswith("{") else v  # a definition's body in cue's words helps nobody
            if v != given and v not in allowed:
                allowed.append(v)
    if given is None:
        return NO_FORM
    return f"{given} is not allowed: want one of {', '.join(allowed)}"


def _named_rule(block: CueError, written: Callable[[], Collection[str]]) -> str | None:
    """Our wording for a broken name rule of the schema (the same as the Python-side checks use)."""
    fields = block.fields
    bound = _OUT_OF_BOUND.match(block.message)
    if bound:
        rule = patterns.rule_for(_unquote(bound["re"]))
        value = _unquote(bound["value"])
        if rule and fields and fields[-1] == "hostname" and value in written():
            from renderer.hostnames import hostname_problem  # only a refused hostname needs it

            return hostname_problem(value) or f"{shown(value, written())} is not {rule}"
        if rule:
            return f"{shown(_unquote(bound['value']), written())} is not {rule}"
    number = _NUMBER_OUT.match(block.message)
    if number and fields and fields[-1] == "port":
        return f"port {number['value']} is out of range: a port is an integer 1-65535"
    quoted = _QUOTED_NUMBER.match(block.message)
    if quoted and fields and isinstance(fields[-1], str) and _unquote(quoted["value"]) in written():
        number_text = _unquote(quoted["value"])
        return f"{fields[-1]} is a number, not a string: write it unquoted, {fields[-1]}: {number_text}"
    long = _TOO_LONG.match(block.message)
    if long:
        return f"{shown(_unquote(long['value']), written())} is longer than {long['n']} characters"
    if len(fields) >= 2 and str(fields[-2]) in _KEY_ERRORS and block.message.startswith(
            _KEY_ERRORS[str(fields[-2])][0]):
        what, rule_name = _KEY_ERRORS[str(fields[-2])]
        label = str(fields[-1])
        return f"{what} {repr(label) if len(label) <= 100 else repr(label[:100]) + '...'} is not " \
               f"{patterns.RULES[rule_name]}"
    return None


@functools.cache
def schema_literals(schema: Callable[[], str]) -> frozenset[str]:
    """The string literals of the schema `schema` reads: constants ("Application", "public", ...) a message may
    show (read once per process)."""
    return frozenset(PositionIndex(schema()).literals)


def _message(block: CueError, touches_env_value: bool, written: Callable[[], Collection[str]]) -> str:
    fields = block.fields
    if hints.REFERENCE.fullmatch(block.message) and not touches_env_value and not is_env_path(fields):
        return block.message  # the word is an identifier the user wrote (`name: shop`), never an env value
    value_of_env = len(fields) >= 2 and fields[-2] == "env" and is_env_path(fields)
    if value_of_env and (_DISJ.match(block.message) or block.message.startswith("conflicting values")):
        return ENV_VALUE_HINT
    if value_of_env and block.message == "field not allowed":
        return f"env key {str(fields[-1])!r} must match ^[A-Z_][A-Z0-9_]*$"
    if is_env_path(fields) or touches_env_value:  # a value that is (or comes from) an env value
        return strip_values(_disjunction_message(block) if _DISJ.match(block.message) else block.message)
    if len(fields) == 1 and block.message == "field not allowed":
        return TOP_LEVEL
    if _DISJ.match(block.message):
        return strip_values(_disjunction_message(block), written())
    return _named_rule(block, written) or (strip_values(block.message, written()) if '"' in block.message
                                           else block.message)


def _taught(block: CueError, message: str, lines: list[str], line: int, col: int, shows_values: bool,
            needs: Callable[[], list[str]], positions: Collection[tuple[int, int]] = ()) -> str:
    """The message with a hint for a YAML habit, "did you mean" for a field the schema does not have (the names
    for a need), what an undefined claim reference lacks, or that a field is written twice (`positions`: the
    positions in the user's file cue names)."""
    fields = block.fields
    if block.message.startswith("conflicting values") and fields and isinstance(fields[-1], str):
        label = re.escape(fields[-1])
        written = sorted({at for at, col in positions if 0 < at <= len(lines)
                          and re.search(rf'(?:^|[\s{{,]){label}\s*:\s*$', lines[at - 1][: col - 1])})
        if len(written) >= 2:  # the label itself written at two places cue points at: a duplicate key
            return (f"{message}; {fields[-1]} is written twice (lines {written[0]} and {written[1]}) and CUE unifies "
                    "the two: keep one")
    unknown = block.message == "field not allowed" and bool(fields) and not is_env_path(fields)
    if unknown and len(fields) >= 2 and fields[-2] == "needs":
        from renderer.schema_hints import unknown_need

        return f"{message}; {unknown_need(str(fields[-1]))}"
    if unknown:
        mean = hints.did_you_mean(str(fields[-1]), hints.known_fields(fields[:-1]))
        if mean:
            return f"{message}; {mean}"
    undefined = _UNDEFINED.fullmatch(block.message)
    if undefined and is_env_path(fields) and 0 < line <= len(lines):
        from renderer.schema_hints import claim_hint

        claim = claim_hint(undefined["label"], lines[line - 1], col, fields)
        if claim:
            return claim
    reference = hints.REFERENCE.fullmatch(block.message)
    if reference and is_env_path(fields) and len(fields) >= 2 and fields[-2] == "env" and 0 < line <= len(lines) \
            and hints.yaml_habit(lines, line) is None:
        from renderer.schema_hints import reference_hint

        typed = reference_hint(reference["name"], lines[line - 1], col, str(fields[-1]), needs())
        if typed:
            return typed
    hint = hints.teach(block.message, fields, lines, line, at_top=unknown and len(fields) == 1,
                       shown_word=shows_values)
    return f"{message}; hint: {hint}" if hint else message


def _declared_needs(index: PositionIndex) -> list[str]:
    """The needs the user's file declares, in base and in any environment (what `claim` holds)."""
    scopes = [("spec", "base"), *(("spec", "environments", e) for e in index.children(("spec", "environments")))]
    return sorted({str(n) for scope in scopes for n in index.children((*scope, "needs"))})


def to_problems(stderr: str, user_file: str, display: str, index: Callable[[], PositionIndex],
                line1_shift: int = 0, redactor: Redactor | None = None, text: str = "", *,
                schema: Callable[[], str]) -> list[Problem]:
    """One Problem per cue error; positions only from `user_file` (its name in cue's output), else the position
    of the field path in the user's file. `index` gives the user file's PositionIndex (built on first call);
    `schema` the schema's text, read only when a message might show a string (its literals may be shown).

    A message shows no string value when the error is about an env value, or when cue points at a token of an
    env value among the values it involves (an env literal used elsewhere); `redactor` then replaces the env
    literals the caller knows wherever they appear. `text` is the user's file, read for hints.
    """
    redactor = redactor or Redactor.of(())
    lines = text.splitlines()
    problems: list[Problem] = []
    env_values: list[Path] = []  # env values reported whole: the errors of their disjunction's branches are noise
    blocks = parse_errors(stderr)
    for block in blocks:
        if any(block.fields[: len(v)] == v and len(block.fields) > len(v) for v in env_values):
            continue
        user_positions = [(line, col - (line1_shift if line == 1 else 0)) for f, line, col in block.positions
                          if f == user_file]
        touches_env_value = any(index().in_env_value(line, col) for line, col in user_positions)
        if block.message == EOF and any(not b.fields and b.message != EOF for b in blocks):
            continue  # the parser lost its place at another syntax error: the `}` it then misses is not the user's
        line, col = user_positions[0] if user_positions else index().find(block.fields)
        message = _message(block, touches_env_value, lambda: index().literals | schema_literals(schema))
        incomplete = _INCOMPLETE.fullmatch(block.message)
        if message == ENV_VALUE_HINT:
            env_values.append(block.fields)
        elif incomplete and block.fields and not is_env_path(block.fields) and not index().has(block.fields):
            from renderer.schema_hints import missing

            written = next(n for n in range(len(block.fields), -1, -1) if n == 0 or index().has(block.fields[:n]))
            message = missing(block.fields, written, incomplete["constraint"])
        else:
            message = _taught(block, message, lines, line, col,
                              not (touches_env_value or is_env_path(block.fields)), lambda: _declared_needs(index()),
                              user_positions)
        problems.append(redactor.problem(Problem(display, line, max(1, col), block.path, message)))
    # a YAML `- item` list is one mistake however many items it has: its first line says it
    problems = [p for i, p in enumerate(problems) if not (
        p.message.endswith(f"hint: {hints.LIST}") and i > 0 and problems[i - 1].message.endswith(f"hint: {hints.LIST}")
        and 0 <= p.line - problems[i - 1].line <= 2)]
    # "none of the forms" says nothing when cue also names what is wrong below the field (a struct branch's own
    # errors): keep those alone.
    return [p for p in problems if p.message != NO_FORM or not any(
        q.field.startswith(p.field + ".") for q in problems)]
