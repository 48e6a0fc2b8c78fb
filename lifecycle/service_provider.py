"""ServiceProvider: the kind (its CRD source) and the webhook's twin of its schema — which backends serve which type,
and the config each backend reads.

A provider is a cluster administrator's statement (cluster-scoped, like a HostnamePolicy); claims select providers by
type and by the provider's labels (spec §3.2, §3.3). The backends are the platform's provider contract: an
Application names a need, never a backend, so a backend that serves a type can replace another without an
Application changing. The table of backends and their configs is the CUE schema's
(`#Backends` in schema/serviceprovider.cue), read here once per process.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from renderer.crds import AGE, Column, CrdSource, SchemaPatch, closed, inline, openapi

__all__ = ["SERVICE_PROVIDER", "backends", "check", "config_schema", "with_defaults"]

SERVICE_PROVIDER = CrdSource(
    "ServiceProvider", "lifecycle", "serviceprovider.cue", "ServiceProviderSpec", "serviceproviders", ("svcp",),
    extra_files=(("renderer", "resourceclaim.cue"),), cluster_scoped=True,
    # The backend's settings are its own: kept as written by the CRD, held to its backend's schema by the webhook.
    patches=(SchemaPatch(("spec", "config"), {"x-kubernetes-preserve-unknown-fields": True}),),
    columns=(Column("Type", ".spec.type"), Column("Backend", ".spec.backend"), AGE),
)



@functools.cache
def _table() -> dict[str, dict[str, dict[str, Any]]]:
    """type -> backend -> the closed JSON schema of its config, from #Backends (cue runs once per process)."""
    schemas = openapi(SERVICE_PROVIDER.package, SERVICE_PROVIDER.schema_file, SERVICE_PROVIDER.extra_files)
    table = inline(schemas["Backends"], schemas)
    return {kind: {backend: closed(schema) for backend, schema in served["properties"].items()}
            for kind, served in table["properties"].items()}


def backends() -> dict[str, tuple[str, ...]]:
    """Which backends serve each platform-service type (a type with no entry has none on this platform yet)."""
    return {kind: tuple(served) for kind, served in _table().items()}


def config_schema(kind: str, backend: str) -> dict[str, Any]:
    """The JSON schema (OpenAPI 3.0) of `spec.config` for a backend of a type (KeyError: no such pair)."""
    return _table()[kind][backend]


@functools.cache
def _validator(kind: str, backend: str) -> Any:
    from openapi_schema_validator import OAS30Validator

    return OAS30Validator(config_schema(kind, backend))


def _config_problems(kind: str, backend: str, config: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for error in sorted(_validator(kind, backend).iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(["spec.config", *(str(p) for p in error.absolute_path)])
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = ", ".join(sorted(error.schema.get("properties", {})))
            for key in sorted(set(error.instance) - set(error.schema.get("properties", {}))):
                problems.append((f"{where}.{key}", f"{backend} does not read it (it reads: {known})"))
        elif error.validator == "required" and isinstance(error.instance, dict):
            for key in error.validator_value:
                if key not in error.instance:
                    problems.append((f"{where}.{key}", f"{backend} needs it"))
        else:
            problems.append((where, error.message))
    return list(dict.fromkeys(problems))  # jsonschema says a missing field once per field, each naming all


def check(obj: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) of a ServiceProvider the CRD's schema lets through: a backend that does not serve its type,
    a config its backend does not read."""
    spec = obj.get("spec") or {}
    kind, backend = spec.get("type"), spec.get("backend")
    if not isinstance(kind, str) or not isinstance(backend, str):
        return []  # the schema's to refuse
    table = backends()
    served = table.get(kind)
    if served is None:
        have = ", ".join(sorted(table))
        return [("spec.type", f"no backend serves {kind} on this platform yet (types with one: {have})")]
    if backend not in served:
        return [("spec.backend", f"{backend!r} does not serve {kind}: use {' or '.join(served)}")]
    if "config" not in spec:
        return []
    return _config_problems(kind, backend, spec["config"])


def _filled(schema: Mapping[str, Any], value: Any) -> Any:
    """`value` with the schema's defaults where it leaves a field out (an absent object is made when it gains one)."""
    if value is None and "default" in schema:
        return schema["default"]
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not isinstance(value, Mapping | None):
        return value
    out = dict(value or {})
    for key, sub in properties.items():
        filled = _filled(sub, out.get(key))
        if (filled is not None and filled != {}) or key in out:
            out[key] = filled
    return out


def with_defaults(kind: str, backend: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """A backend's config with the schema's defaults (`*value` in #Backends: the one place they are written) filled
    in where the provider leaves them out."""
    return dict(_filled(config_schema(kind, backend), config))
