"""What the schema asks for, in words, for the errors cue words for itself: a required field missing (cue: `incomplete
value >=1 & <=65535 & int`), a need the schema does not have (`field not allowed`) and a claim reference to a need
the app does not declare (`undefined field: pg`).

Pure functions of cue's message, the field path and the user's own line; the need names and their fields are the
schema's `#NeedFields` (read from renderer/schema/application.cue). Imported only when cue reported an error.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Sequence
from pathlib import Path

from renderer import patterns
from renderer.errors import field_path
from renderer.positions import unquote

__all__ = ["ALIASES", "claim_hint", "describe", "missing", "need_fields", "reference_hint", "references",
           "unknown_need"]

_SCHEMA = Path(__file__).resolve().parent / "schema" / "application.cue"  # read from disk, as renderer.patterns
_NEED_FIELDS = re.compile(r"^#NeedFields: \{\n(?P<body>.*?)^\}", re.MULTILINE | re.DOTALL)
_NEED = re.compile(r"^\t(?P<need>[a-z][a-z0-9]*): \[(?P<fields>[^\]]*)\]", re.MULTILINE)
# What people call a need, by the need's name in the schema (postgres, Postgres' own name, is `pg`).
ALIASES = {"postgres": "pg", "postgresql": "pg", "psql": "pg", "pgsql": "pg", "database": "pg", "nats": "jetstream",
           "queue": "jetstream", "valkey": "redis", "cache": "redis", "minio": "s3", "bucket": "s3", "storage": "disk",
           "volume": "disk", "pvc": "disk"}
_KINDS = {"int": "an integer", "number": "a number", "float": "a number", "string": "a string", "bool": "true or false"}
_BOUND = re.compile(r"(?P<op>>=|<=|>|<)\s*(?P<n>-?[0-9.]+)")
_REGEX = re.compile(r'=~(?P<re>"(?:[^"\\]|\\.)*")')
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_CHAIN = re.compile(r"(?:[A-Za-z_$][A-Za-z0-9_$]*\.)*$")
_CHAIN_FROM = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")


@functools.cache
def need_fields() -> dict[str, list[str]]:
    """The schema's needs and the connection fields a claim of each names (`#NeedFields`)."""
    block = _NEED_FIELDS.search(_SCHEMA.read_text())
    assert block is not None, "renderer/schema/application.cue declares no #NeedFields"
    return {m["need"]: re.findall(r'"([a-z]+)"', m["fields"]) for m in _NEED.finditer(block["body"])}


def _suggest(name: str, known: Sequence[str], aliases: dict[str, str] | None = None, cutoff: float = 0.75) -> str:
    words = [*known, *(aliases or {})]
    close = difflib.get_close_matches(name.lower(), words, n=1, cutoff=cutoff)
    if not close:
        return ""
    return f"; did you mean `{(aliases or {}).get(close[0], close[0])}`?"


def unknown_need(name: str) -> str:
    """The names a need may have, and the one `name` was likely meant to be."""
    needs = sorted(need_fields())
    return f"needs are {', '.join(needs)}{_suggest(name, needs, ALIASES)}"


def describe(constraint: str) -> str:
    """cue's printed constraint in words: `>=1 & <=65535 & int` is "an integer 1-65535"."""
    if " | " in constraint and "&" not in constraint:
        return "one of " + ", ".join(part.strip() for part in constraint.split(" | "))
    kind, low, high, rules = "", "", "", []
    for part in (p.strip() for p in constraint.split(" & ")):
        bound = _BOUND.fullmatch(part)
        regex = _REGEX.fullmatch(part)
        if part in _KINDS:
            kind = _KINDS[part]
        elif bound and bound["op"] in (">=", ">"):
            low = bound["n"] if bound["op"] == ">=" else f"> {bound['n']}"
        elif bound:
            high = bound["n"] if bound["op"] == "<=" else f"< {bound['n']}"
        elif regex:
            rules.append(patterns.rule_for(unquote(regex["re"]) or "") or f"a string matching {regex['re']}")
        elif not part.startswith("strings.MaxRunes("):  # a rule's own length bound: the rule says it
            return constraint
    if rules:
        return rules[0]
    words = kind or "a value"
    if low and high and not low.startswith(">") and not high.startswith("<"):
        return f"{words} {low}-{high}"
    bounds = [b for b in (f">= {low}" if low and not low.startswith(">") else low,
                          f"<= {high}" if high and not high.startswith("<") else high) if b]
    return f"{words} {' and '.join(bounds)}" if bounds else words


