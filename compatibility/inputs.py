"""Reads an Application CR given as YAML/JSON text (what the plugin emits) into a LoadedApp, fail closed.

The schema is the one cue generates from the CUE source (`cue def --out openapi`), which is OpenAPI 3.0:
it is checked with an OpenAPI 3.0 validator (`exclusiveMinimum: true` is a flag there, not a number).
Problems are reported at the YAML node that holds them (renderer.yaml_input keeps every position).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from renderer import patterns
from renderer.crds import APPLICATION, closed, inline, openapi
from renderer.cue_errors import ENV_VALUE_HINT
from renderer.errors import Problem, UserError
from renderer.hints import did_you_mean
from renderer.load import DOCUMENT_KEYS, LoadedApp, Source
from renderer.redact import Redactor, is_env_path
from renderer.yaml_input import YamlDocument, parse, unwritten

__all__ = ["document_schema", "load_document", "parse_cr"]

IGNORED_TOP_LEVEL = frozenset({"status"})  # a CR read back from the cluster carries status; not compared
MAX_MESSAGE = 200



@functools.cache
def document_schema() -> dict[str, Any]:
    """OpenAPI 3.0 schema of an Application CR, all from the CUE source; spec closed, metadata open (uid, ...).

    cue's OpenAPI keeps `#EnvValue` and `#EnvKey` as components but types `env` (a pattern-keyed struct) as a
    bare object; they are put back here: values with `$ref: EnvValue`, keys with JSON Schema's propertyNames.
    Generated once per process (cue runs once); callers must not modify it.
    """
    schemas = openapi(APPLICATION.package, APPLICATION.schema_file)
    env = {"type": "object", "propertyNames": inline(schemas["EnvKey"], schemas),
           "additionalProperties": closed(inline(schemas["EnvValue"], schemas))}
    schema = copy.deepcopy(inline(schemas[APPLICATION.definition], schemas))
    spec = closed(schema["properties"]["spec"])
    spec["properties"]["base"]["properties"]["env"] = env
    spec["properties"]["environments"]["additionalProperties"]["properties"]["env"] = env
    schema["properties"]["spec"] = spec
    result: dict[str, Any] = schema
    return result


@functools.cache
def _validator() -> Any:
    import jsonschema
    from openapi_schema_validator import OAS30Validator

    # OpenAPI 3.0 has no key constraint; propertyNames (JSON Schema draft 6+) carries CUE's `[#EnvKey]: ...`.
    keywords = {"propertyNames": jsonschema.Draft7Validator.VALIDATORS["propertyNames"]}
    cls = jsonschema.validators.extend(OAS30Validator, keywords)
    return cls(document_schema())


def _problems(doc: YamlDocument, data: dict[str, Any]) -> Iterator[Problem]:
    """One problem per schema violation, at the YAML node; an unknown field at its key, like cue names it.

    No message shows an env value: one about an env value says what the value must be, and every other one
    has the document's env literals redacted (before it is shortened, so no part of one survives)."""
    redactor = Redactor.for_document(data)
    for error in _validator().iter_errors(data):
        yield from _error_problems(doc, error, redactor)


def _struct_branch(error: Any) -> int | None:
    """The index of the one struct branch of a oneOf/anyOf whose other branches are constants (`false | #Health`)."""
    if error.validator not in ("oneOf", "anyOf"):
        return None
    branches = error.validator_value
    structs = [i for i, b in enumerate(branches) if b.get("type") == "object"]
    if len(structs) != 1 or not all(i == structs[0] or set(b) == {"enum"} for i, b in enumerate(branches)):
        return None
    return structs[0]


def _error_problems(doc: YamlDocument, error: Any, redactor: Redactor) -> Iterator[Problem]:
    path: tuple[str | int, ...] = tuple(error.absolute_path)
    branch = _struct_branch(error)
    if branch is not None:  # said as `apprafter validate` says it: what is wrong inside the struct, or its form
        if isinstance(error.instance, dict):
            for sub in error.context:
                if sub.relative_schema_path and sub.relative_schema_path[0] == branch:
                    yield from _error_problems(doc, sub, redactor)
            return
        constants = [json.dumps(v) for b in error.validator_value if "enum" in b for v in b["enum"]]
        given = redactor.text(json.dumps(error.instance))
        yield doc.problem(path, f"{given if len(given) <= 40 else given[:37] + '...'} is not allowed: want one "
                          f"of {', '.join(constants)}, a struct")
        return
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        for key in sorted(set(error.instance) - set(known)):
            mean = did_you_mean(str(key), sorted(known))
            yield doc.problem((*path, key), f"field not allowed; {mean}" if mean else "field not allowed",
                              at_key=True)
    elif error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in error.validator_value if k not in error.instance]
        for key in missing:
            yield doc.problem((*path, key), "required field is missing")
    elif "propertyNames" in error.relative_schema_path and isinstance(error.instance, str):
        yield doc.problem((*path, error.instance), f"env key {error.instance!r} must match "
                          f"{error.validator_value}", at_key=True)
    else:
        yield doc.problem(path, _message(error, redactor))


def _message(error: Any, redactor: Redactor) -> str:
    if is_env_path(tuple(error.absolute_path)):
        return ENV_VALUE_HINT
    if error.validator == "pattern":  # the schema's name rules, worded as `apprafter validate` words them
        named = patterns.violation(str(error.validator_value), error.instance)
        if named and tuple(error.absolute_path)[-1:] == ("hostname",) and isinstance(error.instance, str):
            from renderer.hostnames import hostname_problem  # the rule broken, as `apprafter validate` names it

            named = hostname_problem(error.instance) or named
        if named:
            return redactor.text(named)
    message = redactor.text(str(error.message))
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def parse_cr(text: str | bytes, display: str, strict_json: bool = False) -> LoadedApp:
    """A YAML (or, with strict_json, JSON) Application CR validated against the CUE-generated schema."""
    doc = parse(text, display, json_only=strict_json)  # JSON-shaped: string keys, finite numbers
    return _load(doc, text if isinstance(text, str) else text.decode())


def load_document(data: Any, display: str) -> LoadedApp:
    """An Application object that was never text (what the API server sends the webhook, JSON-shaped), checked
    as `parse_cr` checks a CR; its problems carry no position. Parsing its JSON again to place them would cost
    the webhook ~15 ms a request."""
    return _load(unwritten(data, display), "")


def _load(doc: YamlDocument, text: str) -> LoadedApp:
    display = doc.display
    if not isinstance(doc.data, dict):
        raise UserError([Problem(display, 1, 1, "", "an Application CR is a mapping (apiVersion, kind, metadata, "
                                 "spec)")])
    data = {k: v for k, v in doc.data.items() if k not in IGNORED_TOP_LEVEL}
    problems = list(_problems(doc, data))
    if problems:
        raise UserError(problems)
    # The YAML document knows where each field is written: later problems (validate, plan) point there.
    source = Source(Path(display), display, text if isinstance(text, str) else text.decode(), None, doc)
    return LoadedApp(source, {k: data[k] for k in DOCUMENT_KEYS if k in data})
