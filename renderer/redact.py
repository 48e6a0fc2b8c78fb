"""The one way an env literal value may appear in a message: never as written, at most as a SHA-256 prefix.

An env literal may be an inlined credential, and messages end up in Argo CD's UI, CI logs and the
cluster. Every producer of messages (cue's errors, the renderer's checks, CR loaders, the webhook) runs its
problems through a Redactor built from the env literals it knows; cue's messages about an env field are
also stripped of every string value whatever its origin (`strip_values`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from renderer.errors import Problem
from toolchain.record import TYPE_CHECKING
from toolchain.regex import lazy

if TYPE_CHECKING:
    from typing import Any

__all__ = ["Redactor", "digest", "env_literals", "fingerprint", "go_quote", "is_env_path", "shown", "strip_values"]

# Below this length a digest prefix is as good as the value (a dictionary lookup away): none is shown.
MIN_FINGERPRINT_CHARS = 8
# Values at least this long are also replaced where they appear unquoted.
MIN_BARE_CHARS = 8
_GO_STRING = lazy(r'(?<![=!]~)(?<![=!]~ )"(?:[^"\\\n]|\\.)*"')


def fingerprint(value: str) -> str:
    """What a message shows instead of an env literal."""
    if len(value) < MIN_FINGERPRINT_CHARS:
        return "<redacted>"
    return f"<redacted sha256:{digest(value)[:8]}>"


def digest(value: str) -> str:
    """The full SHA-256 hex of a literal (plans record literals only this way)."""
    import hashlib  # only a redaction needs it: a valid render never pays the import

    return hashlib.sha256(value.encode()).hexdigest()


def is_env_path(path: Sequence[str | int]) -> bool:
    """Whether a field path names an env value of an Application (spec.base.env.K, spec.environments.E.env.K)
    or of an effective spec (env.K), including anything below it."""
    parts = [str(p) for p in path]
    if parts[:1] == ["env"] and len(parts) >= 2:
        return True
    if parts[:3] == ["spec", "base", "env"] and len(parts) >= 4:
        return True
    return parts[:2] == ["spec", "environments"] and len(parts) >= 5 and parts[3] == "env"


def env_literals(document: Any) -> set[str]:
    """Every literal (string) env value in base and each environment of an Application document."""
    spec = document.get("spec") if isinstance(document, Mapping) else None
    if not isinstance(spec, Mapping):
        return set()
    scopes = [spec.get("base")]
    environments = spec.get("environments")
    if isinstance(environments, Mapping):
        scopes += list(environments.values())
    out: set[str] = set()
    for scope in scopes:
        env = scope.get("env") if isinstance(scope, Mapping) else None
        if isinstance(env, Mapping):
            out.update(v for v in env.values() if isinstance(v, str))
    return out


def go_quote(value: str) -> str:
    """A string quoted the way Go's strconv.Quote (and so cue) prints it."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif not ch.isprintable() and code > 0x7F:
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _forms(value: str) -> set[str]:
    """How a value can be spelled in a message: quoted by cue/Go, JSON or Python, and bare when long."""
    forms = {go_quote(value), json.dumps(value), json.dumps(value, ensure_ascii=False), repr(value)}
    if len(value) >= MIN_BARE_CHARS:
        forms.add(value)
    return forms


class _Spellings:
    """Every spelling of a set of values, found in a message in one left-to-right pass: the forms of at least KEY
    characters are looked up by their first KEY characters, the shorter ones (always quoted: a value of 8 or more
    characters has a bare form that long) only where a quote starts. Linear in the message for the inputs a
    document can shape (one alternation of every form made each message cost the number of values)."""

    KEY = MIN_BARE_CHARS

    __slots__ = ("long", "short", "short_lengths", "spelled")

    def __init__(self, values: frozenset[str]) -> None:
        self.spelled = {form: value for value in values for form in _forms(value)}
        self.long: dict[str, list[str]] = {}
        short: set[str] = set()
        for form in self.spelled:
            if len(form) >= self.KEY:
                self.long.setdefault(form[: self.KEY], []).append(form)
            else:
                short.add(form)
        for forms in self.long.values():
            forms.sort(key=len, reverse=True)  # the longest spelling wins, as in one sorted alternation
        self.short = short
        self.short_lengths = sorted({len(f) for f in short}, reverse=True)

    def at(self, message: str, i: int) -> str | None:
        """The longest spelling that starts at message[i], if any."""
        for form in self.long.get(message[i: i + self.KEY], ()):
            if message.startswith(form, i):
                return form
        if message[i] in "\"'":
            for length in self.short_lengths:
                if message[i: i + length] in self.short:
                    return message[i: i + length]
        return None

    def sub(self, message: str) -> str:
        pieces, start, i, end = [], 0, 0, len(message)
        while i < end:
            found = self.at(message, i)
            if found is None:
                i += 1
                continue
            pieces += [message[start:i], fingerprint(self.spelled[found])]
            i = start = i + len(found)
        if not pieces:
            return message
        pieces.append(message[start:])
        return "".join(pieces)


class Redactor:  # a plain class, not a dataclass: `dataclasses` costs the plugin's start-up ~6 ms of imports
    """Replaces every spelling of the given values in messages by their fingerprint."""

    __slots__ = ("_spellings", "values")

    def __init__(self, values: frozenset[str]) -> None:
        self.values = values
        self._spellings: _Spellings | None = None  # built on the first message that needs it, then kept

    def __repr__(self) -> str:
        return f"Redactor({len(self.values)} values)"

    @classmethod
    def of(cls, values: Iterable[str]) -> Redactor:
        return cls(frozenset(v for v in values if v))

    @classmethod
    def for_document(cls, document: Any) -> Redactor:
        return cls.of(env_literals(document))

    def __or__(self, other: Redactor) -> Redactor:
        return Redactor(self.values | other.values)

    def text(self, message: str) -> str:
        if not self.values:
            return message
        if self._spellings is None:
            self._spellings = _Spellings(self.values)
        return self._spellings.sub(message)

    def problem(self, problem: Problem) -> Problem:
        message, field = self.text(problem.message), self.text(problem.field)
        if (message, field) == (problem.message, problem.field):
            return problem
        return problem._replace(message=message, field=field)

    def problems(self, problems: Iterable[Problem]) -> list[Problem]:
        return [self.problem(p) for p in problems]


def strip_values(message: str, written: Collection[str] = ()) -> str:
    """Every quoted string value in a cue message replaced by its fingerprint, except those in `written` (string
    literals the user or the schema wrote outside env values); regex rules (=~"...") stay.

    A value cue computed (interpolation, strings.ToUpper(env.X), ...) is in no one's `written`: it may come
    from an env literal, so it is never shown."""

    from renderer.positions import unquote  # only a cue error needs it

    def one(m: re.Match[str]) -> str:
        value = unquote(m.group())
        value = m.group()[1:-1] if value is None else value
        return m.group() if value in written else fingerprint(value)

    return _GO_STRING.sub(one, message)


def shown(value: str, written: Collection[str]) -> str:
    """A value for a message of ours: quoted (and cut at 100 characters) when written as such, else its fingerprint."""
    if value not in written:
        return fingerprint(value)
    return repr(value) if len(value) <= 100 else repr(value[:100]) + "..."
