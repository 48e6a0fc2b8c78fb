"""How many requests a client sends at once: at most `most`; a 429 (API Priority and Fairness rejecting us) holds
every request until the server's Retry-After and halves the limit, each answered request earns a step back up
(additive increase, multiplicative decrease). A throttled client then trickles instead of stampeding when the hold
ends."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import Counter

__all__ = ["Throttle"]


class Throttle:
    """The concurrency limit and Retry-After hold shared by every request of one client."""

    def __init__(self, most: int, throttled: Counter | None = None) -> None:
        self.most = most
        self.throttled = throttled  # seconds waited out, summed (None: not counted)
        self.limit = most
        self.in_flight = 0
        self.until = 0.0  # monotonic time before which nothing is sent
        self._earned = 0
        self._free = asyncio.Event()

    async def hold(self) -> None:
        """Wait out a Retry-After the server gave any earlier request."""
        while (wait := self.until - time.monotonic()) > 0:
            if self.throttled is not None:
                self.throttled.inc(wait)
            await asyncio.sleep(wait)

    async def acquire(self) -> None:
        while True:
            await self.hold()
            if self.in_flight < self.limit:
                self.in_flight += 1
                return
            self._free.clear()
            await self._free.wait()

    def acquire_nowait(self) -> None:
        """Count a request that took no slot (a watch), so that its release() can report how it ended."""
        self.in_flight += 1

    def release(self, *, rejected: bool = False, retry_after: float | None = None) -> None:
        """A request ended: rejected with 429 (and the server's Retry-After), or otherwise."""
        self.in_flight -= 1
        if rejected:
            self.limit = max(1, self.limit // 2)
            self._earned = 0
            self.until = max(self.until, time.monotonic() + (retry_after if retry_after is not None else 1.0))
        elif self.limit < self.most:
            self._earned += 1
            if self._earned >= self.limit:
                self.limit += 1
                self._earned = 0
        self._free.set()
