"""JSON Schema of Argo CD's ConfigManagementPlugin (cmpserver/plugin/config.go at the pinned release).

Argo CD silently ignores unknown keys, so our plugin.yaml files are validated against this in tests.
"""

from __future__ import annotations

from typing import Any

_COMMAND: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {"command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                   "args": {"type": "array", "items": {"type": "string"}}},
}
_ANNOUNCEMENT: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1}, "title": {"type": "string"}, "tooltip": {"type": "string"},
        "required": {"type": "boolean"}, "itemType": {"enum": ["string", "boolean", "number"]},
        "collectionType": {"enum": ["string", "array", "map"]}, "string": {"type": "string"},
        "array": {"type": "array", "items": {"type": "string"}},
        "map": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
PLUGIN_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "argoproj.io/v1alpha1"},
        "kind": {"const": "ConfigManagementPlugin"},
        "metadata": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        "spec": {
            "type": "object", "additionalProperties": False, "required": ["generate"],
            "properties": {
                "version": {"type": "string"},
                "init": _COMMAND,
                "generate": {**_COMMAND, "required": ["command"]},
                "discover": {"type": "object", "additionalProperties": False, "properties": {
                    "fileName": {"type": "string"},
                    "find": {"type": "object", "additionalProperties": False, "properties": {
                        **_COMMAND["properties"], "glob": {"type": "string"}}},
                }},
                "parameters": {"type": "object", "additionalProperties": False, "properties": {
                    "static": {"type": "array", "items": _ANNOUNCEMENT},
                    "dynamic": _COMMAND,
                }},
                "preserveFileMode": {"type": "boolean"},
                "provideGitCreds": {"type": "boolean"},
            },
        },
    },
}
