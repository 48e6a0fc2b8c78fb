"""Every problem of a file in one run: cue reports one class of error at a time, so a failed evaluation is run again
with the fields it refused left out, until the rest evaluates; then the renderer's own rules check what did.

cue's evaluator keeps only its gravest errors: a bound or a conflict hides a field the schema does not allow, and any
of those hides what is incomplete (a required field missing, `claim.pg` with no `pg` need), so a misspelt field hid
an undefined claim. Each further pass unifies the schema with the user's fields minus every field already reported
(a comprehension that copies the rest: cue cannot delete a field), so the next class of errors shows; the last pass
that evaluates hands its document to renderer.validate.check. A required field left out is then missing: the next
pass leaves out the field that holds it (`expose` for `expose.port`), so the rules still read the rest. What stops it:
a problem cue cannot place at a field (a syntax error: nothing evaluates; an import), a pass that finds nothing new,
MAX_PASSES, or the file's time budget (the rules then never run: they need a whole Application). A rule's problem
about the field an unknown one was likely meant to be (`image is empty` beside `imge`) is a consequence, not shown.
Imported only when cue reported an error: a valid render never pays for it.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from renderer.cue_errors import parse_errors, split_header
from renderer.errors import Problem, field_path

__all__ = ["MAX_PASSES", "Excluded", "excludable", "rebuilt", "recover", "resolved"]

MEANT = 0.75  # how close an unknown field's name is to the one it was meant to be (renderer.hints.did_you_mean's)
MAX_PASSES = 5  # cue runs in all, the first included: three classes of error, then a required field left out
Path = tuple[str | int, ...]
Excluded = dict[str, "Excluded | None"]  # a trie of labels; None: this field is left out whole


def excludable(fields: Path) -> Path | None:
    """The field to leave out for an error at `fields`: the path up to its first list index (a list is left out
    whole: dropping an item would renumber the rest); None when it is no regular field (a definition, nothing)."""
    out: list[str] = []
    for label in fields:
        if isinstance(label, int) or label == "[]" or label.isdigit():
            break
        if label.startswith(("#", "_")):
            return None
        out.append(label)
    return tuple(out) or None


def _add(trie: Excluded, path: Path) -> None:
    node = trie
    for label in path[:-1]:
        child = node.setdefault(str(label), {})
        if child is None:
            return  # an ancestor is left out already
        node = child
    node[str(path[-1])] = None


def _string(label: str) -> str:
    """A label as a CUE string literal: JSON's escapes are CUE's (non-ASCII kept as written: CUE reads no surrogate
    pair), and `\\(` stays an escaped backslash, never an interpolation."""
    return json.dumps(label, ensure_ascii=False)


def _copy(expr: str, trie: Excluded, also_skip: Iterable[str] = (), depth: int = 0) -> str:
    """The struct at `expr` without the fields `trie` leaves out (its subtrees rebuilt the same way). A subtree is
    reached by iterating `expr`'s fields, never by `expr[label] != _|_`: that test fails for a struct holding any
    error, which dropped the whole of `spec` (and made "declare at least one environment" of a duplicate key)."""
    skip = sorted({*trie, *also_skip})
    condition = " if " + " && ".join(f"k{depth} != {_string(k)}" for k in skip) if skip else ""
    parts = [f"for k{depth}, v{depth} in {expr}{condition} {{(k{depth}): v{depth}}}"]
    for label, below in sorted(trie.items()):
        if below is not None:
            parts.append(f"for k{depth}, v{depth} in {expr} if k{depth} == {_string(label)} "
                         f"{{{_string(label)}: {{{_copy(f'v{depth}', below, (), depth + 1)}}}}}")
    return "\n\t".join(parts)


def rebuilt(alias: str, excluded: Iterable[Path], injected: Iterable[str]) -> str:
    """The check package's Application: the schema unified with the user's regular top-level fields (never the
    `injected` ones), less every path in `excluded`."""
    trie: Excluded = {}
    for path in sorted(excluded, key=len):
        _add(trie, path)
    return f"schema.#Application & {{\n\t{_copy(alias, trie, injected)}\n}}"


def _within(field: str, paths: Iterable[Path]) -> bool:
    return any(field == (p := field_path(path)) or field.startswith(p + ".") for path in paths)


def _meant(field: str, unknown: Iterable[Path]) -> bool:
    """Whether a rule's problem is about the field an unknown one beside it was meant to be (`image is empty` when
    `imge` was written, `declare at least one environment` when `environments` sits at the top level, not in spec):
    a consequence, not news."""
    header = split_header(f"{field}: ")
    if header is None or not header[0]:
        return False
    path = header[0]
    for other in unknown:
        parents = {other[:-1], ("spec",)} if len(other) == 1 else {other[:-1]}
        if path[:-1] in parents and difflib.SequenceMatcher(None, str(path[-1]), str(other[-1])).ratio() >= MEANT:
            return True
    return False


def _scoped(path: Path) -> tuple[str | None, Path] | None:
    """(environment or None for base, the field below its scope) for a path in base or an environment, else None."""
    if path[:2] == ("spec", "base"):
        return None, path[2:]
    if path[:2] == ("spec", "environments") and len(path) >= 3:
        return str(path[2]), path[3:]
    return None


def _follows(problem: Problem, excluded: Iterable[Path]) -> bool:
    """Whether a rule's problem follows from a field already reported and left out: it is about that field in an
    environment that inherits it (`environments.prod.expose` when `base.expose.port` was refused), or it names the
    field (`readiness ... has no expose.port to default to`). One mistake, one error (issue 43)."""
    header = split_header(f"{problem.field}: ")
    where = _scoped(header[0]) if header and header[0] else None
    for path in excluded:
        scoped = _scoped(path)
        if scoped is None or not scoped[1] or (scoped[0] is not None and where is not None and where[0] != scoped[0]):
            continue
        rel = scoped[1]
        if where is not None and where[1][: len(rel)] == rel:
            return True
        if re.search(rf"(?<![\w.]){re.escape(field_path(rel))}(?![\w])", problem.message):
            return True
    return False


_REFERENCE = re.compile(r'reference "[A-Za-z_$][A-Za-z0-9_$]*" not found')
_CHAIN = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)*")
PLACEHOLDER = '"_"'  # a string stands in for a reference cue could not resolve, so the rest of the file evaluates


def resolved(text: str, stderr: str, user_file: str) -> tuple[str, list[str]] | None:
    """The user's file with every reference cue could not resolve (`clam.pg.url`: the whole dotted name) replaced
    by a string, and the fields those were at; None when there is none. An unresolved reference fails the package
    before anything evaluates, so leaving its field out changes nothing: without this, a mistyped reference hid every
    other mistake of the file (issue 43). Only that line's later columns move."""
    lines = text.split("\n")
    fields: list[str] = []
    for block in parse_errors(stderr):
        if not _REFERENCE.fullmatch(block.message):
            continue
        for file, line, col in block.positions:
            if file != user_file or not 0 < line <= len(lines):
                continue
            chain = _CHAIN.match(lines[line - 1], col - 1)
            if chain is None:
                continue
            lines[line - 1] = lines[line - 1][: chain.start()] + PLACEHOLDER + lines[line - 1][chain.end():]
            fields.append(field_path(block.fields))
            break
    return ("\n".join(lines), fields) if fields else None


