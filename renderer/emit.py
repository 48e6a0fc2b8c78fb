"""Deterministic YAML output (the one YAML writer): fixed key order, no aliases, plain number formatting."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

__all__ = ["dump_json_stream", "dump_stream", "dump_yaml"]


@functools.cache
def _dumper() -> type:
    """PyYAML's C dumper (when present) that never anchors/aliases: Kubernetes tools expect every object spelled
    out. Imported on first use: the plugin writes JSON and never pays for PyYAML."""
    import yaml

    base: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class Dumper(base):  # type: ignore[valid-type,misc]  # base is chosen at run time
        def ignore_aliases(self, data: object) -> bool:
            return True

    return Dumper


def dump_yaml(data: Any, *, sort_keys: bool = False) -> str:
    """Block-style YAML, no aliases, lines never wrapped: the same data always gives the same text."""
    import yaml

    text: str = yaml.dump(data, Dumper=_dumper(), sort_keys=sort_keys, default_flow_style=False,
                          allow_unicode=True, width=1 << 16)
    return text


def dump_stream(objects: Iterable[dict[str, Any]]) -> str:
    """A YAML stream, one document per object, each starting with '---'."""
    return "".join("---\n" + dump_yaml(obj) for obj in objects)


def dump_json_stream(objects: Iterable[dict[str, Any]]) -> str:
    """The same stream with each document as one line of JSON (JSON is YAML): what the plugin prints, since
    Argo CD reads either and JSON needs no YAML library on the plugin's start-up path."""
    return "".join("---\n" + json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n" for obj in objects)
