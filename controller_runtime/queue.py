"""The work queue: keys deduplicated, one worker per key at a time, delayed re-adds and capped exponential backoff."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Hashable
from typing import Generic, TypeVar

from controller_runtime.metrics import QUEUE_ADDS, QUEUE_DEPTH, QUEUE_LATENCY, QUEUE_RETRIES

__all__ = ["WorkQueue"]

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Like client-go's rate-limited work queue: a key added while it is being processed runs again after."""

    def __init__(self, name: str = "operator", base_delay: float = 0.5, max_delay: float = 300.0) -> None:
        self.name = name
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._ready: asyncio.Queue[K] = asyncio.Queue()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._added_at: dict[K, float] = {}

    def add(self, key: K) -> None:
        """Reconcile `key` soon (once, however often it is added before a worker takes it)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if key in self._dirty:
            return
        self._dirty.add(key)
        QUEUE_ADDS.labels(self.name).inc()
        if key not in self._processing:
            self._enqueue(key)

    def _enqueue(self, key: K) -> None:
        self._added_at.setdefault(key, time.monotonic())
        self._ready.put_nowait(key)
        QUEUE_DEPTH.labels(self.name).set(self._ready.qsize())

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
        return self.retry(key, None)

    def retry(self, key: K, at_least: float | None) -> float:
        """Re-add after a failure with backoff, but not before `at_least` seconds (a server's Retry-After)."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay: float = min(self.base_delay * float(2 ** min(failures, 32)), self.max_delay)
        if at_least is not None:
            delay = max(delay, at_least)
        QUEUE_RETRIES.labels(self.name).inc()
        timer = self._timers.pop(key, None)
        if timer is not None:  # a failure's delay replaces an earlier re-add
            timer.cancel()
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """The key succeeded: its next failure starts the backoff from the base again."""
        self._failures.pop(key, None)

    async def get(self) -> K:
        key = await self._ready.get()
        QUEUE_DEPTH.labels(self.name).set(self._ready.qsize())
        added = self._added_at.pop(key, None)
        if added is not None:
            QUEUE_LATENCY.labels(self.name).observe(time.monotonic() - added)
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """A worker finished `key`; if it was added meanwhile, it goes back in line."""
        self._processing.discard(key)
        if key in self._dirty:
            self._enqueue(key)

    def depth(self) -> int:
        return self._ready.qsize()

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
