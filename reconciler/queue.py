"""The work queue: keys deduplicated, one worker per key at a time, delayed re-adds and capped exponential backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Like client-go's rate-limited work queue: a key added while it is being processed runs again after."""

    def __init__(self, base_delay: float = 0.5, max_delay: float = 300.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._ready: asyncio.Queue[K] = asyncio.Queue()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}

    def add(self, key: K) -> None:
        """Reconcile `key` soon (once, however often it is added before a worker takes it)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._ready.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Reconcile `key` after `delay` seconds (an earlier pending re-add wins)."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None and timer.when() <= when:
            return
        if timer is not None:
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def backoff(self, key: K) -> float:
        """Re-add after a failure: base * 2^failures, capped; returns the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay: float = min(self.base_delay * float(2 ** min(failures, 32)), self.max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """The key succeeded: its next failure starts the backoff from the base again."""
        self._failures.pop(key, None)

    async def get(self) -> K:
        key = await self._ready.get()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """A worker finished `key`; if it was added meanwhile, it goes back in line."""
        self._processing.discard(key)
        if key in self._dirty:
            self._ready.put_nowait(key)

    def depth(self) -> int:
        return self._ready.qsize()

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
