"""tests/parallel.py, the suite's spread over xdist workers: which unit a test is in, the order units start in, each
worker's ports — on real pytest items of a small suite, and a real run over two workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import parallel

pytest_plugins = ["pytester"]

SUITE = '''
import pytest

@pytest.fixture
def node():
    return "a node"

def test_plain():
    pass

def test_on_the_node(node):
    pass

@pytest.mark.node
def test_marked_node():
    pass

@pytest.mark.faults
@pytest.mark.parametrize("shard", range(2))
def test_killed(shard):
    pass
'''


@pytest.fixture(autouse=True)
def markers(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    node: the node tier\n    faults: the fault tier\n")


def test_units_node_tests_together_fault_tests_alone_the_rest_by_module(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_units=SUITE)
    units = {item.name: parallel.unit_of(item) for item in pytester.getitems(pytester.path / "test_units.py")}
    assert units["test_plain"] == "test_units.py"
    assert units["test_on_the_node"] == units["test_marked_node"] == parallel.NODE_GROUP
    assert units["test_killed[0]"] != units["test_killed[1]"]
    assert units["test_killed[0]"].endswith("test_units.py::test_killed[0]")


def test_tests_on_beds_of_their_own_are_one_unit_that_starts_first(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    pytester.makeconftest("import pytest\n\n@pytest.fixture\ndef bare_host():\n    return {}\n\n"
                          "@pytest.fixture\ndef empty_node():\n    return 'a bed'\n\n"
                          "@pytest.fixture\ndef node():\n    return 'the node'\n")
    pytester.makepyfile(test_shared="def test_s(node):\n    pass\n",
                        test_own="def test_boot(empty_node):\n    pass\ndef test_host(bare_host):\n    pass\n")
    recorded = tmp_path / "durations.json"
    recorded.write_text(json.dumps({parallel.NODE_GROUP: 900.0, parallel.OWN_BEDS_GROUP: 500.0}))
    monkeypatch.setattr(parallel, "DURATIONS", recorded)
    items = [*pytester.getitems(pytester.path / "test_shared.py"), *pytester.getitems(pytester.path / "test_own.py")]
    assert [parallel.unit_of(item) for item in items] == [parallel.NODE_GROUP, *[parallel.OWN_BEDS_GROUP] * 2]
    config = items[0].config
    monkeypatch.setattr(config.option, "dist", "loadgroup", raising=False)
    parallel.schedule(items, config)
    assert [item.name for item in items] == ["test_boot", "test_host", "test_s"]  # first although shorter


def test_units_start_longest_first_and_keep_their_tests_order(pytester: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytester.makepyfile(test_a="def test_a1():\n    pass\ndef test_a2():\n    pass\n",
                        test_b="def test_b1():\n    pass\n", test_c="def test_c1():\n    pass\n")
    recorded = tmp_path / "durations.json"
    recorded.write_text(json.dumps({"test_b.py": 30.0, "test_a.py": 5.0}))
    monkeypatch.setattr(parallel, "DURATIONS", recorded)
    items = [*pytester.getitems(pytester.path / "test_c.py"), *pytester.getitems(pytester.path / "test_a.py"),
             *pytester.getitems(pytester.path / "test_b.py")]
    config = items[0].config
    monkeypatch.setattr(config.option, "dist", "loadgroup", raising=False)
    parallel.schedule(items, config)
    assert [item.name for item in items] == ["test_b1", "test_a1", "test_a2", "test_c1"]  # c never recorded: last
    assert all(item.get_closest_marker("xdist_group") for item in items)


def test_without_loadgroup_nothing_is_reordered(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a1():\n    pass\n", test_b="def test_b1():\n    pass\n")
    items = [*pytester.getitems(pytester.path / "test_b.py"), *pytester.getitems(pytester.path / "test_a.py")]
    parallel.schedule(items, items[0].config)
    assert [item.name for item in items] == ["test_b1", "test_a1"]
    assert not any(item.get_closest_marker("xdist_group") for item in items)


def test_each_worker_has_its_own_ports_below_the_ephemeral_range() -> None:
    ranges = [set(parallel.port_range(worker)) for worker in range(8)]
    assert all(not a & b for i, a in enumerate(ranges) for b in ranges[i + 1:])
    assert max(max(r) for r in ranges) < 32768  # net.ipv4.ip_local_port_range starts there


def test_a_real_run_puts_the_node_tests_on_one_worker(pytester: pytest.Pytester) -> None:
    """Two xdist workers over a suite whose node tests record the worker they ran on."""
    pytester.makeconftest('''
import os
import pytest
from tests import parallel

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    parallel.schedule(items, config)
''')
    body = SUITE.replace("def test_on_the_node(node):\n    pass", "def test_on_the_node(node):\n"
                         "    open('workers', 'a').write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')")
    body = body.replace("def test_marked_node():\n    pass", "def test_marked_node():\n"
                        "    open('workers', 'a').write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')")
    pytester.makepyfile(test_units="import os\n" + body, test_more="def test_1():\n    pass\ndef test_2():\n    pass\n")
    pytester.syspathinsert(Path(__file__).parent.parent)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder",
                                           "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=7)
    workers = (pytester.path / "workers").read_text().split()
    assert len(workers) == 2 and len(set(workers)) == 1
    assert "test_units.py::test_on_the_node@node" in result.stdout.str()  # xdist saw the group


def test_the_shared_node_starts_only_once_the_bare_host_tests_on_another_worker_are_done(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers, the bare-host test on one and the shared node's test on the other, both under way at once: the
    node's start (after `wait_for_the_bare_host_tests`) comes after the bare-host test's end, never during it."""
    pytester.makeconftest('''
import os, time
from pathlib import Path
import pytest
from tests import parallel

LOG = Path("order")

def log(line):
    with LOG.open("a") as f:
        f.write(f"{line} {os.environ['PYTEST_XDIST_WORKER']}\\n")

def seen(what, bound):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if what in LOG.read_text():
            return True
        time.sleep(0.02)
    return False

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    parallel.schedule(items, config)

def pytest_configure(config):
    parallel.configure(config)

def pytest_unconfigure(config):
    parallel.unconfigure(config)

@pytest.fixture(scope="session")
def node(pytestconfig):
    log("node-asked")
    parallel.wait_for_the_bare_host_tests(pytestconfig)
    log("node-started")
    return "the node"

@pytest.fixture
def bare_host():
    log("bare-started")
    assert seen("node-asked", 60)  # both under way at once
    # the node must not start while this test looks at the host: a window to see it start if nothing held it
    early = seen("node-started", 2)
    log(f"bare-ended early={early}")
    return {}
''')
    pytester.makepyfile(test_own="def test_host(bare_host):\n    pass\n",
                        test_shared="def test_s(node):\n    pass\n")
    (pytester.path / "order").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent.parent))  # this checkout's `tests`, in the workers too
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    lines = (pytester.path / "order").read_text().splitlines()
    events = [line.split()[0] for line in lines]
    assert "bare-ended" in events and "node-started" in events, lines
    assert events.index("bare-ended") < events.index("node-started"), lines
    assert "early=False" in next(line for line in lines if line.startswith("bare-ended")), lines
    workers = {line.split()[0]: line.split()[-1] for line in lines}
    assert workers["bare-started"] != workers["node-started"], lines  # side by side, on two workers
