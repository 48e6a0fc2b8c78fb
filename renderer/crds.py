"""Generates the CustomResourceDefinitions from the CUE schema (cue def --out openapi), made structural."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from renderer.cue import run_cue
from renderer.errors import ToolFailure
from renderer.names import ENVIRONMENT_IMMUTABLE, GROUP, VERSION
from renderer.scratch import scratch_dir

SchemaPath = tuple[str, ...]  # property names from the object's root; "*" = additionalProperties, "[]" = items


@dataclasses.dataclass(frozen=True)
class SchemaPatch:
    """What cue's OpenAPI cannot say, merged into the structural schema at `path`: CEL rules
    (`x-kubernetes-validations`), list-map markers, fields required in the cluster object only.
    Lists (`required`, `x-kubernetes-validations`) are extended, other keys set."""

    path: SchemaPath
    patch: Mapping[str, Any]


def cel(path: SchemaPath, rule: str, message: str, reason: str | None = None) -> SchemaPatch:
    """A CEL validation rule at `path` (a transition rule when it mentions oldSelf)."""
    entry: dict[str, Any] = {"rule": rule, "message": message}
    if reason:
        entry["reason"] = reason
    return SchemaPatch(path, {"x-kubernetes-validations": [entry]})


@dataclasses.dataclass(frozen=True)
class Column:
    """A `kubectl get` column."""

    name: str
    json_path: str
    type: str = "string"
    priority: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.priority:
            out["priority"] = self.priority
        return out


def condition_column(condition: str) -> Column:
    return Column(condition, f'.status.conditions[?(@.type=="{condition}")].status')


AGE = Column("Age", ".metadata.creationTimestamp", "date")


@dataclasses.dataclass(frozen=True)
class CrdSource:
    """Where a CRD's schema lives (package/schema/<file>, CUE definitions for spec and status) and the
    names it is served under, plus what only the cluster object has (CEL rules, columns).

    Each core package owns its own (compatibility: MigrationPlan); `apprafter crds` lists them all.
    """

    kind: str
    package: str
    schema_file: str
    definition: str
    plural: str
    short_names: tuple[str, ...]
    status_definition: str | None = None
    # Further schema files evaluated with schema_file, as (package, file): shared definitions.
    extra_files: tuple[tuple[str, str], ...] = ()
    patches: tuple[SchemaPatch, ...] = ()
    columns: tuple[Column, ...] = ()
    cluster_scoped: bool = False

    @property
    def api_version(self) -> str:
        """Every AppRafter kind is served at apprafter.io/v1alpha1 (the runtime resolves plural and scope itself)."""
        return f"{GROUP}/{VERSION}"


STATUS_FILE = ("renderer", "status.cue")
CONDITIONS_LIST_MAP = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}

APPLICATION = CrdSource(
    "Application", "renderer", "application.cue", "Application", "applications", ("arapp",),
    status_definition="ApplicationStatus", extra_files=(STATUS_FILE,),
    patches=(
        # The plugin stamps the environment; a cluster object is always one environment's deployment.
        SchemaPatch(("spec",), {"required": ["environment"]}),
        cel(("spec",), "self.environment == oldSelf.environment", f"spec.environment {ENVIRONMENT_IMMUTABLE}",
            "FieldValueForbidden"),
        SchemaPatch(("status", "conditions"), CONDITIONS_LIST_MAP),
    ),
    # What `kubectl get deploy` says of a workload (ready of desired replicas), the phase, and where it answers.
    columns=(Column("Environment", ".spec.environment"), Column("Phase", ".status.phase"),
             Column("Ready", ".status.replicas.ready", "integer"), Column("Desired", ".status.replicas.desired",
                                                                           "integer"),
             Column("URL", ".status.url"), Column("Updated", ".status.replicas.updated", "integer", priority=1),
             Column("Available", ".status.replicas.available", "integer", priority=1),
             Column("Plan", ".status.migrationPlan", priority=1), Column("Image", ".status.image", priority=1), AGE),
)
RESOURCE_CLAIM = CrdSource(
    "ResourceClaim", "renderer", "resourceclaim.cue", "ResourceClaimSpec", "resourceclaims", ("rclaim",),
    status_definition="ResourceClaimStatus", extra_files=(STATUS_FILE,),
    # Providers own the claim's status: typed where we read it, open for what they add.
    patches=(SchemaPatch(("status",), {"x-kubernetes-preserve-unknown-fields": True}),
             SchemaPatch(("status", "conditions"), CONDITIONS_LIST_MAP)),
    columns=(Column("Type", ".spec.type"), Column("Ready", ".status.ready", "boolean"), AGE),
)
RENDERER_CRDS = (APPLICATION, RESOURCE_CLAIM)


def _schema_text(package: str, schema_file: str) -> str:
    return resources.files(package).joinpath(f"schema/{schema_file}").read_text()


def openapi(package: str, schema_file: str, extra_files: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """The OpenAPI components cue generates for one schema file of a package (plus shared files)."""
    texts = [_schema_text(package, schema_file), *(_schema_text(p, f) for p, f in extra_files)]
    with scratch_dir("apprafter-crds-") as tmp:
        (Path(tmp) / "schema.cue").write_text("package apprafter\n\n" + "\n\n".join(texts))
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


def closed(node: Any) -> Any:
    """CUE's closed structs closed again: cue's OpenAPI drops closedness, so an unknown field would pass; every
    object with properties gets `additionalProperties: false` unless it says otherwise."""
    if isinstance(node, list):
        return [closed(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: closed(v) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


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
    """Make a schema structural for the API server: a mixed-type oneOf/anyOf keeps unknown fields. When its one
    struct branch is beside constants only (`false | #Health`), the struct's fields stay typed and bounded (a
    structural schema cannot say "false or an object": the webhook's schema refuses the rest)."""
    if isinstance(node, list):
        return [structural(n) for n in node]
    if not isinstance(node, dict):
        return node
    if _one_of_fields(node):
        # `{a: ...} | {b: ...}` of closed structs: every field typed, and the oneOf keeps "exactly one of them"
        # as a value validation (structural: its branches name only fields typed outside them).
        props = {name: sub for branch in node["oneOf"] for name, sub in branch["properties"].items()}
        folded = {k: v for k, v in node.items() if k != "oneOf"}
        folded["properties"] = structural(props)
        folded["oneOf"] = [{"required": list(branch["required"])} for branch in node["oneOf"]]
        return folded
    for key in ("oneOf", "anyOf"):
        if key in node:
            desc = node.get("description")
            out: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}
            if desc:
                out["description"] = desc
            structs = [b for b in node[key] if b.get("type") == "object" and "properties" in b]
            if len(structs) == 1 and all(b is structs[0] or set(b) == {"enum"} for b in node[key]):
                out["properties"] = structural(structs[0]["properties"])
            return out
    node = {k: structural(v) for k, v in node.items()}
    if node.get("type") == "object" and "properties" not in node and "additionalProperties" not in node:
        node["x-kubernetes-preserve-unknown-fields"] = True
    return node


