"""Outcomes without a server: the next-check value the cores make and Done carries, errors mapped by their retry
class whatever tree they come from, and the manager scheduling a Done(after=NextCheck) again."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Mapping
from typing import Any

from controller_runtime.client import ALL_NAMESPACES
from controller_runtime.events import Recorder
from controller_runtime.kinds import GroupVersionKind, KindLike
from controller_runtime.manager import Manager, Runtime, Settings, Watch
from controller_runtime.outcomes import Classified, Done, NextCheck, Outcome, Requeue, Terminal, outcome_of, soonest
from controller_runtime.probes import Health
from controller_runtime.telemetry import Telemetry

THING = GroupVersionKind("example.test/v1", "Thing")


def test_a_next_check_counts_from_the_last_look_and_is_never_overdue() -> None:
    assert NextCheck.now().due and NextCheck.now() == NextCheck(0.0)
    assert NextCheck.after_last(100.0, 600.0, now=150.0) == NextCheck(550.0)
    assert NextCheck.after_last(100.0, 600.0, now=900.0) == NextCheck(0.0)  # overdue is due now
    assert not NextCheck(0.5).due
    assert soonest([NextCheck(30.0), NextCheck(5.0), NextCheck(600.0)]) == NextCheck(5.0)
    assert soonest([]) is None
    assert Done(soonest([])) == Done()


class Refused(Exception):
    """An error of another program's tree: the runtime needs only its retry class."""

    def __init__(self, message: str, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


def test_any_error_with_a_retry_class_maps_onto_an_outcome() -> None:
    assert isinstance(Refused("x", True), Classified) and not isinstance(ValueError("x"), Classified)
    assert outcome_of(Refused("busy", True, 3.0)) == Requeue("busy", 3.0)
    assert outcome_of(Refused("busy", True)) == Requeue("busy", None)
    assert outcome_of(Refused("invalid", False)) == Terminal("invalid")


class OneThing:
    """Serves one Thing; its watch stays open after the list."""

    telemetry = Telemetry("outcomes", "outcomes")

    async def list(self, kind: KindLike, namespace: str, labels: Mapping[str, str]) -> tuple[list[dict[str, Any]],
                                                                                               str]:
        return [{"apiVersion": THING.api_version, "kind": THING.kind,
                 "metadata": {"name": "t", "namespace": "ns", "resourceVersion": "1"}}], "1"

    async def watch(self, kind: KindLike, version: str, namespace: str,
                    labels: Mapping[str, str]) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        await asyncio.Event().wait()
        yield "", {}


class Periodic:
    """Asks to be looked at again after a short NextCheck, twice, then only at events."""

    name = "periodic"
    primary: KindLike = THING
    namespaces: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.passes: list[float] = []
        self.settled = asyncio.Event()

    def watches(self) -> list[Watch]:
        return []

    def bind(self, runtime: Runtime) -> None:
        pass

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        self.passes.append(asyncio.get_running_loop().time())
        if len(self.passes) < 3:
            return Done(NextCheck(0.2))
        self.settled.set()
        return Done()


def test_the_manager_looks_again_when_the_next_check_falls_due() -> None:
    async def scenario() -> list[float]:
        kube = OneThing()
        # resync far away: only the NextChecks bring the object back
        runtime = Runtime(kube, Settings(namespaces=(ALL_NAMESPACES,), resync=3600),  # type: ignore[arg-type]
                          Recorder(kube, "test", "test"))  # type: ignore[arg-type]
        controller = Periodic()
        stop = asyncio.Event()
        running = asyncio.create_task(Manager(runtime, [controller], Health()).run(stop))
        await asyncio.wait_for(controller.settled.wait(), 10)
        stop.set()
        assert await asyncio.wait_for(running, 10) == 0
        return controller.passes

    passes = asyncio.run(scenario())
    assert len(passes) == 3 and all(b - a >= 0.2 for a, b in itertools.pairwise(passes))
