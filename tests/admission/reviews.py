"""AdmissionReview requests as the API server sends them, and the objects the admission tests write."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from renderer.load import load
from renderer.render import render_loaded
from tests.renderer.helpers import EXAMPLES

API = "apprafter.io/v1alpha1"
OPERATOR = "system:serviceaccount:apprafter-system:apprafter-operator"
APPROVER = "alice@example.com"
EDITOR = "eve-editor"
FLOODER = "mallory-flood"  # another tenant with the editor's rights, who floods the webhook


def parser_cr(namespace: str = "team-a", environment: str = "prod") -> dict[str, Any]:
    """The parser example's Application CR as the plugin emits it."""
    cr: dict[str, Any] = render_loaded(load(EXAMPLES / "parser"), environment, "cr", namespace).objects[0]
    return cr


def plan(namespace: str = "team-a", scope: str = "application", name: str = "parser-prod-0123456789") -> dict[str, Any]:
    """A MigrationPlan in the shape compatibility.migrationplan builds."""
    scoped: dict[str, Any] = ({"type": "application", "application": {"ref": {"name": "parser"}, "environment": "prod"}}
                              if scope == "application" else
                              {"type": "platform", "platform": {"ref": {"name": "default", "namespace":
                                                                        "apprafter-system"}}})
    return {"apiVersion": API, "kind": "MigrationPlan", "metadata": {"name": name, "namespace": namespace},
            "spec": {"scope": scoped,
                     "trigger": {"type": "need-removed", "field": "needs.pg", "approvedSpecHash": "sha256:" + "a" * 64},
                     "risks": {"classification": "data-migration", "classifications": ["data-migration"],
                               "reversible": False},
                     "changes": [], "approvers": [APPROVER]}}


def platform_stack(name: str = "default", namespace: str = "apprafter-system", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "PlatformStack", "metadata": {"name": name, "namespace": namespace},
            "spec": {"channel": "stable", **spec}}


def review(obj: dict[str, Any] | None, old: dict[str, Any] | None = None, *, operation: str = "CREATE",
           subresource: str = "", user: str = EDITOR) -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview for a write of `obj` (over `old`) by `user`."""
    source = obj or old or {}
    meta = source.get("metadata", {})
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()), "kind": {"group": "apprafter.io", "version": "v1alpha1", "kind": source["kind"]},
        "resource": {"group": "apprafter.io", "version": "v1alpha1", "resource": source["kind"].lower() + "s"},
        "name": meta.get("name", ""), "namespace": meta.get("namespace", ""), "operation": operation,
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": obj, "oldObject": old, "dryRun": False,
    }
    if subresource:
        request["subResource"] = subresource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def with_status(obj: dict[str, Any], **status: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["status"] = {**out.get("status", {}), **status}
    return out
