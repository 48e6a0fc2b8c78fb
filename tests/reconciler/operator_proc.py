"""`apprafter operator` as a real subprocess against the test bed: start, probe, read metrics, pause, kill; and the
one fixture factory every module that runs an operator for its tests uses (operator_fixture)."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.testbed.forkserver import ForkServer
from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import ManagedProcess, free_port, wait_for

if TYPE_CHECKING:
    from tests.testbed.node import NodeTestBed

TRACE_ENV, TRACED = "APPRAFTER_TEST_TRACE", "tests.reconciler.traced_operator"
# Resync every 10 s (not 2): a module's operator watches every namespace of its worker's API server, where earlier
# modules' Applications stay, and each resync reconciles them all (≈ 15 ms of CPU each): at 2 s that was most of a
# core for the whole module. Tests wait on watch events; the few that wait for a resync wait up to 30-60 s.
FAST = ("--resync", "10", "--max-backoff", "2")
# No test operator asks a registry outside the bed (an example's `imagePolicy.resolve: digest` names ghcr.io): the
# platform's allowlist (--image-registries) keeps image updates to the bed's own registries on the loopback.
BED_REGISTRIES = ("--image-registries", "127.0.0.1:*", "--image-registries", "localhost:*")
ROOT = Path(__file__).resolve().parents[2]  # where a test-only entry module is imported from
# On a node bed a test operator's exposed pods stop at once: no Gateway in front of them drains (the pause is the
# platform's gateway.drainSeconds). The bootstrapped stack keeps the default and proves it through Traefik
# (tests/images/test_bootstrap_node.py); here the pause would only lengthen every namespace deletion by 5 s. The
# node's only Gateway implementation is Traefik (tests/testbed/traefik.py): what `websocket` renders follows it.
NODE_PLATFORM = "gateway: {drainSeconds: 0, implementation: traefik}\n"
# Where a test rolls an app's pods under a request loop through its Service (the rotation steps of the pg and redis
# node tests): a replaced pod keeps answering 2 s after its deletion, until kube-proxy dropped it from the Service
# (without it, 3 requests of the loop were refused by the stopped pod, none a refused login).
ROLL_DRAIN = "gateway: {drainSeconds: 2, implementation: traefik}\n"


def _on_a_node(bed: KubeTestBed) -> bool:
    from tests.testbed.node import NodeTestBed

    return isinstance(bed, NodeTestBed)


FORK_ENV = "APPRAFTER_TEST_FORK"  # 0: every operator a fresh `python -m` (its imports and all) instead of a fork
_forkserver: ForkServer | None = None


def forkserver() -> ForkServer | None:
    """This worker's fork server (tests/testbed/forkserver.py), started on first use; None when FORK_ENV is 0."""
    global _forkserver
    if os.environ.get(FORK_ENV) == "0":
        return None
    if _forkserver is None:
        workdir = Path(tempfile.mkdtemp(prefix="apprafter-fork-"))
        _forkserver = ForkServer(workdir)
        atexit.register(shutil.rmtree, workdir, True)  # registered first: runs after the server's stop
        atexit.register(_forkserver.stop)
    return _forkserver


def records_namespace_for(name: str) -> str:
    """A namespace of its own for one operator's records (lifecycle.crd)."""
    return f"records-{name[:20]}-{uuid.uuid4().hex[:6]}"


