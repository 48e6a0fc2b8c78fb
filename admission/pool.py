"""The webhook's review workers, seen from its event loop: a fixed set of worker processes (admission.worker) shared
fairly between writers (admission.shares: a flow per writer, the operator's lane, large bodies never on the last
worker), a bounded wait, a deadline per review (the worker is killed and replaced when it passes), and the answer for
each way a review can end."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Gauge

from admission.policies import PolicySource
from admission.review import Outcome, Settings, busy, over_budget
from admission.shares import LANES, LARGE, RESERVED, SMALL, Flow, Shares, Ticket
from admission.worker import HEADER

__all__ = ["Limits", "ReviewPool"]

log = logging.getLogger("apprafter.webhook")
IN_FLIGHT = Gauge("apprafter_webhook_reviews_in_flight", "Reviews a worker is answering now, by lane.", ["lane"])
WAITING = Gauge("apprafter_webhook_reviews_waiting", "Reviews waiting for a worker, by lane.", ["lane"])
FLOWS = Gauge("apprafter_webhook_flows", "Writers (client, user, namespace) with a review waiting or running.")
REFUSED = Counter("apprafter_webhook_refused", "Reviews refused without an answer from the rules, by why "
                  "(busy, pushed, cpu, memory, deadline, worker, slow, client).", ["why"])
WORKER_STARTS = Counter("apprafter_webhook_worker_starts", "Review worker processes started.")
WORKERS = Gauge("apprafter_webhook_workers", "Review workers up and warm (idle or reviewing).")
Body = bytes | bytearray  # a request body as the app read it (never copied on its way to a worker)
PIPE_PIECE = 64 << 10


@dataclasses.dataclass(frozen=True)
class Limits:
    """How much one review and all of them together may take (docs/admission.md "Bounds")."""

    workers: int = 2
    cpu_seconds: float = 2.0  # per review, in its worker
    memory_mb: int = 96  # growth of a worker's data segment past its warm size
    deadline_seconds: float = 4.0  # request to answer, queueing included: below the configuration's timeoutSeconds
    heavy_body: int = 64 << 10  # reviews of bodies above this never take the last free worker
    large_body: int = 256 << 10  # bodies above this are "large": they wait in a lane of their own
    queue: int = 32  # reviews that may wait for a worker (large ones: at most `workers`)
    reserved_queue: int = 8  # the operator's reviews that may wait (their own lane, served first)
    start_seconds: float = 60.0  # a worker's warm-up (cue builds the schema once)
    # With two workers or more, one runs at this niceness and takes the heavy reviews: a flood of large bodies then
    # competes for a core below everyone else's reviews (a pod cannot raise a process's priority back, so the
    # worker keeps it for good; 0: none is lowered).
    heavy_nice: int = 10


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, process: asyncio.subprocess.Process, nice: int) -> None:
        self.process = process
        self.nice = nice  # above 0: the heavy reviews' worker
        self.policies = -1  # the version of the HostnamePolicies it holds (admission.policies): none yet

    @classmethod
    async def start(cls, config: Mapping[str, Any], timeout: float, nice: int = 0) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "admission.worker", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        worker = cls(process, nice)
        if nice > 0:
            with contextlib.suppress(ProcessLookupError):  # one that died at once fails its warm-up below
                os.setpriority(os.PRIO_PROCESS, process.pid, nice)  # lowering a child's priority needs no privilege
        WORKER_STARTS.inc()
        try:
            await worker.send(json.dumps(config).encode())
            async with asyncio.timeout(timeout):
                ready = await worker.receive()
        except BaseException:
            worker.kill()
            raise
        if ready != b"ready":
            worker.kill()
            raise RuntimeError(f"a review worker did not start: {ready[:200]!r}")
        return worker

    async def send(self, data: Body) -> None:
        """One frame, its data in pieces the pipe takes as it goes: a large body is never copied whole into the
        pipe's buffer (the process holds it once, in the request's buffer)."""
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(HEADER.pack(len(data)))
        view = memoryview(data)
        for at in range(0, len(view), PIPE_PIECE):
            stdin.write(view[at:at + PIPE_PIECE])
            await stdin.drain()
        await stdin.drain()

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

    def __init__(self, settings: Settings, limits: Limits, policies: PolicySource | None = None) -> None:
        self.limits = limits
        self.policies = policies
        self.operator_user = settings.operator_user
        self.config = {"operator_user": settings.operator_user, "context": settings.context._asdict(),
                       "claim_status_users": list(settings.claim_status_users),
                       "provider_writers": list(settings.provider_writers), "cpu_seconds": limits.cpu_seconds,
                       "memory_mb": limits.memory_mb}
        self.idle: list[_Worker] = []
        self.shares = Shares(limits.workers, limits.queue, limits.reserved_queue)
        self.waiters: dict[Ticket, asyncio.Future[_Worker | None]] = {}  # None: pushed out of the wait
        self.starting = 0
        self.background: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Start every worker (once the rules are warm in each)."""
        workers = await asyncio.gather(*(_Worker.start(self.config, self.limits.start_seconds, self._nice(index))
                                         for index in range(self.limits.workers)))
        self.idle.extend(workers)
        self._count()

    def _count(self) -> None:
        WORKERS.set(len(self.idle) + sum(self.shares.running_lanes.values()))
        for lane in LANES:
            WAITING.labels(lane).set(self.shares.lanes[lane].count)
            IN_FLIGHT.labels(lane).set(self.shares.running_lanes[lane])
        FLOWS.set(self.shares.flows())

    def ready(self) -> bool:
        """At least one worker is up (idle or reviewing)."""
        return bool(self.idle) or sum(self.shares.running_lanes.values()) > 0

    def close(self) -> None:
        for worker in self.idle:
            worker.kill()
        self.idle.clear()

    def ticket(self, flow: Flow, size: int) -> Ticket:
        """The place a review of `size` bytes by `flow` asks for: the operator's lane, else by its size."""
        lane = RESERVED if flow.user == self.operator_user else LARGE if size > self.limits.large_body else SMALL
        return Ticket(flow, lane, heavy=size > self.limits.heavy_body)

    def full(self, flow: Flow, size: int) -> str | None:
        """Why a body of `size` bytes from `flow` would be refused at once (its lane's wait is full and it cannot
        take another flow's place), else None: said before the body is read, so a flood of large bodies costs the
        webhook their first bytes only."""
        return self.shares.refusal(self.ticket(flow, size))

    async def review(self, path: str, body: Body, now: str, started: float, flow: Flow) -> Outcome:
        """The answer for one review by `flow` whose request arrived at `started` (time.monotonic())."""
        ticket = self.ticket(flow, len(body))
        why, pushed = self.shares.enter(ticket)
        if why is not None:
            REFUSED.labels("busy").inc()
            return busy(body, why)
        if pushed is not None:
            self.waiters.pop(pushed).set_result(None)
        deadline = started + self.limits.deadline_seconds
        waiter: asyncio.Future[_Worker | None] = asyncio.get_running_loop().create_future()
        self.waiters[ticket] = waiter
        self._dispatch()
        await asyncio.wait({waiter}, timeout=max(0.0, deadline - time.monotonic()))
        if not waiter.done():
            self.waiters.pop(ticket, None)
            self.shares.leave(ticket)
            self._count()
            REFUSED.labels("busy").inc()
            return busy(body, f"no worker was free within {self.limits.deadline_seconds:g} s")
        worker = waiter.result()
        if worker is None:
            REFUSED.labels("pushed").inc()
            return busy(body, f"this writer's reviews fill the wait ({flow.user} in "
                              f"{flow.namespace or 'the cluster scope'}); another writer's review took this one's "
                              "place")
        if ticket.lane == LARGE and deadline - time.monotonic() < self.limits.deadline_seconds / 4:
            # too little time left for a large review: refused now rather than killed half-way (a worker killed
            # is a worker warming up again)
            self._give_back(worker, ticket)
            REFUSED.labels("busy").inc()
            return busy(body, "a large review waited too long for a worker")
        keep = False
        try:
            outcome, keep = await self._ask(worker, path, body, now, deadline)
            return outcome
        finally:
            self._give_back(worker, ticket, keep)

    def _nice(self, index: int) -> int:
        """The niceness of the `index`th worker: the last one of two or more is the heavy reviews'."""
        return self.limits.heavy_nice if self.limits.workers >= 2 and index == self.limits.workers - 1 else 0

    def _dispatch(self) -> None:
        """Hand free workers to the reviews whose turn it is: a heavy review to the lowered worker when it is free,
        any other to a worker at the normal priority first."""
        while self.idle:
            ticket = self.shares.next(len(self.idle))
            if ticket is None:
                break
            lowered = [w for w in self.idle if w.nice > 0]
            worker = (lowered[0] if ticket.heavy and lowered else
                      next((w for w in reversed(self.idle) if w.nice == 0), self.idle[-1]))
            self.idle.remove(worker)
            self.waiters.pop(ticket).set_result(worker)
        self._count()

    def _give_back(self, worker: _Worker, ticket: Ticket, keep: bool = True) -> None:
        self.shares.finish(ticket)
        if keep:
            self.idle.append(worker)
        else:
            worker.kill()
            self._replace(worker.nice)
        self._dispatch()

    async def _ask(self, worker: _Worker, path: str, body: Body, now: str,
                   deadline: float) -> tuple[Outcome, bool]:
        """(the outcome, whether the worker may review again)."""
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + max(0.0, deadline - time.monotonic())):
                header: dict[str, Any] = {"path": path, "now": now}
                if self.policies is not None and worker.policies != self.policies.version:
                    header["policies"] = self.policies.snapshot()
                    header["providers"] = self.policies.provider_snapshot()
                    worker.policies = self.policies.version
                await worker.send(json.dumps(header).encode())
                await worker.send(body)
                answer = await worker.receive()
        except TimeoutError:
            REFUSED.labels("deadline").inc()
            log.warning("review stopped at its deadline: worker replaced")
            return over_budget(body, f"{self.limits.deadline_seconds:g} s"), False
        except (OSError, asyncio.IncompleteReadError, RuntimeError):  # RuntimeError: uvloop's closed pipe
            REFUSED.labels("worker").inc()
            log.error("a review worker ended during a review (exit %s): replaced", worker.process.returncode)
            return over_budget(body, f"its memory, {self.limits.memory_mb} MiB, or the worker failed"), False
        reply: dict[str, Any] = json.loads(answer)
        if reply["spent"]:
            REFUSED.labels(str(reply["spent"])).inc()
        return Outcome.from_json(reply["outcome"]), reply["leave"] is not True

    def _replace(self, nice: int) -> None:
        """Start a worker in the background to replace one that was stopped (at its niceness)."""
        async def replace() -> None:
            self.starting += 1
            try:
                worker = await _Worker.start(self.config, self.limits.start_seconds, nice)
            except Exception:
                log.exception("a review worker could not be started; retrying")
                await asyncio.sleep(1.0)
                self._replace(nice)
                return
            finally:
                self.starting -= 1
            self.idle.append(worker)
            self._dispatch()

        task = asyncio.get_running_loop().create_task(replace())
        self.background.add(task)
        task.add_done_callback(self.background.discard)