def missing(fields: Sequence[str | int], written: int, constraint: str) -> str:
    """`missing required field expose.port (an integer 1-65535)`: named from the deepest written field (`written`
    labels of `fields` are in the file), where the problem is shown."""
    return f"missing required field {field_path(fields[max(written - 1, 0):])} ({describe(constraint)})"


def claim_hint(label: str, line: str, col: int, fields: Sequence[str | int]) -> str | None:
    """For cue's `undefined field: <label>` at an env value: what the claim reference at `col` (1-based, where cue
    points: the label) of `line` is missing, or None when it is no claim reference."""
    at = _IDENT.match(line, col - 1)
    if at is None or at.group() != label:
        return None
    before = _CHAIN.search(line[: col - 1])
    chain = (before.group() if before else "") + label
    parts = chain.split(".")
    if parts[0] != "claim" or len(parts) < 2:
        return None
    needs = need_fields()
    if len(parts) == 2 and label in needs:
        key = fields[-1] if len(fields) >= 2 and fields[-2] == "env" else field_path(fields)
        return f"claim.{label} is used in env.{key} but needs has no {label}: add needs: {label}: {{}}"
    if len(parts) == 2:
        return f"claim.{label}: there is no need {label!r} ({unknown_need(label)})"
    need = parts[1]
    if need in needs and len(parts) == 3:
        known = [*needs[need], *(["pass"] if "password" in needs[need] else [])]
        return (f"claim.{need} has no field {label!r} (its fields are {', '.join(needs[need])})"
                f"{_suggest(label, known, cutoff=0.6)}")  # short names: `uri` is 0.67 of `url`
    return None


def references(declared: Sequence[str]) -> str:
    """The claim references an app with the `declared` needs has, grouped by need: `claim.pg.<url|host|...>`."""
    needs = need_fields()
    known = [n for n in sorted(set(declared)) if needs.get(n)]
    if not known:
        return "the app declares no need, so it has no claim reference (declare one under needs)"
    return "its references are " + ", ".join(f"claim.{n}.<{'|'.join(needs[n])}>" for n in known)


def reference_hint(word: str, line: str, col: int, key: str, declared: Sequence[str]) -> str | None:
    """For cue's `reference "<word>" not found` at an env value: when the value at `col` (1-based) of `line` is a
    dotted name that reads as a mistyped claim reference (`clam.pg.url`), what was typed, the reference meant and
    the references there are; when it is some other dotted name, that a literal is quoted (the name not shown: it
    may be a value); None for a single bare word (the quote hint is right: it was meant as a string)."""
    chain = _CHAIN_FROM.match(line, col - 1)
    if chain is None or not chain.group().startswith(word + "."):
        return None
    typed = chain.group()
    parts = typed.split(".")
    needs = need_fields()
    all_refs = [f"claim.{n}.{f}" for n in sorted(set(declared)) for f in needs.get(n, [])]
    looks_like_claim = len(parts) == 3 and (
        difflib.SequenceMatcher(None, parts[0].lower(), "claim").ratio() >= 0.6 or parts[1] in needs)
    if not looks_like_claim:
        return (f"a bare dotted name is read as a reference, and no reference has that name: a literal string is "
                f'quoted, {key}: "..."; {references(declared)}')
    close = difflib.get_close_matches(typed, all_refs, n=1, cutoff=0.6)
    mean = f"; did you mean {close[0]}?" if close else ""
    return f"{typed} is not a reference of this app{mean} ({references(declared)})"
