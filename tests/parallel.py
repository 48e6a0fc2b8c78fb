"""How `make test` spreads the suite over pytest-xdist workers (docs/test-bed.md "Running in parallel").

Each worker is a pytest session of its own with its own session fixtures (its own `kube`, registry, plugin servers):
nothing is shared between workers but the host. Tests go to workers in units: every test on the session's shared node
(marked `node`, or using the `node` fixture) is one unit; every test that starts a node bed of its own (`bare_host`,
`empty_node`: the host checks and the stack from zero) is one unit beside it, started first, its bare-host tests
first; the shared node waits for those (`wait_for_the_bare_host_tests`: they compare the host with no bed on it);
every test of the fault tier is a unit (the kill test's shards run side by side); every other module is a unit, so
its module fixtures (an Argo CD loop, a bed of its own) start once. Units are handed out longest first, from the
seconds each took in a recorded run (tests/durations.json, rewritten by `APPRAFTER_RECORD_DURATIONS=1 make test`):
the two node units and the fault tier's kill test start at once and the short modules fill in around them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
NODE_GROUP = "node"
OWN_BEDS_GROUP = "node-own-beds"
# The fixtures of tests that start node beds of their own: the host's checks (which want no other bed live while
# they run) and the stack from an empty node (tests/images/test_bootstrap_node.py).
OWN_BED_FIXTURES = ("bare_host", "empty_node")
RUN_DIR_ENV = "APPRAFTER_RUN_DIR"  # the run's directory shared by its workers (the controller makes it)
RUN_DIR = pytest.StashKey[str]()
BARE_HOST_BOUND = 1800.0  # seconds the shared node waits for the bare-host tests before it fails, saying so


def unit_of(item: pytest.Item) -> str:
    """The unit a test is scheduled in: the beds of its own, the shared node, a fault test, or its module."""
    fixtures = getattr(item, "fixturenames", ())
    if any(name in fixtures for name in OWN_BED_FIXTURES):
        return OWN_BEDS_GROUP
    if item.get_closest_marker("node") is not None or "node" in fixtures:
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
    """Under `--dist loadgroup`: mark each test with its unit and order the units longest first, the beds of their
    own before all (a stable sort: the tests of a unit keep their order). That unit first means a worker that gets
    both node units runs it before the shared node, which waits for its bare-host tests: never a deadlock."""
    # a worker's config says `loadgroup` (xdist sets its `dist` to "no"); the controller collects nothing
    if not getattr(config.option, "loadgroup", False) and getattr(config.option, "dist", "no") != "loadgroup":
        return
    seconds = recorded_seconds()
    for item in items:
        item.add_marker(pytest.mark.xdist_group(unit_of(item)))
    first_seen = {unit: index for index, unit in reversed(list(enumerate(unit_of(i) for i in items)))}
    items.sort(key=lambda item: (unit_of(item) != OWN_BEDS_GROUP, -seconds.get(unit_of(item), 0.0),
                                 first_seen[unit_of(item)]))


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


class BareHostOrder:
    """The bare-host tests (the `bare_host` fixture's: the host compared with no bed on it) before the shared node
    starts, across workers: each of them, once finished on whichever worker ran it, leaves a mark in the run's
    directory, and the shared node's start waits for every mark of the tests this run has."""

    def __init__(self, config: pytest.Config) -> None:
        self.run_dir = Path(os.environ[RUN_DIR_ENV]) if os.environ.get(RUN_DIR_ENV) else None
        self.pending: frozenset[str] = frozenset()

    def mark(self, nodeid: str) -> Path:
        assert self.run_dir is not None
        return self.run_dir / ("bare-host-done-" + hashlib.sha256(nodeid.encode()).hexdigest()[:16])

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # every worker collects the whole run (after -k/-m deselection), so each knows which bare-host tests it has
        self.pending = frozenset(item.nodeid for item in session.items
                                 if "bare_host" in getattr(item, "fixturenames", ()))

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        if self.run_dir is not None and nodeid in self.pending:
            self.mark(nodeid).touch()  # passed, failed or skipped: it no longer looks at the host

    def wait(self) -> None:
        if self.run_dir is None or not self.pending:
            return
        deadline = time.monotonic() + BARE_HOST_BOUND
        while not all(self.mark(nodeid).exists() for nodeid in self.pending):
            if time.monotonic() > deadline:
                left = sorted(n for n in self.pending if not self.mark(n).exists())
                pytest.fail(f"the shared node waited {BARE_HOST_BOUND:.0f} s for the bare-host tests, which must run "
                            f"before it and did not finish: {', '.join(left)}", pytrace=False)
            time.sleep(0.2)  # the event is another worker's file; a poll of a local directory costs nothing


def wait_for_the_bare_host_tests(config: pytest.Config) -> None:
    """Before the session's shared node starts: under xdist, wait until every bare-host test of the run has
    finished on its worker (tests/conftest.py's `node` fixture); in one process they have run already."""
    order = config.pluginmanager.get_plugin("apprafter-bare-host-order")
    if isinstance(order, BareHostOrder) and hasattr(config, "workerinput"):
        order.wait()


def configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        # the controller of an xdist run: a directory its workers share, found through their inherited environment
        config.stash[RUN_DIR] = os.environ[RUN_DIR_ENV] = tempfile.mkdtemp(prefix="apprafter-run-")
    config.pluginmanager.register(BareHostOrder(config), "apprafter-bare-host-order")
    if os.environ.get("APPRAFTER_RECORD_DURATIONS") == "1" and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(DurationRecorder(), "apprafter-durations")


def unconfigure(config: pytest.Config) -> None:
    made = config.stash.get(RUN_DIR, None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop(RUN_DIR_ENV, None)


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
