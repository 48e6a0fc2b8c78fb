"""What the core asks of a position index, whatever the file's language: where a field path is written."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Positions"]


class Positions(Protocol):
    """Where fields are written in a user's file (renderer.positions for CUE, renderer.yaml_input for YAML)."""

    def has(self, path: tuple[str | int, ...]) -> bool: ...

    def find(self, path: tuple[str | int, ...]) -> tuple[int, int]: ...