class Operator:
    """One operator process; its log is in `log_path`, its ports on 127.0.0.1."""

    def __init__(self, bed: KubeTestBed, workdir: Path, args: Sequence[str] = (), name: str = "operator",
                 kubeconfig: Path | None = None, records_namespace: str | None = None,
                 entry: str = "apprafter", inside: NodeTestBed | None = None) -> None:
        """`entry`: the module `python -m` runs (a test-only wrapper of `apprafter`, say); with APPRAFTER_TEST_TRACE
        set, `apprafter` runs traced (tests/reconciler/traced_operator.py). `inside`: run in that node bed's network
        namespace, as a pod is, where cluster IPs answer (nsenter, not forked; the API server at its address there,
        as the bed's admin unless `kubeconfig` says; its ports probed from inside)."""
        self.bed = bed
        self.inside = inside
        if inside is not None and kubeconfig is None:
            workdir.mkdir(parents=True, exist_ok=True)
            kubeconfig = inside.inner_kubeconfig(workdir / f"{name}.inside.kubeconfig", f"{name}-inside",
                                                 ["system:masters"])
        self.name = name
        self.health_port, self.metrics_port = free_port(), free_port()
        # Its baselines and hostname records apart from every other operator's of the session: what one module
        # leaves behind (a hostname held) never reaches the next.
        self.records_namespace = records_namespace or records_namespace_for(name)
        bed.ensure_namespace(self.records_namespace)
        self.entry = TRACED if entry == "apprafter" and os.environ.get(TRACE_ENV) else entry
        self.argv = [sys.executable, "-m", self.entry, "operator", "--kubeconfig", str(kubeconfig or bed.kubeconfig),
                     "--bind-address", "127.0.0.1", "--health-port", str(self.health_port),
                     "--metrics-port", str(self.metrics_port), "--records-namespace", self.records_namespace,
                     *BED_REGISTRIES, *args]
        if _on_a_node(bed) and "--platform" not in args:
            workdir.mkdir(parents=True, exist_ok=True)
            (workdir / "platform.yaml").write_text(NODE_PLATFORM)
            self.argv[4:4] = ["--platform", str(workdir / "platform.yaml")]
        if inside is not None:
            self.argv = inside.nsenter(*self.argv)
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{name}.log"
        self.proc: ManagedProcess | None = None
        self.starts = 0

    def start(self, wait: str | None = "ready", env: dict[str, str] | None = None) -> Operator:
        """Start (again), with `env` added to the environment; wait until /readyz answers 200 ("ready") or the probe
        port answers at all ("up")."""
        self.starts += 1
        log = self.log_path.with_suffix(f".{self.starts}.log")
        path = {"PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])} \
            if self.entry != "apprafter" else {}
        self.proc = ManagedProcess(self.name, self.argv, log, env={**os.environ, **path, **(env or {})},
                                   forkserver=None if self.inside else forkserver())
        if wait:
            try:
                wait_for(f"{self.name} /readyz", lambda: self._probe(wait), 60, self.proc, interval=0.1)
            except BaseException:
                # Never leave it running: an operator that is not ready yet still acts once it can (say, when a
                # later module grants its ServiceAccount more), racing the operator of that module.
                self.proc.stop()
                raise
        return self

    def _get(self, port: int, path: str, timeout: float) -> tuple[int, str]:
        url = f"http://127.0.0.1:{port}{path}"
        resp = self.inside.request("GET", url, timeout=timeout) if self.inside else httpx.get(url, timeout=timeout)
        return resp.status_code, resp.text

    def _probe(self, wait: str) -> bool | None:
        code, _ = self._get(self.health_port, "/readyz", 2)
        return True if code == 200 or wait == "up" else None

    def readyz(self) -> tuple[int, str]:
        code, text = self._get(self.health_port, "/readyz", 2)
        return code, text.strip()

    def healthz(self) -> int:
        return self._get(self.health_port, "/healthz", 2)[0]

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample: (name, sorted labels) -> value."""
        text = self._get(self.metrics_port, "/metrics", 5)[1]
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        return sum(v for (n, ls), v in self.metrics().items()
                   if n == name and all(dict(ls).get(k) == want for k, want in labels.items()))

    def reconciles(self) -> float:
        return self.metric("apprafter_reconcile_total", controller="application")

    def writes(self) -> float:
        return self.metric("apprafter_kube_writes_total")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.popen.poll() is None

    def log(self) -> str:
        return self.proc.log_text() if self.proc else ""

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        os.killpg(self.proc.popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL: no clean-up, like a node failure."""
        assert self.proc is not None
        self.signal(signal.SIGKILL)
        self.proc.popen.wait(10)
        self.proc.stop()

    def terminate(self, timeout: float = 15) -> int:
        """SIGTERM and wait for the exit code."""
        assert self.proc is not None
        self.signal(signal.SIGTERM)
        code = self.proc.popen.wait(timeout)
        self.proc.stop()
        return code

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


class Fixture(NamedTuple):
    """In operator_fixture's arguments: the value of the fixture of this name."""

    name: str


def _value(request: pytest.FixtureRequest, given: str | Fixture) -> str:
    return str(request.getfixturevalue(given.name)) if isinstance(given, Fixture) else given


def operator_fixture(*args: str | Fixture, bed: str = "bed", name: str = "operator",
                     rbac: Sequence[str | Fixture] | None = None, argocd: str | Fixture | None = None,
                     crds: bool = False, requires: Sequence[str] = (), inside: bool = False) -> Any:
    """One operator process for a module, as the fixture `operator` (`operator = operator_fixture(...)`):
    `apprafter operator` with `args` on the bed the fixture `bed` names (`bed`, `kube`, `node`); as the bed's admin,
    or with `rbac` (namespaces; () for the chart's own) as its ServiceAccount bound by the operator chart's RBAC
    there, in its records namespace and in `argocd` (tests/testbed/gitops.py chart_operator); our CRDs installed
    first with `crds`; the fixtures `requires` set up before it starts (and torn down after it stops); with `inside`,
    in the node bed's network namespace, as the bed's admin (Operator's `inside`). A Fixture(name)
    in the arguments stands for that fixture's value. Started once ready, stopped at the module's end."""

    @pytest.fixture(scope="module", name="operator")
    def operator(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
        """The module's operator (tests/reconciler/operator_proc.py operator_fixture)."""
        from tests.reconciler.conftest import install_our_crds
        from tests.testbed.gitops import CHART_ARGOCD_NAMESPACE, OPERATOR_NAMESPACE, chart_operator

        for fixture in requires:
            request.getfixturevalue(fixture)
        kube: KubeTestBed = request.getfixturevalue(bed)
        workdir = Path(str(tmp_path_factory.mktemp(name)))
        if crds:
            install_our_crds(kube, workdir)
        argv = [_value(request, a) for a in args]
        if inside:
            from tests.testbed.node import NodeTestBed

            assert rbac is None and isinstance(kube, NodeTestBed), "inside: the node bed, as its admin"
            op = Operator(kube, workdir, argv, name=name, inside=kube)
        elif rbac is None:
            op = Operator(kube, workdir, argv, name=name)
        else:
            op = chart_operator(kube, workdir, argv, tuple(_value(request, n) for n in rbac) or (OPERATOR_NAMESPACE,),
                                name=name, argocd_namespace=_value(request, argocd or CHART_ARGOCD_NAMESPACE))
        op.start()
        try:
            yield op
        finally:
            op.stop()

    return operator