def _under(path: Path, excluded: Iterable[Path]) -> bool:
    return any(path[: len(e)] == e for e in excluded)


def recover(first_stderr: str, run: Callable[[set[Path]], tuple[str, Any] | None],
            problems_of: Callable[[str], list[Problem]], check: Callable[[Any], list[Problem]]) -> list[Problem]:
    """Every problem of a file whose first evaluation failed with `first_stderr`.

    `run(excluded)` evaluates again without those fields: (cue's stderr, None) when it failed, ("", document) when
    it evaluated, None when the file's time budget allows no further pass; `problems_of(stderr)` reads cue's errors
    as Problems; `check(document)` is the renderer's rules on what evaluated. Problems at a field left out (its
    absence, in a later pass) are not reported again.
    """
    problems = problems_of(first_stderr)
    excluded: set[Path] = set()
    unknown: set[Path] = set()  # fields the schema does not have: likely a known one misspelt or misplaced
    stderr = first_stderr
    for _ in range(MAX_PASSES - 1):
        blocks = parse_errors(stderr)
        unknown |= {b.fields for b in blocks if b.message == "field not allowed" and b.fields}
        found = [excludable(block.fields) for block in blocks]
        if any(path is None for path in found):
            break  # a problem at no field (a syntax error, an import): nothing more evaluates
        new = {path for path in found if path is not None and not _under(path, excluded)}
        if not new:  # a required field left out is missing now: leave out what holds it (expose, not expose.port)
            new = {path[:-1] for path in found if path in excluded and len(path) > 1} - excluded
        if not new:
            break
        excluded |= new
        result = run(excluded)
        if result is None:
            break
        stderr, document = result
        if not stderr:
            return [*problems, *(p for p in check(document) if not _within(p.field, excluded)
                                 and not _meant(p.field, unknown) and not _follows(p, excluded))]
        problems += [p for p in problems_of(stderr) if not _within(p.field, excluded)]
    return problems
