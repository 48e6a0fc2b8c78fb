"""Whether a live object already is what a server-side apply would make it: a no-op reconcile writes nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

_QUANTITY = re.compile(r"^([+-]?[0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_FACTORS: dict[str | None, Decimal] = {
    None: Decimal(1), "m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9),
    "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18), "Ki": Decimal(2**10), "Mi": Decimal(2**20),
    "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60)}


def _quantity(value: str) -> Decimal | None:
    """A Kubernetes quantity's value ("500m" == "0.5"): the API server stores quantities in canonical form."""
    m = _QUANTITY.match(value)
    if not m:
        return None
    try:
        return Decimal(m[1]) * _FACTORS[m[2]]
    except InvalidOperation:
        return None


def covers(live: Any, desired: Any) -> bool:
    """Every field of `desired` is in `live` with the same value (live may hold defaults and others' fields)."""
    if isinstance(desired, Mapping):
        if not desired:
            return live is None or isinstance(live, Mapping)
        return isinstance(live, Mapping) and all(covers(live.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        if not desired:
            return live is None or live == []
        if not isinstance(live, list):
            return False
        if all(isinstance(d, Mapping) for d in desired):
            return _in_order(live, desired)
        return len(live) == len(desired) and all(covers(a, b) for a, b in zip(live, desired, strict=True))
    if isinstance(desired, str) and isinstance(live, str) and desired != live:
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


def owned_fields_wanted(live: Mapping[str, Any], desired: Mapping[str, Any], manager: str,
                        subresource: str = "") -> bool:
    """The fields `manager` applied last time are all still in `desired` (else an apply must remove some)."""
    for entry in live.get("metadata", {}).get("managedFields") or []:
        if entry.get("manager") == manager and entry.get("operation") == "Apply" \
                and entry.get("subresource", "") == subresource and not _wanted(entry.get("fieldsV1") or {}, desired):
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


def foreign_writers(obj: Mapping[str, Any], field: str, manager: str) -> list[str]:
    """Field managers other than `manager` that wrote status.<field> (a hand-written baseline is not trusted)."""
    out = []
    for entry in obj["metadata"].get("managedFields") or []:
        fields = (entry.get("fieldsV1") or {}).get("f:status") or {}
        if f"f:{field}" in fields and entry.get("manager") != manager:
            out.append(str(entry.get("manager") or "(unnamed)"))
    return sorted(set(out))
