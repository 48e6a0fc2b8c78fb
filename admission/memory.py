"""The webhook's memory after a burst: request bodies are allocated so that freeing them gives the memory back.

glibc's malloc serves a buffer past its mmap threshold from mmap and unmaps it when freed, but raises that threshold
to the size of any mmapped buffer freed (up to 32 MiB), after which the next bodies come from the heap, whose free
middle is never returned: a burst of slow clients left the process ~1.8x its body budget larger for good (issue 34).
A fixed threshold (`tune`) keeps every body past 64 KiB in its own mapping; `settle` trims the heap once the bodies
held are all given back. Elsewhere than glibc both do nothing."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging

__all__ = ["settle", "trim", "tune"]

log = logging.getLogger("apprafter.webhook")
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 64 << 10  # the body budget's free part (admission.app.FREE_BYTES): a counted body is a mapping
TRIM_THRESHOLD = 1 << 20
SETTLE_SECONDS = 1.0
_libc: ctypes.CDLL | None = None
_pending: asyncio.TimerHandle | None = None


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018 - glibc's; musl has none
        libc.malloc_trim  # noqa: B018 - as above
    except (OSError, AttributeError):
        return None
    return libc


def tune() -> bool:
    """Fix malloc's mmap and trim thresholds for this process (True when the C library is glibc and took them)."""
    global _libc
    _libc = _glibc()
    if _libc is None:
        log.info("not glibc: the allocator's thresholds are left as they are")
        return False
    return bool(_libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(_libc.mallopt(M_TRIM_THRESHOLD,
                                                                                      TRIM_THRESHOLD))


def trim() -> None:
    """Give the heap's free pages back to the system now."""
    global _pending
    _pending = None
    if _libc is not None:
        _libc.malloc_trim(0)


def settle() -> None:
    """trim() a moment from now, once however many bodies are given back meanwhile (called on the event loop when
    the last held body is given back)."""
    global _pending
    if _libc is None or _pending is not None:
        return
    _pending = asyncio.get_running_loop().call_later(SETTLE_SECONDS, trim)
