"""Kubernetes quantities ("500m", "1Gi", "1e3"), the one parser every layer uses: lightkube's parse_quantity, the
grammar the API server accepts (a pure function; its package's import loads the client, a cost at import only)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from lightkube.utils.quantity import parse_quantity

__all__ = ["quantity", "whole_bytes"]


def quantity(value: Any) -> Decimal | None:
    """A quantity's value (None: not a quantity the API server would take, or not a string)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = parse_quantity(value)
    except (ValueError, ArithmeticError):
        return None
    return parsed if parsed is not None and parsed.is_finite() else None


def whole_bytes(value: Any) -> int | None:
    """A memory or storage quantity in whole bytes, rounded up as the kubelet does (None: not a quantity, or below
    zero)."""
    parsed = quantity(value)
    if parsed is None or parsed < 0:
        return None
    return int(parsed.to_integral_value(rounding="ROUND_CEILING"))
