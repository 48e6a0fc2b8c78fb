"""toolchain.regex.lazy: the pattern answers as re.compile's would, and nothing is compiled until it is used (the
render's start-up pays only for the patterns its input reaches)."""

from __future__ import annotations

import re

from toolchain.regex import lazy


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    text = "a: 12, b: 345\nc: x"
    for source, flags in ((r"(?P<key>[a-z]): (\d+)", 0), (r"^c: (.)$", re.MULTILINE)):
        pattern, compiled = lazy(source, flags), re.compile(source, flags)
        assert pattern._compiled is None  # nothing compiled at definition
        assert [m.span() for m in pattern.finditer(text)] == [m.span() for m in compiled.finditer(text)]
        assert pattern._compiled is not None
        assert pattern.findall(text) == compiled.findall(text)
        assert pattern.sub("_", text) == compiled.sub("_", text)
        assert pattern.sub(lambda m: m.group().upper(), text, 1) == compiled.sub(lambda m: m.group().upper(), text, 1)
        for method in ("search", "match", "fullmatch"):
            ours, theirs = getattr(pattern, method)(text), getattr(compiled, method)(text)
            assert (ours and ours.span()) == (theirs and theirs.span())
