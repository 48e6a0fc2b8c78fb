"""The safe YAML/JSON input reader: YAML 1.2 values, refusals with positions, limits, and exact node positions."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from renderer.errors import UserError
from renderer.yaml_input import Limits, parse

keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=25)


def one_line(text: str | bytes, name: str = "in.yaml", **kw: Any) -> str:
    """The single problem line parse reports for text."""
    with pytest.raises(UserError) as err:
        parse(text, name, **kw)
    lines = str(err.value).splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_yaml_1_2_scalars() -> None:
    data = parse("on: yes\noff: no\nn: ~\nt: true\ni: 012\no: 0o17\nx: 0x1F\nf: 1.5e3\nd: 2024-01-01\n"
                 "s: '12'\nb: |\n  text\n", "in.yaml").data
    assert data == {"on": "yes", "off": "no", "n": None, "t": True, "i": 12, "o": 15, "x": 31, "f": 1500.0,
                    "d": "2024-01-01", "s": "12", "b": "text\n"}


@pytest.mark.parametrize(("text", "expected"), [
    ("a: 1\nb: 2\na: 3\n", "in.yaml:3:1: a: duplicate key"),
    ("spec:\n  base: {x: 1, x: 2}\n", "in.yaml:2:16: spec.base.x: duplicate key"),
    ("a: &x {b: 1}\nc: *x\n", "in.yaml:2:4: c: YAML alias *x is not allowed"),
    ("a:\n  - &x 1\n  - *x\n", "in.yaml:3:5: a.1: YAML alias *x is not allowed"),
    ("1: a\n", "in.yaml:1:1: mapping key 1 is not a string"),
    ("0E0: a\n", "in.yaml:1:1: mapping key 0E0 is not a string (quote it: \"0E0\")"),
    ("a:\n  true: 1\n", "in.yaml:2:3: a: mapping key true is not a string"),
    ("? [a]\n: b\n", "in.yaml:1:3: mapping key is not a string"),
    ("a: !!binary aGk=\n", "in.yaml:1:4: a: YAML tag tag:yaml.org,2002:binary is not allowed"),
    ("a: !custom {b: 1}\n", "in.yaml:1:4: a: YAML tag !custom is not allowed"),
    ("a: .inf\n", "in.yaml:1:4: a: '.inf' is not a finite number"),
    ("a: 1\n---\nb: 2\n", "in.yaml:2:1: expected one document, found more"),
    ("a: 1\nb: \x00\n", "in.yaml:2:4: not valid YAML:"),
    ("a: b\n  c: d\n", "in.yaml:2:4: not valid YAML: mapping values are not allowed"),
    ("a:\n\tb: 1\n", "in.yaml:2:1: not valid YAML:"),
])
def test_refusals_name_the_line_column_and_field(text: str, expected: str) -> None:
    assert one_line(text).startswith(expected)


def test_json_only_refuses_yaml_syntax_and_reports_json_positions() -> None:
    assert one_line("a: 1\n", "in.json", json_only=True) == "in.json:1:1: not valid JSON: Expecting value"
    assert one_line('{\n "a": 1,\n}', "in.json", json_only=True).startswith("in.json:3:1: not valid JSON:")
    assert one_line('{"a": 1, "a": 2}', "in.json", json_only=True).startswith("in.json:1:10: a: duplicate key")
    assert parse('{"a": [1, 2.5, true, null, "on"]}', "in.json", json_only=True).data == {
        "a": [1, 2.5, True, None, "on"]}


def test_limits_stop_the_read_where_they_are_crossed() -> None:
    assert one_line("[" * 200 + "]" * 200) == "in.yaml:1:65: nested deeper than 64 levels: refused"
    assert one_line("[" * 20000 + "]" * 20000, "in.json", json_only=True).startswith("in.json:1:65: nested deeper")
    assert one_line("[" + "1, " * 30 + "1]", limits=Limits(max_nodes=20)) == \
        "in.yaml:1:59: more than 20 YAML nodes: refused"
    assert one_line("a: " + "x" * 100, limits=Limits(max_bytes=50)) == "in.yaml:1:1: file larger than 50 bytes: refused"
    assert one_line(b"a: ok\nb: \xff\n") == "in.yaml:2:4: file is not UTF-8 text"


def test_empty_input_is_no_document() -> None:
    assert parse("", "in.yaml").data is None
    assert parse("---\n", "in.yaml").data is None
    assert parse("a: 1\n---\n", "in.yaml").data == {"a": 1}


def _offset(text: str, line: int, col: int) -> int:
    lines = text.split("\n")
    return sum(len(s) + 1 for s in lines[: line - 1]) + col - 1


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, (*path, k))]
    if isinstance(value, list) and value:
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*path, i))]
    return [(path, value)]


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_json_round_trips_and_every_leaf_is_found_where_json_dumps_wrote_it(value: Any) -> None:
    text = json.dumps({"root": value}, indent=1)
    doc = parse(text, "in.json", json_only=True)
    assert doc.data == {"root": value}  # oracle: the standard library's own JSON reader and writer
    for path, leaf in _leaves({"root": value}):
        line, col = doc.position(path)
        # a scalar (or a list item) where it is written; an empty mapping or list where its key is
        at = json.dumps(path[-1]) if isinstance(leaf, dict | list) and isinstance(path[-1], str) else json.dumps(leaf)
        assert text[_offset(text, line, col):].startswith(at), (path, leaf, line, col)
        if isinstance(path[-1], str):
            kline, kcol = doc.position(path, at_key=True)
            assert text[_offset(text, kline, kcol):].startswith(json.dumps(path[-1]))


printable_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4), max_leaves=25)


@settings(max_examples=150, deadline=None)
@given(printable_values)  # the emitter writes NEL and other breaks raw, which YAML readers normalise
def test_what_a_yaml_1_2_writer_writes_reads_back_the_same(value: Any) -> None:
    out, writer = io.StringIO(), YAML(typ="safe", pure=True)
    writer.default_flow_style = False  # its flow style writes {:0: null}, which no YAML reader takes back
    writer.dump({"root": value}, out)  # ruamel's emitter quotes what 1.2 would type ('on' stays plain)
    assert parse(out.getvalue(), "in.yaml").data == {"root": value}


def test_position_of_an_unwritten_path_is_its_deepest_written_ancestor() -> None:
    doc = parse("spec:\n  base:\n    image: x\n", "in.yaml")
    assert doc.position(("spec", "base", "replicas")) == (2, 3)
    assert doc.has(("spec", "base")) and not doc.has(("spec", "base", "replicas"))
    assert doc.position(("metadata",)) == (1, 1)
    assert str(doc.problem(("spec", "base", "image"), "bad")) == "in.yaml:3:12: spec.base.image: bad"
