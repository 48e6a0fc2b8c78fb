"""The operator process: shared informers, one work queue, workers, periodic resync, leader election,
probes and metrics, for any number of controllers (the Application reconciler and the PlatformStack controller).

A controller names its primary kind and the kinds it watches (with a function from a watched object to
the primary objects to reconcile), and reconciles one (namespace, name) at a time. Errors requeue the key
with capped exponential backoff; nothing a controller raises stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import Counter, Gauge, Histogram

from reconciler.events import Recorder
from reconciler.informer import Informer, Key, key_of
from reconciler.kube import ALL_NAMESPACES, Kube, KubeError
from reconciler.lease import LeaderElector
from reconciler.queue import WorkQueue
from reconciler.serve import Health
from renderer.manifests import Kind

log = logging.getLogger("apprafter.operator")

RECONCILE_TOTAL = Counter("reconcile", "Reconciles finished, by controller and result", ["controller", "result"])
RECONCILE_ERRORS = Counter("reconcile_errors", "Reconciles that failed (requeued with backoff)", ["controller"])
RECONCILE_DURATION = Histogram("reconcile_duration_seconds", "Time per reconcile", ["controller"],
                               buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
QUEUE_DEPTH = Gauge("apprafter_workqueue_depth", "Keys waiting for a worker")

QueueKey = tuple[str, str, str]  # (controller, namespace, name)


@dataclasses.dataclass(frozen=True)
class Watch:
    """A kind a controller watches, and which of its primary objects an event on it concerns."""

    kind: Kind
    labels: Mapping[str, str]
    primaries: Callable[[Mapping[str, Any]], Iterable[Key]]
    namespaces: tuple[str, ...] = ()  # empty: the operator's --namespace list (every namespace by default)


class RetryLater(Exception):
    """A reconcile that could not finish for a reason outside the cluster (a registry down, a signature that does
    not verify); its status says why. Retried with backoff, like a failed API request."""


class Controller(Protocol):
    """What the loop needs from a controller."""

    name: str
    primary: Kind
    namespaces: tuple[str, ...]  # of the primary kind; empty: the operator's --namespace list

    def watches(self) -> Sequence[Watch]: ...

    def bind(self, runtime: Runtime) -> None: ...

    async def reconcile(self, namespace: str, name: str) -> float | None:
        """Bring one object to its desired state; returns seconds until it should be looked at again, if any."""
        ...


@dataclasses.dataclass
class Settings:
    """How the loop runs (flags of `apprafter operator`)."""

    namespaces: tuple[str, ...] = ()
    resync: float = 300.0
    workers: int = 8
    max_backoff: float = 300.0


class Runtime:
    """What controllers share: the client, the informers (one per kind and label selector), events."""

    def __init__(self, kube: Kube, settings: Settings, identity: str) -> None:
        self.kube = kube
        self.settings = settings
        self.recorder = Recorder(kube, identity)
        self.informers: dict[tuple[str, str, tuple[tuple[str, str], ...], tuple[str, ...]], Informer] = {}

    def informer(self, kind: Kind, labels: Mapping[str, str] | None = None,
                 namespaces: tuple[str, ...] = ()) -> Informer:
        key = (kind.api_version, kind.kind, tuple(sorted((labels or {}).items())), namespaces)
        if key not in self.informers:
            self.informers[key] = Informer(self.kube, kind, namespaces or self.settings.namespaces or (ALL_NAMESPACES,),
                                           labels)
        return self.informers[key]


def controller_owners(kind: Kind) -> Callable[[Mapping[str, Any]], Iterable[Key]]:
    """Primary keys of a watched object: its controlling owner of `kind` (same namespace)."""

    def owners(obj: Mapping[str, Any]) -> Iterable[Key]:
        meta = obj.get("metadata", {})
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == kind.kind and ref.get("apiVersion") == kind.api_version:
                yield str(meta.get("namespace", "")), str(ref.get("name", ""))

    return owners


def itself(obj: Mapping[str, Any]) -> Iterable[Key]:
    yield key_of(obj)


class Manager:
    """Runs controllers until stopped: stands by while another replica leads, then lists, watches, reconciles."""

    def __init__(self, runtime: Runtime, controllers: Sequence[Controller], health: Health,
                 elector: LeaderElector | None = None) -> None:
        self.runtime = runtime
        self.controllers = {c.name: c for c in controllers}
        self.health = health
        self.elector = elector
        self.queue: WorkQueue[QueueKey] = WorkQueue(max_delay=runtime.settings.max_backoff)
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
        tasks = [asyncio.create_task(i.run(), name=f"informer {i.kind.plural}") for i in informers]
        try:
            synced = asyncio.gather(*(i.synced.wait() for i in self.runtime.informers.values()))
            await _first(synced, stop.wait())
            if stop.is_set():
                return 0
            log.info("caches synced", extra={"informers": len(tasks)})
            self.health.ready, self.health.state = True, "leading" if self.elector else "running"
            tasks += [asyncio.create_task(self._worker(), name=f"worker {n}")
                      for n in range(self.runtime.settings.workers)]
            tasks.append(asyncio.create_task(self._resync(stop), name="resync"))
            if self.elector is not None:
                keep = asyncio.create_task(self.elector.keep(stop), name="lease")
                tasks.append(keep)
                await _first(keep, stop.wait())
                if not stop.is_set():
                    log.error("leadership lost: stopping so that only the new leader reconciles")
                    return 2
            else:
                await stop.wait()
            return 0
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
            QUEUE_DEPTH.set(self.queue.depth())
            await asyncio.sleep(1.0)

    async def _resync(self, stop: asyncio.Event) -> None:
        """Every object of every controller, each resync period (and once at start)."""
        while not stop.is_set():
            for name, informer in self.primary.items():
                for namespace, obj_name in list(informer.store):
                    self.queue.add((name, namespace, obj_name))
            await asyncio.sleep(self.runtime.settings.resync)

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self._process(key)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # our own bookkeeping failed: keep the worker, retry the key later
                self.queue.backoff(key)
                with contextlib.suppress(Exception):
                    log.error("worker failure", extra={"key": "/".join(key), "error": repr(e)})
            finally:
                self.queue.done(key)

    async def _process(self, key: QueueKey) -> None:
        """One reconcile with its metrics; failures requeue the key with backoff."""
        controller_name, namespace, name = key
        controller = self.controllers[controller_name]
        started = time.perf_counter()
        result = "success"
        try:
            again = await controller.reconcile(namespace, name)
            self.queue.forget(key)
            if again is not None:
                result = "requeue"
                self.queue.add_after(key, again)
        except asyncio.CancelledError:
            raise
        except (KubeError, RetryLater) as e:
            result = "error"
            RECONCILE_ERRORS.labels(controller_name).inc()
            delay = self.queue.backoff(key)
            log.warning("reconcile failed: retrying", extra={
                "controller": controller_name, "namespace": namespace, "object": name, "error": str(e),
                "retry_in": delay})
        except Exception:
            result = "error"
            RECONCILE_ERRORS.labels(controller_name).inc()
            delay = self.queue.backoff(key)
            log.exception("reconcile crashed: retrying", extra={
                "controller": controller_name, "namespace": namespace, "object": name, "retry_in": delay})
        finally:
            RECONCILE_DURATION.labels(controller_name).observe(time.perf_counter() - started)
            RECONCILE_TOTAL.labels(controller_name, result).inc()


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
