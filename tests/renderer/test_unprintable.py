"""The renderer's unprintable set is exactly what a YAML reader refuses: PyYAML's Reader.NON_PRINTABLE (YAML 1.1's
printable set, the API server's reader's too) is the oracle, over every Unicode code point."""

from __future__ import annotations

import yaml.reader

from renderer.validate import UNPRINTABLE, unprintable


def test_the_set_is_the_yaml_readers_over_every_code_point() -> None:
    oracle = yaml.reader.Reader.NON_PRINTABLE
    text = "".join(map(chr, range(0x110000)))  # one string: two scans, not 1.1 million matches
    assert [m.start() for m in UNPRINTABLE.finditer(text)] == [m.start() for m in oracle.finditer(text)]


def test_a_key_and_a_value_are_found_at_their_first_unprintable_character() -> None:
    document = {"spec": {"base": {"env": {"OK": "tab\tand NEL\x85", "A\x00B": "x", "V": "ab\ufffecd\x01"}}}}
    assert sorted(unprintable(document), key=str) == sorted(
        [(("spec", "base", "env", "A\x00B"), -2, "\x00"), (("spec", "base", "env", "V"), 2, "\ufffe")], key=str)
