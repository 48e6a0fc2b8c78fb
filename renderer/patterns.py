"""The name rules of the CUE schema (its `_dnsLabel: "..."` constants), compiled for Python-side full matches.

One source: schema/application.cue declares each pattern once; cue applies it when it evaluates a file,
and these compiled copies check documents that never went through cue (CR inputs, settings, the webhook).
Always use `fullmatch` (through `matches`): `re.match(...$)` accepts a trailing newline.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

__all__ = ["RULES", "app_name", "dns_label", "dns_name", "env_key", "label_value", "matches", "pattern",
           "qualified_name", "rule_for"]

# Read from disk: importlib.resources would cost the plugin ~10 ms of imports.
_SCHEMA = Path(__file__).resolve().parent / "schema" / "application.cue"

_CONSTANT = re.compile(r'^(?P<name>_[A-Za-z]+):[ \t]*"(?P<body>(?:[^"\\\n]|\\.)*)"[ \t]*$', re.MULTILINE)
_ESCAPE = re.compile(r"\\(.)")


@functools.cache
def _constants() -> dict[str, str]:
    text = _SCHEMA.read_text()
    return {m["name"]: _ESCAPE.sub(r"\1", m["body"]) for m in _CONSTANT.finditer(text)}


@functools.cache
def pattern(name: str) -> re.Pattern[str]:
    """The compiled schema constant `name` (e.g. "_dnsLabel"); KeyError when the schema does not declare it."""
    return re.compile(_constants()[name])


# How each rule reads in a message: "'Demo_App' is not <rule>" (cue's errors and the Python checks alike).
RULES = {
    "_dnsLabel": "a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)",
    "_appName": "a DNS-1035 label (a lowercase letter, then lowercase letters, digits and '-', at most 63 "
                "characters)",
    "_dnsName": "a DNS name (DNS-1123 labels joined by '.', at most 253 characters)",
    "_envKey": "an env key (^[A-Z_][A-Z0-9_]*$)",
    "_labelKey": "a qualified name ([DNS-name prefix/]name: letters, digits, '-', '_', '.', at most 63 characters)",
    "_labelValue": "a label value (empty, or letters, digits, '-', '_', '.', at most 63 characters)",
    "_pgMajor": "a PostgreSQL major version (\"16\": its provider applies the minors)",
}


def rule_for(regex: str) -> str | None:
    """The rule a schema regex (as cue prints it in `out of bound =~"..."`) stands for, if it is one of ours."""
    return next((RULES[name] for name in RULES if _constants().get(name) == regex), None)


def violation(regex: str, value: object) -> str | None:
    """`'<value>' is not <rule>` for a value a schema regex of ours refused (None for any other regex), worded as
    cue's errors and the Python checks word it: for checkers that report the regex itself (JSON Schema)."""
    rule = rule_for(regex)
    if rule is None:
        return None
    text = str(value)
    return f"{repr(text) if len(text) <= 100 else repr(text[:100]) + '...'} is not {rule}"


def matches(name: str, value: object) -> bool:
    """Whether value is a string the whole of which matches the schema pattern `name`."""
    return isinstance(value, str) and pattern(name).fullmatch(value) is not None


def dns_label(value: object) -> bool:
    return matches("_dnsLabel", value)


def app_name(value: object) -> bool:
    return matches("_appName", value)


def dns_name(value: object) -> bool:
    """A DNS-1123 subdomain: dot-separated labels, at most 253 characters."""
    return matches("_dnsName", value) and len(str(value)) <= 253


def env_key(value: object) -> bool:
    return matches("_envKey", value)


def qualified_name(value: object) -> bool:
    """A label or annotation key: an optional DNS-subdomain prefix (≤ 253) and '/', then a name (≤ 63)."""
    if not matches("_labelKey", value):
        return False
    prefix, _, _ = str(value).rpartition("/")
    return len(prefix) <= 253


def label_value(value: object) -> bool:
    return matches("_labelValue", value)
