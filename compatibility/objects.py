"""Checks an Application object as the cluster holds it, with the rules and wording of `apprafter render`.

The cluster's object is JSON, not CUE: its schema check is the CUE-generated one `plan` uses for CR inputs
(compatibility.inputs), then renderer.validate.check_deployment for the environment the object is stamped for
(the one answer render, the plugin, plan and the operator give too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from compatibility.inputs import load_document
from renderer import env_literals, validate
from renderer.context import PlatformContext
from renderer.errors import Problem, UserError
from renderer.render import manifests


@dataclasses.dataclass(frozen=True)
class ObjectCheck:
    """What is wrong with an Application object (problems), else what the renderer warns about it and the objects
    it renders for its environment (the webhook reads their public hostnames)."""

    problems: list[Problem]
    warnings: list[str]
    objects: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def check_application(document: Mapping[str, Any], context: PlatformContext, display: str = "") -> ObjectCheck:
    """Every problem of this object for the environment it is stamped for (spec.environment, which it must carry);
    the renderer's warnings when valid (an env literal that looks like an interpolation, as `render` prints it, then
    the environment's). `status` is ignored (the operator's)."""
    try:
        app = load_document(document, display)
    except UserError as e:
        return ObjectCheck(e.problems, [])
    problems = validate.check_deployment(app, None)
    if problems:
        return ObjectCheck(sorted(set(problems)), [])
    environment = app.document["spec"]["environment"]
    namespace = app.document["metadata"].get("namespace")
    objects, warnings = manifests(app, environment, namespace, context)
    looks_interpolated = [str(w) for w in env_literals.interpolation_warnings(app)]
    return ObjectCheck([], [*looks_interpolated, *(f"{environment}: {w}" for w in warnings)], objects)
