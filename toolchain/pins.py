"""Reads the tool pins from versions.env (tools/ in a checkout, package data in a wheel)."""

from __future__ import annotations

import functools
from pathlib import Path

_CANDIDATES = (
    Path(__file__).resolve().parent / "versions.env",
    Path(__file__).resolve().parent.parent / "tools" / "versions.env",
)


@functools.cache
def pins() -> dict[str, str]:
    """Return the KEY=value pins, e.g. {"CUE_VERSION": "v0.17.1", ...}."""
    for path in _CANDIDATES:
        if path.is_file():
            out: dict[str, str] = {}
            for line in path.read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, _, value = line.partition("=")
                    out[key.strip()] = value.strip().strip('"')  # as the shell reads KEY="a b"
            return out
    raise FileNotFoundError("versions.env not found next to the toolchain package or in tools/")
