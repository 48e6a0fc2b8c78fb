"""A cancelled informer stops, however busy its watch: the CI failure this pins (`apprafter app remove --wait` never
returned, its wait already answered) was Python 3.11's asyncio.wait_for swallowing a cancellation that arrived as
the awaited line of the watch did, so the cancelled watch ran on and the caller waited for it forever. Against the
session's real API server, a ConfigMap changed as fast as the server takes it keeps the watch busy; the runtime
reads each line under asyncio.timeout (tests/test_layers.py keeps asyncio.wait_for out of the shipped code)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from controller_runtime.client import Kube
from controller_runtime.informer import Informer
from tests.controller_runtime.conftest import CONFIG_MAP

Run = Callable[..., Any]

CANCELS = 40  # cancels, each just after an event was handled (a next line is then often already arriving)
BOUND = 20.0  # seconds a cancelled informer may take to stop (it takes milliseconds)


def test_an_informer_cancelled_while_its_watch_delivers_stops(run: Run, namespace: str) -> None:
    async def scenario(kube: Kube) -> list[float]:
        await kube.apply({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "busy", "namespace": namespace}, "data": {"n": "0"}})

        async def churn() -> None:
            n = 0
            while True:
                n += 1
                await kube.merge(CONFIG_MAP, "busy", namespace, {"data": {"n": str(n)}})

        churning = asyncio.create_task(churn())
        stops: list[float] = []
        try:
            for _ in range(CANCELS):
                informer = Informer(kube, CONFIG_MAP, (namespace,))
                heard = asyncio.Event()
                synced = informer.synced
                informer.handlers.append(lambda _e, _o, heard=heard, synced=synced: heard.set() if synced.is_set()
                                         else None)
                task = asyncio.create_task(informer.run())
                await heard.wait()  # synced, and one change of the churn came through the watch
                heard.clear()
                await heard.wait()  # the next: the watch is mid-stream
                task.cancel()
                started = time.monotonic()
                done, _ = await asyncio.wait({task}, timeout=BOUND)
                assert done, f"a cancelled informer still running after {BOUND:.0f} s (cancel {len(stops) + 1})"
                stops.append(time.monotonic() - started)
        finally:
            churning.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await churning
        return stops

    stops: list[Any] = run(scenario)
    assert len(stops) == CANCELS and max(stops) < BOUND
