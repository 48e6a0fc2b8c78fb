"""The work queue: keys deduplicated, one worker per key at a time, delayed re-adds and capped exponential backoff;
fair between groups of keys (a namespace, say): groups take turns, and none holds more than its share of workers."""

from __future__ import annotations

import asyncio
import collections
import math
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from controller_runtime.metrics import Metrics
from controller_runtime.telemetry import DEFAULT

__all__ = ["FairGate", "WorkQueue", "fair_share"]

K = TypeVar("K", bound=Hashable)


def fair_share(slots: int, active_groups: int) -> int:
    """How many keys of one group may be processed at once while `active_groups` groups have work: an equal share
    of the slots, at least one (a group alone may use them all)."""
    return max(1, math.ceil(slots / max(1, active_groups)))


class WorkQueue(Generic[K]):
    """Like client-go's rate-limited work queue (a key added while it is being processed runs again after), with
    fair queueing: ready keys wait in their group's line, the groups are served in turn, and while several groups
    have work a group holds at most fair_share(slots, groups) workers. One group's flood (or its slow, failing
    keys) then delays another group's key by at most one turn, not by the length of the flood."""

    def __init__(self, name: str = "operator", base_delay: float = 0.5, max_delay: float = 300.0, *,
                 group: Callable[[K], str] = lambda _: "", slots: int = 0, metrics: Metrics | None = None) -> None:
        self.name = name
        self.metrics = metrics or DEFAULT.metrics
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.group = group
        self.slots = slots  # the number of workers (0: no per-group cap)
        self._lines: dict[str, collections.deque[K]] = {}  # ready keys by group, in arrival order
        self._turns: collections.deque[str] = collections.deque()  # groups with ready keys, next first
        self._busy: collections.Counter[str] = collections.Counter()  # keys being processed, by group
        self._wake = asyncio.Event()
        self._ready_count = 0
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
        self.metrics.queue_adds.labels(self.name).inc()
        if key not in self._processing:
            self._enqueue(key)

    def _enqueue(self, key: K) -> None:
        self._added_at.setdefault(key, time.monotonic())
        group = self.group(key)
        line = self._lines.get(group)
        if line is None:
            line = self._lines[group] = collections.deque()
            self._turns.append(group)
        line.append(key)
        self._ready_count += 1
        self.metrics.queue_depth.labels(self.name).set(self._ready_count)
        self._wake.set()

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
        self.metrics.queue_retries.labels(self.name).inc()
        timer = self._timers.pop(key, None)
        if timer is not None:  # a failure's delay replaces an earlier re-add
            timer.cancel()
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """The key succeeded: its next failure starts the backoff from the base again."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        """How often the key failed since it last succeeded."""
        return self._failures.get(key, 0)

    def _take(self) -> K | None:
        """The first key of the first group in turn that is under its share; that group goes to the back."""
        if not self._turns:
            return None
        active = len(set(self._turns) | {g for g, n in self._busy.items() if n})
        cap = fair_share(self.slots, active) if self.slots else None
        for _ in range(len(self._turns)):
            group = self._turns[0]
            self._turns.rotate(-1)
            if cap is not None and self._busy[group] >= cap:
                continue
            line = self._lines[group]
            key = line.popleft()
            if not line:
                del self._lines[group]
                self._turns.remove(group)
            self._ready_count -= 1
            return key
        return None

    async def get(self) -> K:
        while True:
            key = self._take()
            if key is not None:
                break
            self._wake.clear()
            await self._wake.wait()
        self.metrics.queue_depth.labels(self.name).set(self._ready_count)
        added = self._added_at.pop(key, None)
        if added is not None:
            waited = time.monotonic() - added
            self.metrics.queue_latency.labels(self.name).observe(waited)
            self.metrics.group_latency.labels(self.name, self.group(key)).observe(waited)
        self._dirty.discard(key)
        self._processing.add(key)
        self._busy[self.group(key)] += 1
        return key

    def done(self, key: K) -> None:
        """A worker finished `key`; if it was added meanwhile, it goes back in line."""
        if key in self._processing:
            self._processing.discard(key)
            group = self.group(key)
            self._busy[group] -= 1
            if self._busy[group] <= 0:
                del self._busy[group]
            self._wake.set()  # a group under its share again may have keys waiting
        if key in self._dirty:
            self._enqueue(key)

    def depth(self) -> int:
        return self._ready_count

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


class FairGate:
    """A semaphore that is fair between groups, for CPU-bound work (a render): at most `slots` holders, at most
    `per_group` of one group (fewer than `slots`, so another group's first waiter finds a free slot at once);
    waiters are served by group in turn. On a 2-core machine with the GIL, two renders at once is all there is;
    a flood of one namespace's heavy renders then slows another namespace's render by one sharer, not a queue."""

    def __init__(self, slots: int, per_group: int | None = None) -> None:
        self.slots = max(1, slots)
        self.per_group = per_group if per_group is not None else max(1, self.slots - 1)
        self._holders: collections.Counter[str] = collections.Counter()
        self._waiting: dict[str, collections.deque[asyncio.Future[None]]] = {}
        self._turns: collections.deque[str] = collections.deque()

    def _grant(self) -> None:
        for _ in range(len(self._turns)):
            if sum(self._holders.values()) >= self.slots:
                return
            group = self._turns[0]
            self._turns.rotate(-1)
            line = self._waiting[group]
            while line and line[0].done():  # cancelled waiters
                line.popleft()
            if line and self._holders[group] < self.per_group:
                self._holders[group] += 1
                line.popleft().set_result(None)
            if not line:
                del self._waiting[group]
                self._turns.remove(group)

    async def acquire(self, group: str) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if group not in self._waiting:
            self._waiting[group] = collections.deque()
            self._turns.append(group)
        self._waiting[group].append(future)
        self._grant()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted, then cancelled: give the slot back
                self.release(group)
            raise

    def release(self, group: str) -> None:
        self._holders[group] -= 1
        if self._holders[group] <= 0:
            del self._holders[group]
        self._grant()
