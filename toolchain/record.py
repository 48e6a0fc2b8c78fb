"""`Record`: `typing.NamedTuple`'s classes (tuples with named fields) built without importing `typing`.

The render and the plugin import a dozen NamedTuples; `typing` itself and namedtuple's generated `__new__` (an
`exec` per class) cost ≈ 14 M + 1 M instructions each, a third of what a render adds to bare cue. Here the class
statement is the same (`class Problem(Record):` with annotated fields, defaults, methods) and mypy sees a
NamedTuple, while at run time a metaclass makes a plain tuple subclass: fields read by index, `_fields`,
`_field_defaults`, `_make`, `_replace`, `_asdict`, NamedTuple's repr, equality, order, hashing and pickling.
"""

from __future__ import annotations

from operator import itemgetter

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads the name the same way)

__all__ = ["TYPE_CHECKING", "Record"]

if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    class _RecordType(type):
        """Turns a `Record` subclass's annotated fields into tuple positions, as NamedTupleMeta does."""

        def __new__(mcls, name, bases, namespace):
            if globals().get("Record") not in bases:  # Record itself, or a subclass of a record: a plain class
                return super().__new__(mcls, name, bases, namespace)
            fields = tuple(namespace.get("__annotations__", {}))
            defaults = {f: namespace.pop(f) for f in fields if f in namespace}
            if any(f in defaults for f in fields[:len(fields) - len(defaults)]):
                raise TypeError(f"{name}: a field without a default follows one with a default")
            for index, field in enumerate(fields):
                namespace[field] = property(itemgetter(index), doc=f"Alias for field number {index}")
            namespace.update(__slots__=(), _fields=fields, _field_defaults=defaults, __match_args__=fields)
            return super().__new__(mcls, name, bases, namespace)

    class Record(tuple, metaclass=_RecordType):
        """The base of every record; a subclass's instances are tuples of its fields in order."""

        __slots__ = ()
        _fields = ()
        _field_defaults = {}  # noqa: RUF012  # NamedTuple's attribute, never written

        def __new__(cls, *args, **kwargs):
            fields = cls._fields
            if len(args) == len(fields) and not kwargs:
                return tuple.__new__(cls, args)
            if len(args) > len(fields):
                raise TypeError(f"{cls.__name__}() takes {len(fields)} arguments, {len(args)} given")
            values = list(args)
            for field in fields[len(args):]:
                if field in kwargs:
                    values.append(kwargs.pop(field))
                elif field in cls._field_defaults:
                    values.append(cls._field_defaults[field])
                else:
                    raise TypeError(f"{cls.__name__}() missing argument {field!r}")
            if kwargs:
                raise TypeError(f"{cls.__name__}() got unexpected or repeated arguments {sorted(kwargs)}")
            return tuple.__new__(cls, values)

        @classmethod
        def _make(cls, iterable):
            return cls(*iterable)

        def _replace(self, **changes):
            values = [changes.pop(field, value) for field, value in zip(self._fields, self, strict=True)]
            if changes:
                raise TypeError(f"{type(self).__name__} has no fields {sorted(changes)}")
            return tuple.__new__(type(self), values)

        def _asdict(self):
            return dict(zip(self._fields, self, strict=True))

        def __repr__(self):
            fields = ", ".join(f"{f}={v!r}" for f, v in zip(self._fields, self, strict=True))
            return f"{type(self).__name__}({fields})"

        def __getnewargs__(self):
            return tuple(self)
