"""Reads an Application CR given as YAML/JSON text (what the plugin emits) into a LoadedApp, fail closed."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from compatibility.shape import Unreadable, json_value
from renderer import patterns
from renderer.crds import application_json_schema
from renderer.cue_errors import ENV_VALUE_HINT
from renderer.errors import Problem, UserError
from renderer.load import DOCUMENT_KEYS, LoadedApp, Source
from renderer.redact import Redactor, is_env_path

IGNORED_TOP_LEVEL = frozenset({"status"})  # a CR read back from the cluster carries status; not compared


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML without aliases (no expansion bombs) and without duplicate keys (no hidden overrides)."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(None, None, "YAML aliases are not allowed", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = key_node.value
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _ref(kind: str, pattern: str) -> dict[str, Any]:
    return {"type": "object", "required": [kind], "additionalProperties": False,
            "properties": {kind: {"type": "string", "pattern": pattern}}}


# cue's OpenAPI types env values as a bare object; the schema says literal | {claim} | {secret}.
ENV_SCHEMA: dict[str, Any] = {
    "type": "object", "propertyNames": {"pattern": "^[A-Z_][A-Z0-9_]*$"},
    "additionalProperties": {"oneOf": [{"type": "string"}, _ref("claim", "^[a-z0-9]+/[a-zA-Z]+$"),
                                       _ref("secret", "^.+/.+$")]},
}


def _closed(node: Any) -> Any:
    """The CUE schema's structs are closed; cue's OpenAPI drops that, so restore it (unknown field = error)."""
    if isinstance(node, list):
        return [_closed(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _closed(v) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out and "patternProperties" not in out:
        out["additionalProperties"] = False
    return out


@functools.cache
def document_schema() -> dict[str, Any]:
    """JSON Schema of an Application CR: the renderer's schema with spec closed; metadata stays open (uid, ...).

    Generated once per process (cue runs once); callers must not modify it."""
    schema = copy.deepcopy(application_json_schema())
    spec = _closed(schema["properties"]["spec"])
    spec["properties"]["base"]["properties"]["env"] = ENV_SCHEMA
    spec["properties"]["environments"]["additionalProperties"]["properties"]["env"] = ENV_SCHEMA
    schema["properties"]["spec"] = spec
    return schema


def _position(text: str, path: tuple[Any, ...]) -> tuple[int, int]:
    """Line/column of the deepest node on `path` in the YAML text (1:1 when it cannot be found)."""
    try:
        node = yaml.compose(text, Loader=_StrictLoader)
    except yaml.YAMLError:
        return 1, 1
    best = node
    for part in path:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = None
        if node is None:
            break
        best = node
    mark = best.start_mark if best is not None else None
    return (mark.line + 1, mark.column + 1) if mark else (1, 1)


def _parse(text: str, display: str, strict_json: bool) -> Any:
    if strict_json:
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError([Problem(display, e.lineno, e.colno, "", f"not valid JSON: {e.msg}")]) from None
    try:
        docs = [d for d in yaml.load_all(text, Loader=_StrictLoader) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = getattr(e, "problem", None) or str(e)
        raise UserError([Problem(display, line, col, "", f"not valid YAML: {message}")]) from None
    except RecursionError:
        raise UserError([Problem(display, 1, 1, "", "not valid YAML: nested too deeply")]) from None
    if len(docs) != 1:
        raise UserError([Problem(display, 1, 1, "", f"expected one Application document, found {len(docs)}")])
    return docs[0]


def parse_cr(text: str, display: str, strict_json: bool = False) -> LoadedApp:
    """A YAML (or, with strict_json, JSON) Application CR validated against the CUE-generated schema."""
    try:
        doc = _parse(text, display, strict_json)
    except RecursionError:
        raise UserError([Problem(display, 1, 1, "", "document nested too deeply")]) from None
    return load_document(doc, display, text)


def load_document(doc: Any, display: str, text: str | None = None) -> LoadedApp:
    """An Application document already parsed (e.g. an API server's object) validated like `parse_cr` does;
    problems are placed in `text` when given (finding positions re-reads it), else without a position."""
    def at(path: tuple[Any, ...]) -> tuple[int, int]:
        return _position(text, path) if text is not None else (0, 0)

    try:
        json_value(doc, "")
    except Unreadable as e:
        raise UserError([Problem(display, *at(tuple(e.field.split("."))), e.field, e.message)]) from None
    except RecursionError:
        raise UserError([Problem(display, *at(()), "", "document nested too deeply")]) from None
    if not isinstance(doc, dict):
        raise UserError([Problem(display, *at(()), "", "an Application CR is a mapping (apiVersion, kind, metadata, "
                                 "spec)")])
    doc = {k: v for k, v in doc.items() if k not in IGNORED_TOP_LEVEL}
    try:
        errors = sorted(_validator().iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    except RecursionError:
        raise UserError([Problem(display, *at(()), "", "document nested too deeply")]) from None
    problems = []
    redactor = Redactor.for_document(doc)
    for error in errors:
        path = tuple(error.absolute_path)
        field = ".".join(str(p) for p in path)
        message = ENV_VALUE_HINT if is_env_path(path) else _message(error)  # never what the value holds
        problems.append(redactor.problem(Problem(display, *at(path), field, message)))
    if problems:
        raise UserError(problems)
    source_text = text if text is not None else json.dumps(doc)
    return LoadedApp(Source(Path(display), display, source_text, None), {k: doc[k] for k in DOCUMENT_KEYS if k in doc})


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(document_schema())


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "pattern":  # our name rules read as `apprafter validate` words them
        named = patterns.violation(str(error.validator_value), error.instance)
        if named:
            return named
    message = str(error.message)
    if error.validator == "additionalProperties":
        return "field not allowed: " + message.split("(", 1)[-1].rstrip(")")
    return message if len(message) <= 200 else message[:197] + "..."
