"""Deterministic YAML and JSON output (the one writer): fixed key order, every object spelled out, no wrapping.

The YAML writer is ours, not PyYAML's, for one reason: `render` (and the plugin) start once per call, and
importing PyYAML costs more than writing the few JSON-shaped objects we emit. It writes block style and
quotes (as JSON strings, which YAML reads as double-quoted scalars) every string a YAML 1.1 or 1.2 reader
could take for anything but that string; tests read its output back with PyYAML (YAML 1.1) and ruamel.yaml
(YAML 1.2) and must get the same data.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable

from toolchain.record import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

__all__ = ["dump_json_stream", "dump_names", "dump_stream", "dump_yaml"]

# A plain scalar no YAML reader takes for a number, bool, null, date, tag, anchor, alias or comment: it starts
# with a letter, '_' or '/', and has no space, ',' or '#'; then the YAML 1.1 words for booleans and null.
_PLAIN = r"[A-Za-z_/][A-Za-z0-9_./@=+-]*(?::[A-Za-z0-9_./@=+-]+)*"
_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
# What json.dumps(ensure_ascii=False) leaves raw but YAML must not see raw (C1 controls, line separators, BOM).
_RAW_UNSAFE = "[\x7f-\x9f\u2028\u2029\ufeff]"

_INF = float("inf")


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Compiled on first use: the plugin, which writes JSON, never pays for them."""
    return re.compile(_PLAIN), re.compile(_RAW_UNSAFE)


def _string(text: str) -> str:
    plain, raw_unsafe = _patterns()
    if plain.fullmatch(text) and text.lower() not in _WORDS:
        return text
    return raw_unsafe.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False))


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:  # NaN (math.isnan without importing math: a shared library to load, 0.7 M instructions)
            return ".nan"
        if value in (_INF, -_INF):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        return f"{mantissa}.0e{exponent}" if e and "." not in mantissa else text  # YAML 1.1 wants the dot
    if isinstance(value, str):
        return _string(value)
    raise TypeError(f"cannot write {type(value).__name__} as YAML")


def _block(value: Any, indent: int, out: list[str], sort_keys: bool) -> None:
    """The lines of a non-empty mapping or list at `indent`; lists under a key are not indented (as kubectl)."""
    pad = " " * indent
    if isinstance(value, dict):
        for key in sorted(value) if sort_keys else value:
            item = value[key]
            head = f"{pad}{_string(str(key))}:"
            if isinstance(item, dict | list) and item:
                out.append(head)
                _block(item, indent + 2 if isinstance(item, dict) else indent, out, sort_keys)
            else:
                out.append(f"{head} {_inline(item)}")
        return
    for item in value:
        if isinstance(item, dict | list) and item:
            start = len(out)
            _block(item, indent + 2, out, sort_keys)
            out[start] = f"{pad}- {out[start][indent + 2:]}"
        else:
            out.append(f"{pad}- {_inline(item)}")


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"  # only empty ones are written inline
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def dump_yaml(data: Any, *, sort_keys: bool = False) -> str:
    """Block-style YAML: the same data always gives the same text."""
    if isinstance(data, dict | list) and data:
        out: list[str] = []
        _block(data, 0, out, sort_keys)
        return "\n".join(out) + "\n"
    return _inline(data) + "\n"


def dump_stream(objects: Iterable[dict[str, Any]]) -> str:
    """A YAML stream, one document per object, each starting with '---'."""
    return "".join("---\n" + dump_yaml(obj) for obj in objects)


def dump_json_stream(objects: Iterable[dict[str, Any]]) -> str:
    """The same stream with each document as one line of JSON (JSON is YAML): what the plugin prints, since
    Argo CD reads either and JSON is the cheaper to write."""
    return "".join("---\n" + json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n" for obj in objects)


def dump_names(objects: Iterable[dict[str, Any]]) -> str:
    """`-o name`, kubectl's: one `kind[.group]/name` line per object (kind lower-cased, no group for the core
    API: `service/web`, `deployment.apps/web`, `application.apprafter.io/shop`)."""
    lines = []
    for obj in objects:
        group = str(obj.get("apiVersion", "")).rpartition("/")[0]
        kind = str(obj.get("kind", "")).lower()
        lines.append(f"{kind}{'.' + group if group else ''}/{obj.get('metadata', {}).get('name', '')}\n")
    return "".join(lines)
