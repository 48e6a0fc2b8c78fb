"""The YAML writer: whatever JSON-shaped data it writes, a YAML 1.1 reader (PyYAML) and a YAML 1.2 reader
(ruamel.yaml, through the input reader) read back exactly; the same data gives the same bytes."""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from renderer.emit import dump_json_stream, dump_stream, dump_yaml
from renderer.yaml_input import parse

words = st.sampled_from(["yes", "No", "on", "OFF", "y", "n", "true", "False", "null", "NULL", "~", "", " ", "-",
                         "- a", "a: b", "a:", ":a", "#c", "a #c", "@x", "`x", "!x", "&x", "*x", "%x", "|", ">",
                         "0755", "0x1F", "1_000", "1:20", "1e3", ".inf", ".NaN", "2024-01-01", "<<", "=", "? x",
                         "ghcr.io/acme/demo:1.0.0", "k8s:io.kubernetes.pod.namespace", "line\nbreak", "\u2028",
                         "\x85", "\ufeff", "tab\there", "quote\"s", "back\\slash", "ünïcödé", "😀", "[x]", "{x}"])
keys = words | st.text(max_size=6)
values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**15), 10**15)
    | st.floats(allow_nan=False, allow_infinity=False) | words | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4), max_leaves=30)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(keys, values, max_size=5))
def test_yaml_1_1_and_1_2_readers_read_back_exactly_what_was_written(data: dict[str, Any]) -> None:
    text = dump_yaml(data)
    assert yaml.safe_load(text) == (data or {})  # PyYAML: YAML 1.1, as kubectl's and Argo CD's Go readers
    assert parse(text, "out.yaml").data == (data or {})  # ruamel.yaml: YAML 1.2
    assert dump_yaml(data) == text


def test_the_stream_and_its_json_twin_hold_the_same_objects() -> None:
    objects = [{"kind": "A", "spec": {"on": "yes", "n": [1, 2.5, None, {"x": []}], "e": {}}}, {"kind": "B"}]
    assert list(yaml.safe_load_all(dump_stream(objects))) == objects
    assert list(yaml.safe_load_all(dump_json_stream(objects))) == objects
    assert [json.loads(doc) for doc in dump_json_stream(objects).split("---\n")[1:]] == objects


def test_the_layout_is_block_style_with_unindented_lists_and_quoted_ambiguities() -> None:
    text = dump_yaml({"metadata": {"name": "demo", "labels": {"app.kubernetes.io/name": "demo"}},
                      "ports": [{"port": 80, "protocol": "TCP"}, {"port": "53"}], "on": True, "none": None,
                      "float": 1e-05, "empty": [], "nested": [[1, 2], "x"]})
    assert text == """metadata:
  name: demo
  labels:
    app.kubernetes.io/name: demo
ports:
- port: 80
  protocol: TCP
- port: "53"
"on": true
none: null
float: 1.0e-05
empty: []
nested:
- - 1
  - 2
- x
"""


def test_the_floats_json_cannot_hold_are_yaml_s_own_words() -> None:
    text = dump_yaml({"nan": float("nan"), "up": float("inf"), "down": float("-inf"), "big": 1e300})
    read = yaml.safe_load(text)
    assert read["nan"] != read["nan"] and read["up"] == float("inf") and read["down"] == float("-inf")
    assert read["big"] == 1e300 and ".nan" in text and "-.inf" in text
