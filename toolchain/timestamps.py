"""Kubernetes timestamps, written one way everywhere: meta/v1 Time (RFC 3339, seconds) and MicroTime, in UTC."""

from __future__ import annotations

import datetime

__all__ = ["age", "micro_time", "parse_time", "time_now"]

_TIME = "%Y-%m-%dT%H:%M:%SZ"


def time_now() -> str:
    """meta/v1 Time of now: RFC 3339 in UTC, whole seconds."""
    return datetime.datetime.now(datetime.UTC).strftime(_TIME)


def micro_time() -> str:
    """meta/v1 MicroTime of now (Leases, events.k8s.io Events)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime.datetime | None:
    """A meta/v1 Time read back (None when it is not one)."""
    try:
        return datetime.datetime.strptime(text, _TIME).replace(tzinfo=datetime.UTC)
    except (TypeError, ValueError):
        return None


def age(created: str | None, now: datetime.datetime | None = None) -> str:
    """kubectl's AGE column: the largest unit only (3d, 5h, 12m, 40s); <unknown> without a readable time."""
    then = parse_time(created) if created else None
    if then is None:
        return "<unknown>"
    seconds = int(((now or datetime.datetime.now(datetime.UTC)) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"
