"""Whether a live object already is what a server-side apply would make it (a no-op reconcile writes nothing), and
where it is not."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from controller_runtime.quantity import quantity as _quantity

__all__ = ["PathStep", "covers", "owned_fields_wanted", "status_up_to_date", "uncovered", "up_to_date"]


# Where the API server rewrites a value in canonical form ("0.5" is stored as "500m"): the values of these maps
# (container resources, quotas) and these fields. Anywhere else "1e3" and "1000" are different strings.
_QUANTITY_MAPS = frozenset({"requests", "limits", "hard", "capacity", "allocatable", "overhead"})
_QUANTITY_FIELDS = frozenset({"sizeLimit"})


def covers(live: Any, desired: Any, *, quantity: bool = False, quantity_map: bool = False) -> bool:
    """Every field of `desired` is in `live` with the same value (live may hold defaults and others' fields)."""
    if isinstance(desired, Mapping):
        if not desired:
            return live is None or isinstance(live, Mapping)
        return isinstance(live, Mapping) and all(
            covers(live.get(k), v, quantity=quantity_map or k in _QUANTITY_FIELDS, quantity_map=k in _QUANTITY_MAPS)
            for k, v in desired.items())
    if isinstance(desired, list):
        if not desired:
            return live is None or live == []
        if not isinstance(live, list):
            return False
        if all(isinstance(d, Mapping) for d in desired):
            return _in_order(live, desired)
        return len(live) == len(desired) and all(covers(a, b) for a, b in zip(live, desired, strict=True))
    if quantity and isinstance(desired, str) and isinstance(live, str) and desired != live:
        a, b = _quantity(desired), _quantity(live)
        return a is not None and a == b
    return (bool(live == desired) and type(live) is type(desired)) or _same_number(live, desired)


def _same_number(a: Any, b: Any) -> bool:
    numbers = (int, float)
    return isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) \
        and not isinstance(b, bool) and a == b


def _in_order(live: Sequence[Any], desired: Sequence[Mapping[str, Any]]) -> bool:
    """Each desired item is covered by a live item, in order (others may have added items between)."""
    i = 0
    for item in desired:
        while i < len(live) and not covers(live[i], item):
            i += 1
        if i == len(live):
            return False
        i += 1
    return True


def _wanted(fields: Mapping[str, Any], obj: Any) -> bool:
    """Every field a managedFields set (fieldsV1) names is in obj: nothing we own would be removed."""
    for key, sub in fields.items():
        if key == ".":
            continue
        prefix, _, rest = key.partition(":")
        if prefix == "f":
            if not isinstance(obj, Mapping) or rest not in obj:
                return False
            child = obj[rest]
        elif prefix == "k":
            keys = json.loads(rest)
            if not isinstance(obj, list):
                return False
            child = next((i for i in obj if isinstance(i, Mapping)
                          and all(k not in i or covers(i[k], v) or covers(v, i[k]) for k, v in keys.items())), None)
            if child is None:
                return False
        elif prefix == "v":
            if not isinstance(obj, list) or json.loads(rest) not in obj:
                return False
            continue
        elif prefix == "i":
            if not isinstance(obj, list) or int(rest) >= len(obj):
                return False
            child = obj[int(rest)]
        else:
            return False
        if sub and not _wanted(sub, child):
            return False
    return True


def _atomic_kept(fields: Mapping[str, Any], live: Any, desired: Any) -> bool:
    """Every atomic list the manager owns (a leaf `f:<name>` whose desired value is a list: it is applied whole) has
    as many items live as desired: an item fewer desired is one the apply removes, which `covers` cannot see."""
    if not isinstance(live, Mapping) or not isinstance(desired, Mapping):
        return True
    for key, sub in fields.items():
        prefix, _, rest = key.partition(":")
        if prefix != "f" or rest not in desired:
            continue
        want, have = desired[rest], live.get(rest)
        if not sub and isinstance(want, list) and isinstance(have, list) and len(have) != len(want):
            return False
        if sub and not _atomic_kept(sub, have, want):
            return False
    return True


def owned_fields_wanted(live: Mapping[str, Any], desired: Mapping[str, Any], manager: str,
                        subresource: str = "") -> bool:
    """The fields `manager` applied last time are all still in `desired` (else an apply must remove some), and the
    atomic lists it owns are as long as desired."""
    for entry in live.get("metadata", {}).get("managedFields") or []:
        if entry.get("manager") == manager and entry.get("operation") == "Apply" \
                and entry.get("subresource", "") == subresource:
            fields = entry.get("fieldsV1") or {}
            if not _wanted(fields, desired) or not _atomic_kept(fields, live, desired):
                return False
    return True


def up_to_date(live: Mapping[str, Any] | None, desired: Mapping[str, Any], manager: str) -> bool:
    """An apply of `desired` by `manager` would change nothing in `live`."""
    if live is None:
        return False
    return covers(live, desired) and owned_fields_wanted(live, desired, manager)


def status_up_to_date(live: Mapping[str, Any] | None, status: Mapping[str, Any], manager: str) -> bool:
    """An apply of `status` through the status subresource by `manager` would change nothing."""
    if live is None:
        return False
    return covers(live.get("status"), status) and owned_fields_wanted(live, {"status": status}, manager, "status")


PathStep = str | Mapping[str, Any]  # a map key, or the identifying fields of an item in a list of maps
# Fields that identify an item of a list of maps (the list-map keys of the kinds we apply: containers, env,
# volumes and volumeMounts, ports), tried in this order.
_ITEM_KEYS = ("name", "containerPort", "port", "mountPath", "devicePath")


def _identity(item: Mapping[str, Any]) -> dict[str, Any] | None:
    key = next((k for k in _ITEM_KEYS if k in item), None)
    return {key: item[key]} if key is not None else None


def uncovered(live: Any, desired: Any, *, quantity: bool = False,
              quantity_map: bool = False) -> list[tuple[PathStep, ...]]:
    """The paths of `desired`'s fields that `live` does not cover (by `covers`' rules): the deepest map key, or
    list item by its identifying field, where they part. Empty when `covers(live, desired)`."""
    if covers(live, desired, quantity=quantity, quantity_map=quantity_map):
        return []
    out: list[tuple[PathStep, ...]] = []
    if isinstance(desired, Mapping) and desired and isinstance(live, Mapping):
        for key, value in desired.items():
            found = uncovered(live.get(key), value, quantity=quantity_map or key in _QUANTITY_FIELDS,
                              quantity_map=key in _QUANTITY_MAPS)
            out += [(key, *path) for path in found]
        return out or [()]
    if isinstance(desired, list) and desired and isinstance(live, list) \
            and all(isinstance(d, Mapping) and _identity(d) for d in desired):
        for item in desired:
            identity = _identity(item)
            assert identity is not None
            match = next((i for i in live if isinstance(i, Mapping)
                          and all(i.get(k) == v for k, v in identity.items())), None)
            out += [(identity, *path) for path in ([()] if match is None else uncovered(match, item))]
        return out or [()]
    return [()]
