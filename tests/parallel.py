"""How `make test` spreads the suite over pytest-xdist workers (docs/test-bed.md "Running in parallel").

Each worker is a pytest session of its own with its own session fixtures (its own `kube`, registry, plugin servers):
nothing is shared between workers but the host. Tests go to workers in units: every test of the node tier (marked
`node`, or using the `node` fixture) is one unit, because one real node runs at a time on this machine (its kubelet
owns host-wide sysctls, and a second would double the heaviest bed); every test of the fault tier is a unit (the
kill test's shards run side by side); every other module is a unit, so its module fixtures (an Argo CD loop, a bed
of its own) start once. Units are handed out longest first, from the seconds each
took in a recorded run (tests/durations.json, rewritten by `APPRAFTER_RECORD_DURATIONS=1 make test`): the node
tier and the fault tier's kill test start at once and the short modules fill in around them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
NODE_GROUP = "node"


def unit_of(item: pytest.Item) -> str:
    """The unit a test is scheduled in: the node tier, or its module."""
    if item.get_closest_marker("node") is not None or "node" in getattr(item, "fixturenames", ()):
        return NODE_GROUP
    if item.get_closest_marker("faults") is not None:
        return item.nodeid  # each long on its own (the kill shards side by side), and no module fixtures to share
    return item.nodeid.split("::", 1)[0]


def recorded_seconds() -> dict[str, float]:
    """Seconds per unit in the recorded run; a unit not recorded counts as 0 (it goes last)."""
    try:
        raw = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return {}
    return {str(unit): float(seconds) for unit, seconds in raw.items()}


def schedule(items: list[pytest.Item], config: pytest.Config) -> None:
    """Under `--dist loadgroup`: mark each test with its unit and order the units longest first (a stable sort: the
    tests of a unit keep their order, so the node tier's bare-host tests still run before its shared node)."""
    # a worker's config says `loadgroup` (xdist sets its `dist` to "no"); the controller collects nothing
    if not getattr(config.option, "loadgroup", False) and getattr(config.option, "dist", "no") != "loadgroup":
        return
    seconds = recorded_seconds()
    for item in items:
        item.add_marker(pytest.mark.xdist_group(unit_of(item)))
    first_seen = {unit: index for index, unit in reversed(list(enumerate(unit_of(i) for i in items)))}
    items.sort(key=lambda item: (-seconds.get(unit_of(item), 0.0), first_seen[unit_of(item)]))


def worker_index() -> int:
    """0 for the controller or a run without workers, else the xdist worker's number (gw0 → 0, gw1 → 1, ...)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name.removeprefix("gw")) if name.startswith("gw") else 0


def port_range(worker: int | None = None, width: int = 1000, base: int = 20000) -> Sequence[int]:
    """The loopback ports a worker's servers take (below Linux's ephemeral range, 32768-60999, so a port the kernel
    hands to a client or to a `-port 0` server is never one of them, and two workers never pick the same one)."""
    index = worker_index() if worker is None else worker
    start = base + index * width
    return range(start, start + width)


class DurationRecorder:
    """`APPRAFTER_RECORD_DURATIONS=1 make test` rewrites tests/durations.json: the seconds each unit took in this
    run (setup, call and teardown of its tests), as the controller hears them from the workers."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        unit = nodeid.rsplit("@", 1)[1] if "@" in nodeid else nodeid.split("::", 1)[0]
        self.seconds[unit] = self.seconds.get(unit, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            return  # the controller writes it, from every worker's reports
        ordered = dict(sorted(((u, round(s, 1)) for u, s in self.seconds.items()), key=lambda p: (-p[1], p[0])))
        DURATIONS.write_text(json.dumps(ordered, indent=1) + "\n")


def configure(config: pytest.Config) -> None:
    if os.environ.get("APPRAFTER_RECORD_DURATIONS") == "1" and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(DurationRecorder(), "apprafter-durations")


LONG_POLE_NICE = -5  # 3 times the CPU share of a process at 0 on contended cores (CFS weights 3121 : 1024)


def favour_the_long_pole() -> None:
    """Under xdist, give the worker that starts a node bed (and what it starts after: the node's servers, containerd
    and its pods, inherit it) a higher CPU priority than the other workers: the node tier is one serial unit and the
    suite's long pole, mostly waiting on its pods' CPU, while the other workers have room to spare before it ends
    (docs/development.md "The suite's time budget"). Outside xdist, nothing changes."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if os.getpriority(os.PRIO_PROCESS, 0) > LONG_POLE_NICE:
        os.setpriority(os.PRIO_PROCESS, 0, LONG_POLE_NICE)  # the bed runs as root: raising a priority is allowed
