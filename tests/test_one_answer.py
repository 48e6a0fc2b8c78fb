"""One answer everywhere: the same Application objects, valid and hostile, go through the CLI (`apprafter plan` on
the object as a CR file), the webhook's review function and the operator's decision function, and each gives the
same verdict with the same problems (field and message; only the CLI has positions to add)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from admission.review import Settings, validating
from lifecycle.application import Refusal, assess
from renderer.context import PlatformContext
from tests.admission.reviews import body, parser_cr, review
from tests.renderer.helpers import run_cli

Mutation = Callable[[dict[str, Any]], None]
SECRET_LITERAL = "hunter2-very-secret-value"


def _set(path: tuple[str, ...], value: Any) -> Mutation:
    def mutate(cr: dict[str, Any]) -> None:
        node = cr
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return mutate


def _delete(path: tuple[str, ...]) -> Mutation:
    def mutate(cr: dict[str, Any]) -> None:
        node = cr
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return mutate


CASES: dict[str, Mutation] = {
    "valid as rendered": lambda cr: None,
    "an unknown field": _set(("spec", "base", "colour"), "blue"),
    "a port out of range": _set(("spec", "base", "expose", "port"), 70000),
    "a number where a string goes": _set(("spec", "base", "env", "PORT"), 8080),
    "an env key that is no identifier": _set(("spec", "base", "env", "log-level"), "debug"),
    "a literal beside a broken field (never shown)": lambda cr: (
        _set(("spec", "base", "env", "TOKEN"), SECRET_LITERAL)(cr), _set(("spec", "base", "replicas"), "three")(cr)),
    "an empty image in this environment": _set(("spec", "environments", "prod", "image"), ""),
    "an image reference the kubelet refuses": _set(("spec", "environments", "prod", "image"), "ghcr.io/acme/Blog:2"),
    "a path Gateway API cannot route": _set(("spec", "base", "expose", "paths"), ["no-slash"]),
    "a claim reference to an undeclared need": _set(("spec", "base", "env", "DSN"), {"claim": "nosuch.url"}),
    "a secret reference without a key": _set(("spec", "base", "env", "KEY"), {"secret": "only-a-name"}),
    "an environment name that is no DNS label": _set(("spec", "environments", "Prod2"), {}),
    "an app name that is no DNS label": _set(("metadata", "name"), "Parser_App"),
    "a budget for an undeclared environment": _set(("spec", "budget", "qa"), "small"),
    "stamped for an undeclared environment": _set(("spec", "environment"), "qa"),
    "another environment broken (not this object's)": _set(("spec", "environments", "dev", "image"), ""),
    # Hostile (issue 24): what the API server could not carry, and numbers past the schema's bounds.
    "an env literal with U+FFFE": _set(("spec", "base", "env", "LOG_LEVEL"), "in\ufffefo"),
    "a command argument with a C1 control": _set(("spec", "base", "command"), ["/app", "--x\x9b"]),
    "a selector key with DEL": _set(("spec", "environments", "prod", "needs", "pg", "selector"), {"tier\x7f": "x"}),
    "a label value with U+FFFF (the schema's pattern first)": _set(("metadata", "labels", "team"), "a\uffff"),
    "replicas of 2147483647": _set(("spec", "base", "replicas"), 2147483647),
    "autoscale.max past the bound": _set(("spec", "base", "autoscale", "max"), 5000),
    "a quantity that overflows": _set(("spec", "base", "resources"), {"limits": {"memory": "99999999999999Gi"}}),
    # Issue 34: instructions to Argo CD on the object (a sync wave and the keep-options are the user's).
    "an Argo CD sync wave and keep-option": _set(("metadata", "annotations"), {
        "argocd.argoproj.io/sync-wave": "3", "argocd.argoproj.io/sync-options": "Delete=false"}),
    "an Argo CD hook annotation": _set(("metadata", "annotations"), {"argocd.argoproj.io/hook": "Skip"}),
    "an Argo CD sync option that replaces": _set(("metadata", "annotations"),
                                                 {"argocd.argoproj.io/sync-options": "Replace=true"}),
}


def _problem(line: str) -> str:
    """`field: message` of a CLI problem line (`file:line:col: field: message`, or `file: field: message`)."""
    return re.sub(r"^[^:]*(:\d+:\d+)?: ", "", line, count=1)


def cli(cr: dict[str, Any], tmp_path: Path) -> tuple[bool, list[str]]:
    path = tmp_path / "application.json"
    path.write_text(json.dumps(cr))
    environment = cr["spec"].get("environment", "prod")
    result = run_cli("plan", "--from", str(path), "--to", str(path), "--env", environment)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode == 0, sorted(_problem(line) for line in result.stderr.splitlines()
                                          if result.returncode == 1)


def webhook(cr: dict[str, Any]) -> tuple[bool, list[str]]:
    outcome = validating(body(review(cr)), Settings())
    return outcome.allowed, sorted(outcome.message.splitlines()[1:])


def operator(cr: dict[str, Any]) -> tuple[bool, list[str]]:
    obj = copy.deepcopy(cr)
    obj["metadata"] |= {"uid": "0b5e2c1a-0000-4000-8000-000000000001", "generation": 1}
    decided = assess(obj, [], PlatformContext(), status_manager="apprafter-operator-status")
    if isinstance(decided, Refusal):
        return False, sorted(f"{p.field}: {p.message}" if p.field else p.message for p in decided.problems)
    return True, []


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_cli_the_webhook_and_the_operator_give_one_answer(case: str, tmp_path: Path) -> None:
    cr = parser_cr()
    CASES[case](cr)
    answers = {"cli": cli(cr, tmp_path), "webhook": webhook(cr), "operator": operator(cr)}
    assert answers["cli"] == answers["webhook"] == answers["operator"], json.dumps(answers, indent=1)
    allowed, problems = answers["webhook"]
    assert allowed == (case in ("valid as rendered", "another environment broken (not this object's)",
                                "an Argo CD sync wave and keep-option")), problems
    assert allowed or problems, "a refusal names its problems"
    assert not any(SECRET_LITERAL in p for p in problems)


def test_an_object_without_its_environment_is_refused_alike_by_the_webhook_and_the_operator() -> None:
    cr = parser_cr()
    del cr["spec"]["environment"]
    assert webhook(cr) == operator(cr) == (False, ["spec.environment: is required: the object deploys one "
                                                   "environment (the plugin stamps it)"])
