"""Puts this process's own work (reading, indexing, checking, rendering) under the memory budget cue gets.

The soft RLIMIT_DATA becomes what the process uses now plus APPRAFTER_CUE_MEMORY_MB, so input that makes
the Python side allocate without bound ends in MemoryError (reported as the budget, exit 2) instead of the
machine's OOM killer. cue sets its own limit when it starts; the hard limit is left alone.
"""

from __future__ import annotations

import resource

from renderer.settings import limits
from toolchain.errors import ToolFailure


class OwnMemoryBudget(ToolFailure):
    """This process ran out of the memory budget limit_own_memory gave it (a MemoryError, reported as one)."""

    def __init__(self) -> None:
        super().__init__("the work on this input exceeded its memory budget and was stopped (raise "
                         "APPRAFTER_CUE_MEMORY_MB, or simplify the input)")


def _data_bytes() -> int:
    """The process's data segment now (VmData), 0 when /proc does not say."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def limit_own_memory() -> None:
    """Cap this process's data segment at its current size plus the memory budget (SettingsError if unset-able)."""
    budget = limits().memory_mb << 20
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = _data_bytes() + budget
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
