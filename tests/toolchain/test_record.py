"""toolchain.record: a Record class behaves as the typing.NamedTuple written the same way (its callers compare,
sort, hash, unpack, pickle, `_replace` and print them), without importing typing."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from typing import NamedTuple

import pytest

from toolchain.errors import Problem
from toolchain.record import Record


class Place(Record):
    """A record with a default and a method, as the renderer writes them."""

    file: str
    line: int = 0

    def where(self) -> str:
        return f"{self.file}:{self.line}"


class Twin(NamedTuple):
    file: str
    line: int = 0


def test_a_record_is_the_namedtuple_it_spells() -> None:
    ours, theirs = Place("a.cue", 3), Twin("a.cue", 3)
    assert ours == theirs == ("a.cue", 3) and hash(ours) == hash(theirs)
    assert (ours.file, ours.line, ours[1], len(ours), tuple(ours)) == ("a.cue", 3, 3, 2, ("a.cue", 3))
    assert Place("b") == Twin("b") and Place(line=2, file="c") == Twin(line=2, file="c")
    assert repr(ours) == repr(theirs).replace("Twin", "Place") and ours.where() == "a.cue:3"
    assert ours._replace(line=5) == theirs._replace(line=5) and type(ours._replace(line=5)) is Place
    assert ours._asdict() == theirs._asdict() and Place._fields == Twin._fields
    assert Place._field_defaults == Twin._field_defaults and Place._make(["d", 1]) == Twin._make(["d", 1])
    assert Place.__match_args__ == Twin.__match_args__
    assert sorted([Place("b"), Place("a", 2), Place("a", 1)]) == sorted([Twin("b"), Twin("a", 2), Twin("a", 1)])
    for again in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours), copy.copy(ours)):
        assert again == ours and type(again) is Place


@pytest.mark.parametrize("make", [lambda: Place(), lambda: Place("a", 1, 2), lambda: Place("a", col=1),
                                  lambda: Place("a", file="b"), lambda: Place("a")._replace(col=1)])
def test_wrong_arguments_are_refused_as_namedtuple_refuses_them(make: object) -> None:
    with pytest.raises(TypeError):
        make()  # type: ignore[operator]


def test_a_record_is_immutable_and_has_no_dict() -> None:
    problem = Problem("a.cue", 1, 2, "spec.image", "must be set")
    with pytest.raises(AttributeError):
        problem.line = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        problem.extra = 1  # type: ignore[attr-defined]
    assert str(problem) == "a.cue:1:2: spec.image: must be set"


def test_importing_records_leaves_typing_out() -> None:
    probe = "import sys, toolchain.errors, renderer.settings, renderer.source; print('typing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
