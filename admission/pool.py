"""The webhook's review workers, seen from its event loop: a fixed set of worker processes (admission.worker), two
lanes (large bodies may never take the last worker, small ones go first), a bounded wait, a deadline per review
(the worker is killed and replaced when it passes), and the answer for each way a review can end."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Gauge

from admission.review import Outcome, Settings, busy, over_budget
from admission.worker import HEADER

__all__ = ["Limits", "ReviewPool"]

log = logging.getLogger("apprafter.webhook")
IN_FLIGHT = Gauge("apprafter_webhook_reviews_in_flight", "Reviews a worker is answering now, by lane.", ["lane"])
WAITING = Gauge("apprafter_webhook_reviews_waiting", "Reviews waiting for a worker, by lane.", ["lane"])
REFUSED = Counter("apprafter_webhook_refused", "Reviews refused without an answer from the rules, by why "
                  "(busy, cpu, memory, deadline, worker).", ["why"])
WORKER_STARTS = Counter("apprafter_webhook_worker_starts", "Review worker processes started.")
WORKERS = Gauge("apprafter_webhook_workers", "Review workers up and warm (idle or reviewing).")
SMALL, LARGE = "small", "large"


@dataclasses.dataclass(frozen=True)
class Limits:
    """How much one review and all of them together may take (docs/admission.md "Bounds")."""

    workers: int = 2
    cpu_seconds: float = 2.0  # per review, in its worker
    memory_mb: int = 96  # growth of a worker's data segment past its warm size
    deadline_seconds: float = 4.0  # request to answer, queueing included: below the configuration's timeoutSeconds
    large_body: int = 256 << 10  # bodies above this are "large": they never take the last free worker
    queue: int = 32  # reviews that may wait for a worker (large ones: at most `workers`)
    start_seconds: float = 60.0  # a worker's warm-up (cue builds the schema once)


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, config: Mapping[str, Any], timeout: float) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "admission.worker", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        worker = cls(process)
        WORKER_STARTS.inc()
        try:
            await worker.send(json.dumps(config).encode())
            ready = await asyncio.wait_for(worker.receive(), timeout)
        except BaseException:
            worker.kill()
            raise
        if ready != b"ready":
            worker.kill()
            raise RuntimeError(f"a review worker did not start: {ready[:200]!r}")
        return worker

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(HEADER.pack(len(data)) + data)
        await self.process.stdin.drain()

    async def receive(self) -> bytes:
        assert self.process.stdout is not None
        (size,) = HEADER.unpack(await self.process.stdout.readexactly(HEADER.size))
        return await self.process.stdout.readexactly(size)

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    def kill(self) -> None:
        if self.alive:
            self.process.kill()


class ReviewPool:
    """Runs reviews in worker processes; `review` always returns an Outcome (refusals included), never raises."""

    def __init__(self, settings: Settings, limits: Limits) -> None:
        self.limits = limits
        self.config = {"operator_user": settings.operator_user, "context": settings.context._asdict(),
                       "cpu_seconds": limits.cpu_seconds, "memory_mb": limits.memory_mb}
        self.idle: list[_Worker] = []
        self.running = {SMALL: 0, LARGE: 0}
        self.waiting = {SMALL: 0, LARGE: 0}
        self.starting = 0
        self.changed = asyncio.Condition()
        self.background: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Start every worker (once the rules are warm in each)."""
        workers = await asyncio.gather(*(_Worker.start(self.config, self.limits.start_seconds)
                                         for _ in range(self.limits.workers)))
        self.idle.extend(workers)
        self._count()

    def _count(self) -> None:
        WORKERS.set(len(self.idle) + sum(self.running.values()))

    def ready(self) -> bool:
        """At least one worker is up (idle or reviewing)."""
        return bool(self.idle) or sum(self.running.values()) > 0

    def close(self) -> None:
        for worker in self.idle:
            worker.kill()
        self.idle.clear()

    def _may_take(self, lane: str) -> bool:
        if not self.idle:
            return False
        if lane == SMALL:
            return True
        # A large review waits while a small one does, and never takes the last idle worker (while one is being
        # replaced, the live ones count); with a single worker configured there is no other to keep.
        if self.waiting[SMALL]:
            return False
        return self.limits.workers == 1 or len(self.idle) >= 2

    def full(self, size: int) -> str | None:
        """Why a body of `size` bytes would be refused at once (its lane's wait is full), else None: said before
        the body is read, so a flood of large bodies costs the webhook their first bytes only."""
        lane = LARGE if size > self.limits.large_body else SMALL
        room = self.limits.queue if lane == SMALL else self.limits.workers
        if self.waiting[lane] >= room:
            return f"{self.waiting[lane]} {lane} reviews waiting for a worker"
        return None

    async def review(self, path: str, body: bytes, now: str, started: float) -> Outcome:
        """The answer for one review whose request arrived at `started` (time.monotonic())."""
        lane = LARGE if len(body) > self.limits.large_body else SMALL
        room = self.limits.queue if lane == SMALL else self.limits.workers
        if self.waiting[lane] >= room:
            REFUSED.labels("busy").inc()
            return busy(body, f"{self.waiting[lane]} {lane} reviews waiting for a worker")
        deadline = started + self.limits.deadline_seconds
        self.waiting[lane] += 1
        WAITING.labels(lane).set(self.waiting[lane])
        try:
            async with self.changed:
                await asyncio.wait_for(self.changed.wait_for(lambda: self._may_take(lane)),
                                       max(0.0, deadline - time.monotonic()))
                worker = self.idle.pop()
                self.running[lane] += 1
        except TimeoutError:
            REFUSED.labels("busy").inc()
            return busy(body, f"no worker was free within {self.limits.deadline_seconds:g} s")
        finally:
            self.waiting[lane] -= 1
            WAITING.labels(lane).set(self.waiting[lane])
        if lane == LARGE and deadline - time.monotonic() < self.limits.deadline_seconds / 4:
            # too little time left for a large review: refused now rather than killed half-way (a worker killed
            # is a worker warming up again)
            await self._give_back(worker, lane)
            REFUSED.labels("busy").inc()
            return busy(body, "a large review waited too long for a worker")
        IN_FLIGHT.labels(lane).inc()
        keep = False
        try:
            outcome, keep = await self._ask(worker, path, body, now, deadline)
            return outcome
        finally:
            IN_FLIGHT.labels(lane).dec()
            await self._give_back(worker, lane, keep)

    async def _give_back(self, worker: _Worker, lane: str, keep: bool = True) -> None:
        async with self.changed:
            self.running[lane] -= 1
            if keep:
                self.idle.append(worker)
            else:
                worker.kill()
                self._replace()
            self._count()
            self.changed.notify_all()

    async def _ask(self, worker: _Worker, path: str, body: bytes, now: str,
                   deadline: float) -> tuple[Outcome, bool]:
        """(the outcome, whether the worker may review again)."""
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + max(0.0, deadline - time.monotonic())):
                await worker.send(json.dumps({"path": path, "now": now}).encode())
                await worker.send(body)
                answer = await worker.receive()
        except TimeoutError:
            REFUSED.labels("deadline").inc()
            log.warning("review stopped at its deadline: worker replaced")
            return over_budget(body, f"{self.limits.deadline_seconds:g} s"), False
        except (OSError, asyncio.IncompleteReadError):
            REFUSED.labels("worker").inc()
            log.error("a review worker ended during a review (exit %s): replaced", worker.process.returncode)
            return over_budget(body, f"its memory, {self.limits.memory_mb} MiB, or the worker failed"), False
        reply: dict[str, Any] = json.loads(answer)
        if reply["spent"]:
            REFUSED.labels(str(reply["spent"])).inc()
        return Outcome.from_json(reply["outcome"]), reply["leave"] is not True

    def _replace(self) -> None:
        """Start a worker in the background to replace one that was stopped."""
        async def replace() -> None:
            self.starting += 1
            try:
                worker = await _Worker.start(self.config, self.limits.start_seconds)
            except Exception:
                log.exception("a review worker could not be started; retrying")
                await asyncio.sleep(1.0)
                self._replace()
                return
            finally:
                self.starting -= 1
            async with self.changed:
                self.idle.append(worker)
                self._count()
                self.changed.notify_all()

        task = asyncio.get_running_loop().create_task(replace())
        self.background.add(task)
        task.add_done_callback(self.background.discard)
