"""Deterministic YAML stream output: fixed object order, fixed key order, plain number formatting."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

_Base: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[valid-type,misc]
    """Never anchors/aliases: Kubernetes tools expect every object spelled out."""

    def ignore_aliases(self, data: object) -> bool:
        return True


KIND_ORDER = ("Application", "ServiceAccount", "ResourceClaim", "Deployment", "Service", "HTTPRoute",
              "NetworkPolicy", "CiliumNetworkPolicy", "ScaledObject")


def sort_objects(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(obj: dict[str, Any]) -> tuple[int, str, str]:
        kind = obj.get("kind", "")
        rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
        return rank, kind, obj.get("metadata", {}).get("name", "")
    return sorted(objects, key=key)


def dump_stream(objects: Iterable[dict[str, Any]]) -> str:
    """A YAML stream, one document per object, each starting with '---'."""
    parts = [yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                       width=1 << 16) for obj in objects]
    return "".join("---\n" + p for p in parts)
