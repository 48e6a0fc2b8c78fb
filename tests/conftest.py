"""Session-scoped test-bed fixtures: oci_registry, auth_registry, kube, rollouts, argocd_cmp_server, node, test_app.

See docs/test-bed.md ("Fixtures") for what each starts and how to use it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests import parallel
from tests.testbed import hoststate
from tests.testbed.argocd import ARGOCD_VERSIONS
from tests.testbed.cmp import CmpServer, start_cmp_server
from tests.testbed.distribution import AuthRegistry, start_distribution
from tests.testbed.kube import PERSON, KubeTestBed, start_kube
from tests.testbed.node import NodeTestBed, start_node
from tests.testbed.registry import OciRegistry, start_registry
from tests.testbed.rollouts import RolloutStandIn, start_rollouts
from tests.testbed.testapp import build_test_app

# CI replays a fixed set of examples (a red build must mean a change broke something, not a new draw);
# developers get fresh random examples. `HYPOTHESIS_PROFILE=dev` in CI explores like a developer run.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def testbed_dir() -> Iterator[Path]:
    """One short temp dir for every test-bed server's data, sockets and logs (unix sockets need short paths).

    Kept after the session when APPRAFTER_KEEP_TESTBED=1 (to read the servers' logs)."""
    path = Path(tempfile.mkdtemp(prefix="apprafter-bed-", dir="/tmp"))
    try:
        yield path
    finally:
        if os.environ.get("APPRAFTER_KEEP_TESTBED") != "1":
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def oci_registry(testbed_dir: Path) -> Iterator[OciRegistry]:
    """go-containerregistry's in-memory registry on 127.0.0.1: `.url` "127.0.0.1:PORT", `.host`, `.port`."""
    reg = start_registry(testbed_dir)
    try:
        yield reg
    finally:
        reg.process.stop()


@pytest.fixture(scope="session", params=["htpasswd", "token"])
def auth_registry(request: pytest.FixtureRequest, testbed_dir: Path) -> Iterator[AuthRegistry]:
    """Debian's docker-registry on 127.0.0.1 wanting credentials: HTTP Basic (htpasswd) or the token protocol."""
    reg = start_distribution(testbed_dir / f"distribution-{request.param}", request.param)
    try:
        yield reg
    finally:
        reg.stop()


@pytest.fixture(scope="session")
def kube(testbed_dir: Path) -> Iterator[KubeTestBed]:
    """etcd + kube-apiserver on 127.0.0.1 with a system:masters token, a token user PERSON (no roles) and every
    pinned CRD Established."""
    bed = start_kube(testbed_dir / "kube", users={PERSON: ()})
    try:
        yield bed
    finally:
        bed.stop()


@pytest.fixture(scope="session")
def rollouts(kube: KubeTestBed) -> Iterator[RolloutStandIn]:
    """On the bare `kube` (no controllers run), every Deployment of ours marked rolled out as soon as it is written
    (tests/testbed/rollouts.py): what the operator's health needs to call an Application Ready there."""
    stand_in = start_rollouts(kube)
    try:
        yield stand_in
    finally:
        stand_in.stop()


StartCmpServer = Callable[..., CmpServer]


@pytest.fixture(scope="session", params=ARGOCD_VERSIONS, ids=[f"argocd-{v}" for v in ARGOCD_VERSIONS])
def argocd_cmp_server(request: pytest.FixtureRequest, testbed_dir: Path) -> Iterator[StartCmpServer]:
    """Factory: start(plugin_dir, path=[...], env={...}, socket_dir=None) -> CmpServer running Argo CD's
    own plugin server for plugin_dir/plugin.yaml, of each supported Argo CD version in turn (the tests that use it
    run once per version). Servers live until the session ends (or .stop())."""
    version = str(request.param)
    servers: list[CmpServer] = []
    counter = itertools.count()

    def start(
        plugin_dir: Path | str,
        *,
        path: Sequence[str | os.PathLike[str]] = (),
        env: dict[str, str] | None = None,
        socket_dir: Path | None = None,
        **kw: Any,
    ) -> CmpServer:
        server = start_cmp_server(
            Path(plugin_dir),
            testbed_dir / f"cmp-{version}-{next(counter)}",
            path=path,
            env=env,
            socket_dir=socket_dir,
            version=version,
            **kw,
        )
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in reversed(servers):
            server.stop()


@pytest.fixture(scope="session")
def node(testbed_dir: Path, pytestconfig: pytest.Config) -> Iterator[NodeTestBed]:
    """A real single-node cluster (tests/testbed/node.py): API server, controller-manager, scheduler, containerd,
    kubelet, kube-proxy and CoreDNS in a network namespace of its own; the admin kubeconfig and a token user PERSON (no
    roles), every pinned CRD Established. Started once, on first use, after the run's bare-host tests (another worker
    may run them: tests/parallel.py); stopped at the end of the session."""
    parallel.wait_for_the_bare_host_tests(pytestconfig)
    bed = start_node(testbed_dir / "node", users={PERSON: ()})
    try:
        yield bed
    finally:
        bed.stop()


@pytest.fixture(scope="session")
def test_app(node: NodeTestBed) -> str:
    """The test workload's image (tests/testbed/testapp/), built with buildah and imported into the node; the
    name a pod uses with imagePullPolicy Never."""
    return node.import_image(build_test_app())


@pytest.fixture
def bare_host() -> dict[str, Any]:
    """The host as no node bed has changed it (hoststate.snapshot()). Tests using it run first in the session
    (see pytest_collection_modifyitems), and the shared `node` waits for them on any worker (tests/parallel.py);
    another live bed fails them."""
    hoststate.recover()  # a run that was killed must not count as "the host as it was"
    live = hoststate.live_beds()
    if live:
        pytest.fail(f"another node bed is running ({', '.join(b.dir for b in live)}): run the node tier under "
                    "`flock /tmp/apprafter-heavy.lock`", pytrace=False)
    return hoststate.snapshot()


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the xdist_group marks schedule() adds
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that compare the host before and after a bed of their own run before any test that starts the
    session's `node` (which changes the host's sysctls until the session ends); then the stack from zero on a node
    bed of its own (`empty_node`). Under xdist those are one unit and the shared node's tests another, on two
    workers side by side (the shared node starts once the bare-host tests are done), and the units each worker
    takes go longest first (tests/parallel.py)."""
    def first(item: pytest.Item) -> tuple[bool, bool]:
        fixtures = getattr(item, "fixturenames", ())
        return "bare_host" not in fixtures, "empty_node" not in fixtures
    items.sort(key=first)
    parallel.schedule(items, config)


def pytest_configure(config: pytest.Config) -> None:
    parallel.configure(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    parallel.unconfigure(config)


def pytest_report_header() -> str:
    from tests.reconciler.faults import SEED, SEED_ENV

    return f"fault tier seed: {SEED} ({SEED_ENV}={SEED} replays it)"
