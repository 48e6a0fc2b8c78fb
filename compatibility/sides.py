"""One side of a plan from a loaded Application: validated like render, then its effective spec (fail closed)."""

from __future__ import annotations

from compatibility.application import Deployment, deployment
from compatibility.shape import Unreadable
from renderer import validate
from renderer.errors import Problem, UserError
from renderer.load import LoadedApp
from renderer.redact import Redactor

__all__ = ["side"]


def side(app: LoadedApp, environment: str, required: bool) -> Deployment | None:
    """The Deployment of `environment`; None when it is not declared and not required (a first deployment).

    Every problem `apprafter render` would report is a UserError here too: a plan never reads what the
    renderer would refuse.
    """
    display = app.source.display
    stamped = app.document.get("spec", {}).get("environment")
    if not required and stamped is None and environment not in validate.environments(app):
        problems = validate.check_document(app)
        if problems:
            raise UserError(problems)
        return None
    problems = validate.check_deployment(app, environment)
    if problems:
        raise UserError(problems)
    try:
        return deployment(app.document, environment)
    except Unreadable as e:
        parts = tuple(e.field.split(".")) if e.field else ()
        index = app.source.index
        line, col = index.find(validate.written_at(index, environment, parts))
        problem = Problem(display, line, col, e.field, f"{e.message} (fail closed: not classified)")
        raise UserError([Redactor.for_document(app.document).problem(problem)]) from None
