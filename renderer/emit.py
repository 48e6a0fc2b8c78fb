"""Deterministic YAML output (the one YAML writer): fixed key order, no aliases, plain number formatting."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

_Base: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[valid-type,misc]
    """Never anchors/aliases: Kubernetes tools expect every object spelled out."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def dump_yaml(data: Any, *, sort_keys: bool = False) -> str:
    """Block-style YAML, no aliases, lines never wrapped: the same data always gives the same text."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=sort_keys, default_flow_style=False, allow_unicode=True,
                     width=1 << 16)


def dump_stream(objects: Iterable[dict[str, Any]]) -> str:
    """A YAML stream, one document per object, each starting with '---'."""
    return "".join("---\n" + dump_yaml(obj) for obj in objects)
