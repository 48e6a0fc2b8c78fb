"""Fuzzing: malformed documents never crash the classifier or the CLI input loaders, and never read as safe."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compatibility.application import classify, deployment
from compatibility.inputs import parse_cr
from compatibility.shape import Unreadable
from compatibility.sides import side
from renderer.emit import dump_stream
from renderer.errors import UserError
from renderer.load import load
from renderer.render import render
from tests.compatibility.cases import app
from tests.renderer.helpers import EXAMPLES, run_cli

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12)
PARSER_CR: dict[str, Any] = yaml.safe_load(dump_stream(render(EXAMPLES / "parser", "prod").objects))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, original: dict[str, Any]) -> dict[str, Any]:
    """The document with one to three subtrees replaced by arbitrary JSON, deleted, or given an extra key."""
    doc = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(st.text(min_size=1, max_size=6))] = draw(json_values)
    return doc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values | mutated(app()), st.sampled_from(["prod", "dev", "nope"]))
def test_classifier_never_crashes(doc: Any, env: str) -> None:
    try:
        before = deployment(app(), "prod")
        after = deployment(doc, env)
    except (Unreadable, KeyError):
        return  # an error: no verdict at all
    assert isinstance(classify(before, after), list)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(PARSER_CR))
def test_cr_loader_fails_closed(doc: dict[str, Any]) -> None:
    """Whatever is accepted is a valid Application the classifier reads; everything else is a UserError."""
    text = yaml.safe_dump(doc, sort_keys=False)
    before = side(parse_cr(dump_stream([PARSER_CR]), "before.yaml"), "prod", required=True)
    assert before is not None
    try:
        after = side(parse_cr(text, "after.yaml"), "prod", required=True)
    except UserError as e:
        assert e.problems and all(p.file == "after.yaml" for p in e.problems)
        return
    assert after is not None
    assert isinstance(classify(before, after), list)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_cr_loader_on_arbitrary_text(text: str) -> None:
    try:
        parse_cr(text, "x.yaml")
    except UserError as e:
        assert e.problems


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(PARSER_CR))
def test_cr_loader_is_never_more_permissive_than_cue(tmp_path_factory: Any, doc: dict[str, Any]) -> None:
    """Differential: a CR the YAML loader accepts is also accepted by the real cue with the real schema."""
    try:
        accepted = side(parse_cr(yaml.safe_dump(doc), "after.yaml"), "prod", required=True) is not None
    except UserError:
        accepted = False
    if not accepted:
        return
    root = tmp_path_factory.mktemp("cue")
    (root / "apprafter").mkdir()
    cue_doc = {k: v for k, v in doc.items() if k in ("apiVersion", "kind", "metadata", "spec")}
    cue_doc["metadata"] = {k: v for k, v in cue_doc["metadata"].items() if k in ("name", "namespace")}
    cue_doc["spec"] = {k: v for k, v in cue_doc["spec"].items() if k != "environment"}
    (root / "apprafter" / "Application.cue").write_text(json.dumps(cue_doc, indent=1)[1:-1])
    assert side(load(root), "prod", required=True) is not None


MALFORMED = [
    ("empty.yaml", ""),
    ("list.yaml", "- 1\n- 2\n"),
    ("alias.yaml", "a: &x {b: 1}\nc: *x\n"),
    ("bad.json", '{"apiVersion": '),
    ("two.yaml", "a: 1\n---\nb: 2\n"),
    ("wrongkind.yaml", "apiVersion: apprafter.io/v1alpha1\nkind: Secret\nmetadata: {name: x}\nspec: {}\n"),
    ("Application.cue", "spec: {"),
    ("Application.cue", "apiVersion: 1\n"),
    ("notes.txt", "hello"),
]


def test_cli_refuses_malformed_inputs_with_exit_1(tmp_path: Path) -> None:
    good = EXAMPLES / "parser"
    for name, text in MALFORMED:
        bad = tmp_path / name
        bad.write_text(text)
        for args in (("--from", str(good), "--to", str(bad)), ("--from", str(bad), "--to", str(good))):
            result = run_cli("plan", *args, "--env", "prod", "--detailed-exitcode", "--format", "json")
            assert result.returncode == 1, (name, result.stderr)
            assert result.stdout == ""
            assert result.stderr.strip() and "Traceback" not in result.stderr


HOSTILE = [
    ("deep.yaml", "a:\n" + "".join("  " * i + "- \n" for i in range(1, 300)), "nested deeper than 64 levels"),
    ("deep-flow.yaml", "[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    ("deep.json", '{"a": ' * 50_000 + "1" + "}" * 50_000, "nested deeper than 64 levels"),
    ("bomb.yaml", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                  "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n", "YAML alias *a is not allowed"),
    ("wide.yaml", "a: [" + ", ".join(["1"] * 150_000) + "]\n", "more than 100000 YAML nodes"),
    ("nul.yaml", "apiVersion: apprafter.io/v1alpha1\nkind: Application\nmetadata: {name: \x00}\n",
     "nul.yaml:3:"),
    ("keys.yaml", "apiVersion: apprafter.io/v1alpha1\n1: x\n", "keys.yaml:2:1: mapping key 1 is not a string"),
    ("dup.yaml", "apiVersion: a\napiVersion: b\n", "dup.yaml:2:1: apiVersion: duplicate key"),
    ("bad.yaml", "metadata:\n  name: x\n bad: y\n", "bad.yaml:3:"),
]


@pytest.mark.parametrize(("name", "text", "says"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_plan_inputs_are_one_bounded_line(tmp_path: Path, name: str, text: str, says: str) -> None:
    bad = tmp_path / name
    bad.write_text(text)
    result = run_cli("plan", "--from", str(bad), "--to", str(EXAMPLES / "parser"), "--env", "prod", cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
