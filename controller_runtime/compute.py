"""CPU-bound work of a reconcile (a render) off the event loop and out of its GIL: worker processes behind a gate
that is fair between groups (namespaces). A thread would share the GIL with the event loop, and an event loop
starved by one tenant's heavy renders reads every watch late, everyone's events with it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from controller_runtime.queue import FairGate
from toolchain.errors import ToolFailure

__all__ = ["Compute", "WorkerLost"]

T = TypeVar("T")


class WorkerLost(ToolFailure):
    """A worker process died under a piece of work (killed, out of memory): retried, on a fresh pool."""


class Compute:
    """`processes` worker processes (0: threads of this process, for a caller without a process to spare), at most
    that many pieces of work at once and at most all but one of them for one group."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self.gate = FairGate(max(1, processes or min(2, os.cpu_count() or 2)))
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def _fresh_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        # spawn: a fork of a process with threads and an event loop could inherit a lock held by another thread
        return concurrent.futures.ProcessPoolExecutor(self.processes, mp_context=multiprocessing.get_context("spawn"))

    def start(self) -> None:
        """Start the workers now (they import the renderer), not under the first reconcile."""
        if self.processes and self._pool is None:
            self._pool = self._fresh_pool()
            for _ in range(self.processes):
                self._pool.submit(os.getpid)

    async def run(self, group: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """fn(*args, **kwargs) in a worker (arguments and result are pickled), once the gate lets `group` in."""
        await self.gate.acquire(group)
        try:
            if not self.processes:
                return await asyncio.to_thread(fn, *args, **kwargs)
            self.start()
            assert self._pool is not None
            try:
                result: T = await asyncio.get_running_loop().run_in_executor(
                    self._pool, functools.partial(fn, *args, **kwargs))
                return result
            except BrokenProcessPool as e:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
                raise WorkerLost(f"a render worker process died ({e}): retrying on a fresh one") from e
        finally:
            self.gate.release(group)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
