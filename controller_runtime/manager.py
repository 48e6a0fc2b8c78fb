"""The controller manager: shared informers, one work queue, workers, periodic resync, leader election, probes and
metrics, for any number of controllers.

A controller names its primary kind and the kinds it watches (with a function from a watched object to the
primary objects to reconcile), and reconciles one (namespace, name) at a time, returning a typed outcome
(controller_runtime.outcomes). What it raises maps onto the same outcomes by the error's retry class
(outcomes.Classified); nothing a controller raises stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from controller_runtime.client import ALL_NAMESPACES, Kube
from controller_runtime.events import Recorder
from controller_runtime.informer import Informer
from controller_runtime.kinds import KindLike, gvk
from controller_runtime.lease import LeaderElector
from controller_runtime.objects import Key
from controller_runtime.outcomes import Classified, Done, Outcome, Requeue, Terminal, outcome_of
from controller_runtime.probes import Health
from controller_runtime.queue import FairGate, WorkQueue

__all__ = ["Controller", "Manager", "Runtime", "Settings", "Watch"]

QueueKey = tuple[str, str, str]  # (controller, namespace, name)


@dataclasses.dataclass(frozen=True)
class Watch:
    """A kind a controller watches, and which of its primary objects an event on it concerns."""

    kind: KindLike
    labels: Mapping[str, str]
    primaries: Callable[[Mapping[str, Any]], Iterable[Key]]
    namespaces: tuple[str, ...] = ()  # empty: the manager's namespace list (every namespace by default)


class Controller(Protocol):
    """What the manager needs from a controller."""

    name: str
    primary: KindLike
    namespaces: tuple[str, ...]  # of the primary kind; empty: the manager's namespace list

    def watches(self) -> Sequence[Watch]: ...

    def bind(self, runtime: Runtime) -> None: ...

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        """Bring one object to its desired state; say whether and when to look at it again."""
        ...


@dataclasses.dataclass
class Settings:
    """How the manager runs."""

    namespaces: tuple[str, ...] = ()
    resync: float = 300.0
    workers: int = 8
    max_backoff: float = 300.0


class Runtime:
    """What controllers share: the client, the informers (one per kind, label selector and namespaces), events, and
    the gate CPU-bound work passes (two at once on two cores; no namespace takes every slot)."""

    def __init__(self, kube: Kube, settings: Settings, recorder: Recorder) -> None:
        self.kube = kube
        self.settings = settings
        self.recorder = recorder
        self.informers: dict[tuple[str, str, tuple[tuple[str, str], ...], tuple[str, ...]], Informer] = {}
        # CPU-bound work of a reconcile (a render) takes a slot of this gate, fair between namespaces
        self.cpu = FairGate(max(2, os.cpu_count() or 2))

    def informer(self, kind: KindLike, labels: Mapping[str, str] | None = None,
                 namespaces: tuple[str, ...] = ()) -> Informer:
        key = (*gvk(kind), tuple(sorted((labels or {}).items())), namespaces)
        if key not in self.informers:
            self.informers[key] = Informer(self.kube, kind, namespaces or self.settings.namespaces or (ALL_NAMESPACES,),
                                           labels)
        return self.informers[key]


class Manager:
    """Runs controllers until stopped: stands by while another replica leads, then lists, watches, reconciles."""

    def __init__(self, runtime: Runtime, controllers: Sequence[Controller], health: Health,
                 elector: LeaderElector | None = None) -> None:
        self.runtime = runtime
        self.controllers = {c.name: c for c in controllers}
        self.health = health
        self.elector = elector
        self.log = runtime.kube.telemetry.logger("operator")
        self.metrics = runtime.kube.telemetry.metrics
        # fair between namespaces: one tenant's flood or slow failing objects wait in their own line
        self.queue: WorkQueue[QueueKey] = WorkQueue(max_delay=runtime.settings.max_backoff, group=_namespace,
                                                    slots=runtime.settings.workers, metrics=self.metrics)
        self.primary: dict[str, Informer] = {}
        for controller in controllers:
            controller.bind(runtime)
            self.primary[controller.name] = runtime.informer(controller.primary, namespaces=controller.namespaces)
            for watch in controller.watches():
                runtime.informer(watch.kind, watch.labels, watch.namespaces).handlers.append(
                    self._enqueuer(controller.name, watch))

    def _enqueuer(self, controller: str, watch: Watch) -> Callable[[str, dict[str, Any]], None]:
        def handle(event: str, obj: dict[str, Any]) -> None:
            for namespace, name in watch.primaries(obj):
                self.queue.add((controller, namespace, name))
        return handle

    async def run(self, stop: asyncio.Event) -> int:
        """0 on a clean stop; 2 when leadership was lost (the process should restart)."""
        beat = asyncio.create_task(self._heartbeat(stop))
        try:
            if self.elector is not None:
                self.health.ready, self.health.state = False, "waiting for the lease"
                if not await self.elector.acquire(stop):
                    return 0
            return await self._lead(stop)
        finally:
            beat.cancel()
            if self.elector is not None:
                await self.elector.release()

    async def _lead(self, stop: asyncio.Event) -> int:
        self.health.ready, self.health.state = False, "syncing caches"
        informers = list(self.runtime.informers.values())
        tasks = [asyncio.create_task(i.run(), name=f"informer {i.name}") for i in informers]
        try:
            synced = asyncio.gather(*(i.synced.wait() for i in self.runtime.informers.values()))
            await _first(synced, stop.wait())
            if stop.is_set():
                return 0
            self.log.info("caches synced", extra={"informers": len(tasks)})
            self.health.ready, self.health.state = True, "leading" if self.elector else "running"
            tasks += [asyncio.create_task(self._worker(), name=f"worker {n}")
                      for n in range(self.runtime.settings.workers)]
            tasks.append(asyncio.create_task(self._resync(stop), name="resync"))
            # An informer never returns (it lists again after any failure); if one ever ends, its cache is frozen
            # and every controller reading it is blind: stop, so that the process is restarted with fresh caches.
            watched = [asyncio.ensure_future(asyncio.shield(task)) for task in tasks[:len(informers)]]
            keep = None
            if self.elector is not None:
                keep = asyncio.create_task(self.elector.keep(stop), name="lease")
                tasks.append(keep)
            await _first(stop.wait(), *([keep] if keep else []), *watched)
            if stop.is_set():
                return 0
            if keep is not None and keep.done():
                self.log.error("leadership lost: stopping so that only the new leader reconciles")
                return 2
            ended = [task for task in tasks[:len(informers)] if task.done()]
            self.log.error("an informer stopped: exiting so that the caches are built again",
                      extra={"informers": [task.get_name() for task in ended],
                             "error": next((repr(task.exception()) for task in ended
                                            if not task.cancelled() and task.exception()), "")})
            return 2
        finally:
            self.health.ready, self.health.state = False, "stopping"
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.queue.close()

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.health.beat = time.monotonic()
            if self.elector is not None and not self.elector.leading and self.health.state != "stopping":
                # a standby is ready (it is healthy and waits its turn); a replica that cannot reach the API is not
                self.health.ready = self.elector.standing_by
                self.health.state = "standby" if self.elector.standing_by else "waiting for the lease"
            await asyncio.sleep(1.0)

    async def _resync(self, stop: asyncio.Event) -> None:
        """Every object of every controller, each resync period (and once at start)."""
        while not stop.is_set():
            for name, informer in self.primary.items():
                for namespace, obj_name in informer.cached_keys():
                    self.queue.add((name, namespace, obj_name))
            await asyncio.sleep(self.runtime.settings.resync)

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            started = time.perf_counter()
            try:
                await self._process(key)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # our own bookkeeping failed: keep the worker, retry the key later
                self.queue.backoff(key)
                with contextlib.suppress(Exception):
                    self.log.error("worker failure", extra={"key": "/".join(key), "error": repr(e)})
            finally:
                self.metrics.work_duration.labels(self.queue.name).observe(time.perf_counter() - started)
                self.queue.done(key)

    async def _process(self, key: QueueKey) -> None:
        """One reconcile with its metrics; its outcome decides whether and when the key comes back."""
        controller_name, namespace, name = key
        controller = self.controllers[controller_name]
        started = time.perf_counter()
        fields = {"controller": controller_name, "namespace": namespace, "object": name}
        raised = False
        try:
            outcome: Outcome = await controller.reconcile(namespace, name)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            raised = True
            if isinstance(e, Classified):
                outcome = outcome_of(e)
                self.log.warning("reconcile failed", extra={**fields, "error": str(e), "retryable": e.retryable})
            else:  # a bug: retried with backoff, with its trace
                outcome = Requeue(f"{type(e).__name__}: {e}")
                self.log.exception("reconcile crashed: retrying", extra=fields)
        finally:
            self.metrics.reconcile_duration.labels(controller_name).observe(time.perf_counter() - started)
        result = self._settle(key, outcome, fields)
        if raised:
            self.metrics.reconcile_errors.labels(controller_name).inc()
            result = "error"
        self.metrics.reconcile_total.labels(controller_name, result).inc()

    def _settle(self, key: QueueKey, outcome: Outcome, fields: Mapping[str, str]) -> str:
        """Schedule the key as the outcome says; the result label for the metrics."""
        if isinstance(outcome, Done):
            self.queue.forget(key)
            if outcome.after is not None:
                self.queue.add_after(key, outcome.after.seconds)
                return "requeue_after"
            return "success"
        if isinstance(outcome, Terminal):
            self.queue.forget(key)
            self.log.info("reconcile ended: waiting for a change", extra={**fields, "reason": outcome.reason})
            return "terminal"
        delay = self.queue.retry(key, outcome.after)
        self.log.info("requeued", extra={**fields, "reason": outcome.reason, "retry_in": delay})
        return "requeue"


def _namespace(key: QueueKey) -> str:
    return key[1]


async def _first(*aws: Any) -> None:
    """Wait until the first of several awaitables finishes; cancel the others."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
