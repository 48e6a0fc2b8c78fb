"""Generates the CustomResourceDefinitions from the CUE schema (cue def --out openapi), made structural."""

from __future__ import annotations

import copy
import dataclasses
import json
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from renderer.cue import run_cue
from renderer.errors import ToolFailure
from renderer.names import GROUP, VERSION


@dataclasses.dataclass(frozen=True)
class CrdSource:
    """Where a CRD's schema lives (package/schema/<file>, a CUE definition) and the names it is served under.

    Each core package owns its own (compatibility: MigrationPlan); `apprafter crds` lists them all.
    """

    kind: str
    package: str
    schema_file: str
    definition: str
    plural: str
    short_names: tuple[str, ...]


APPLICATION = CrdSource("Application", "renderer", "application.cue", "Application", "applications", ("arapp",))
RESOURCE_CLAIM = CrdSource("ResourceClaim", "renderer", "resourceclaim.cue", "ResourceClaimSpec",
                           "resourceclaims", ("rclaim",))
RENDERER_CRDS = (APPLICATION, RESOURCE_CLAIM)


def openapi(package: str, schema_file: str) -> dict[str, Any]:
    """The OpenAPI components cue generates for one schema file of a package."""
    text = resources.files(package).joinpath(f"schema/{schema_file}").read_text()
    with tempfile.TemporaryDirectory(prefix="apprafter-crds-") as tmp:
        (Path(tmp) / "schema.cue").write_text("package apprafter\n\n" + text)
        result = run_cue(["def", "--out", "openapi", "schema.cue"], cwd=Path(tmp))
    if result.returncode != 0:
        raise ToolFailure(f"cue def --out openapi failed on {schema_file}: {result.stderr.strip()}")
    schemas: dict[str, Any] = json.loads(result.stdout)["components"]["schemas"]
    return schemas


def inline(node: Any, schemas: dict[str, Any]) -> Any:
    """Resolve $ref and fold allOf into the node, recursively."""
    if isinstance(node, list):
        return [inline(n, schemas) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(schemas[node["$ref"].rsplit("/", 1)[-1]])
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return inline(_merge(target, rest), schemas)
    node = {k: inline(v, schemas) for k, v in node.items()}
    for branch in node.pop("allOf", []):
        node = _merge(node, branch)
    return node


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        if key == "properties":
            props = dict(out.get("properties", {}))
            for name, sub in value.items():
                props[name] = _merge(props[name], sub) if name in props else sub
            out["properties"] = props
        elif key == "required":
            out["required"] = sorted(set(out.get("required", [])) | set(value))
        else:
            out.setdefault(key, value)
    return out


def structural(node: Any) -> Any:
    """Make a schema structural for the API server: a mixed-type oneOf/anyOf keeps unknown fields."""
    if isinstance(node, list):
        return [structural(n) for n in node]
    if not isinstance(node, dict):
        return node
    for key in ("oneOf", "anyOf"):
        if key in node:
            desc = node.get("description")
            out: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}
            if desc:
                out["description"] = desc
            return out
    node = {k: structural(v) for k, v in node.items()}
    if node.get("type") == "object" and "properties" not in node and "additionalProperties" not in node:
        node["x-kubernetes-preserve-unknown-fields"] = True
    return node


def _env_values(spec_schema: dict[str, Any]) -> None:
    """env maps hold a string or a reference object: typed loosely here, checked by the renderer."""
    for scope in ("base",):
        props = spec_schema["properties"][scope]["properties"]
        props["env"] = _env_schema()
    env_override = spec_schema["properties"]["environments"]["additionalProperties"]["properties"]
    env_override["env"] = _env_schema()


def _env_schema() -> dict[str, Any]:
    return {"type": "object", "description": 'literal string | {claim: "<need>/<field>"} | '
            '{secret: "<secret>/<key>"}', "additionalProperties": {"x-kubernetes-preserve-unknown-fields": True}}


def spec_schema(source: CrdSource) -> dict[str, Any]:
    """The inlined, structural schema of a CRD's spec."""
    schemas = openapi(source.package, source.schema_file)
    root = inline(schemas[source.definition], schemas)
    spec = root["properties"]["spec"] if "spec" in root.get("properties", {}) else root
    if source == APPLICATION:
        _env_values(spec)
    result: dict[str, Any] = structural(spec)
    return result


def crd(source: CrdSource) -> dict[str, Any]:
    """The CustomResourceDefinition for one source (namespaced, v1alpha1, status subresource)."""
    kind_name, plural, short = source.kind, source.plural, list(source.short_names)
    schema = {"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": spec_schema(source),
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }, "required": ["spec"]}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"kind": kind_name, "listKind": f"{kind_name}List", "plural": plural,
                           "singular": kind_name.lower(), "shortNames": short},
                 "versions": [{"name": VERSION, "served": True, "storage": True,
                               "subresources": {"status": {}}, "schema": {"openAPIV3Schema": schema}}]},
    }


def crd_documents(sources: tuple[CrdSource, ...] = RENDERER_CRDS) -> list[dict[str, Any]]:
    """CRDs for the given sources, sorted by name (deterministic output)."""
    return [crd(source) for source in sorted(sources, key=lambda s: s.plural)]
