"""Checks an Application object as the cluster holds it, with the rules and wording of `apprafter validate`.

The cluster's object is JSON, not CUE: its schema check is the CUE-generated one `plan` uses for CR inputs
(compatibility.inputs), then every rule of renderer.validate, then the environment the object deploys.
The webhook and the reconciler ask this one function, so the cluster refuses what `validate` refuses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from compatibility.inputs import load_document
from renderer import validate
from renderer.context import PlatformContext
from renderer.errors import Problem, UserError
from renderer.render import manifests


@dataclasses.dataclass(frozen=True)
class ObjectCheck:
    """What is wrong with an Application object (problems), else what the renderer warns about it."""

    problems: list[Problem]
    warnings: list[str]


def check_application(document: Mapping[str, Any], context: PlatformContext, display: str = "") -> ObjectCheck:
    """Every problem `apprafter validate` reports for this object, plus its own environment's; warnings when valid.

    `status` is ignored (the operator's); `spec.environment` must name a declared environment.
    """
    try:
        app = load_document(document, display)
    except UserError as e:
        return ObjectCheck(e.problems, [])
    problems = validate.check(app)
    environment = app.document.get("spec", {}).get("environment")
    declared = validate.environments(app)
    if environment is None:
        problems.append(Problem(display, 0, 0, "spec.environment", "is required: the object deploys one environment "
                                "(the plugin stamps it)"))
    elif environment not in declared:
        problems.append(Problem(display, 0, 0, "spec.environment", f"{environment!r} is not a declared environment; "
                                f"declared: {', '.join(declared) or 'none'}"))
    if problems:
        return ObjectCheck(sorted(set(problems)), [])
    namespace = app.document["metadata"].get("namespace")
    _, warnings = manifests(app, environment, namespace, context)
    return ObjectCheck([], [f"{environment}: {w}" for w in warnings])