def _one_of_fields(node: dict[str, Any]) -> bool:
    """An object's oneOf whose branches each require their own fields and type nothing else (what cue makes of a
    disjunction of closed structs with disjoint fields)."""
    branches = node.get("oneOf")
    if node.get("type") != "object" or "properties" in node or not isinstance(branches, list) or not branches:
        return False
    seen: set[str] = set()
    for branch in branches:
        if set(branch) != {"required", "properties"} or set(branch["required"]) != set(branch["properties"]):
            return False
        if seen & set(branch["properties"]):
            return False
        seen |= set(branch["properties"])
    return True


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


def _schemas(source: CrdSource) -> dict[str, Any]:
    return openapi(source.package, source.schema_file, source.extra_files)


def spec_schema(source: CrdSource, schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    """The inlined, structural schema of a CRD's spec."""
    schemas = schemas if schemas is not None else _schemas(source)
    root = inline(schemas[source.definition], schemas)
    spec = root["properties"]["spec"] if "spec" in root.get("properties", {}) else root
    if source == APPLICATION:
        _env_values(spec)
    result: dict[str, Any] = structural(spec)
    return result


def status_schema(source: CrdSource, schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    """The structural schema of a CRD's status (open when the source types none)."""
    if source.status_definition is None:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schemas = schemas if schemas is not None else _schemas(source)
    result: dict[str, Any] = structural(inline(schemas[source.status_definition], schemas))
    return result


def _node(schema: dict[str, Any], path: SchemaPath) -> dict[str, Any]:
    node = schema
    for part in path:
        if part == "*":
            node = node["additionalProperties"]
        elif part == "[]":
            node = node["items"]
        else:
            node = node["properties"][part]
    return node


def apply_patches(schema: dict[str, Any], patches: tuple[SchemaPatch, ...]) -> dict[str, Any]:
    """The schema with each patch merged in at its path (KeyError for a path the schema lacks)."""
    out = copy.deepcopy(schema)
    for patch in patches:
        node = _node(out, patch.path)
        for key, value in patch.patch.items():
            if key == "required":
                node[key] = sorted(set(node.get(key, [])) | set(value))
            elif key == "x-kubernetes-validations":
                node[key] = [*node.get(key, []), *copy.deepcopy(list(value))]
            else:
                node[key] = copy.deepcopy(value)
    return out


def crd(source: CrdSource) -> dict[str, Any]:
    """The CustomResourceDefinition for one source (namespaced unless it says otherwise, v1alpha1, status
    subresource)."""
    kind_name, plural, short = source.kind, source.plural, list(source.short_names)
    schemas = _schemas(source)
    schema = apply_patches({"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": spec_schema(source, schemas), "status": status_schema(source, schemas),
    }, "required": ["spec"]}, source.patches)
    version: dict[str, Any] = {"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": schema}}
    if source.columns:
        version["additionalPrinterColumns"] = [c.to_json() for c in source.columns]
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Cluster" if source.cluster_scoped else "Namespaced",
                 "names": {"kind": kind_name, "listKind": f"{kind_name}List", "plural": plural,
                           "singular": kind_name.lower(), "shortNames": short},
                 "versions": [version]},
    }


def crd_documents(sources: tuple[CrdSource, ...] = RENDERER_CRDS) -> list[dict[str, Any]]:
    """CRDs for the given sources, sorted by name (deterministic output)."""
    return [crd(source) for source in sorted(sources, key=lambda s: s.plural)]
