"""`apprafter operator` as a real subprocess against the test bed: start, probe, read metrics, pause, kill."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.testbed.kube import KubeTestBed
from tests.testbed.procs import ManagedProcess, free_port, wait_for

FAST = ("--resync", "2", "--max-backoff", "2")
ROOT = Path(__file__).resolve().parents[2]  # where a test-only entry module is imported from


def records_namespace_for(name: str) -> str:
    """A namespace of its own for one operator's records (lifecycle.crd)."""
    return f"records-{name[:20]}-{uuid.uuid4().hex[:6]}"


class Operator:
    """One operator process; its log is in `log_path`, its ports on 127.0.0.1."""

    def __init__(self, bed: KubeTestBed, workdir: Path, args: Sequence[str] = (), name: str = "operator",
                 kubeconfig: Path | None = None, records_namespace: str | None = None,
                 entry: str = "apprafter") -> None:
        """`entry`: the module `python -m` runs (a test-only wrapper of `apprafter`, say)."""
        self.bed = bed
        self.name = name
        self.health_port, self.metrics_port = free_port(), free_port()
        # Its baselines and hostname records apart from every other operator's of the session: what one module
        # leaves behind (a hostname held) never reaches the next.
        self.records_namespace = records_namespace or records_namespace_for(name)
        bed.ensure_namespace(self.records_namespace)
        self.entry = entry
        self.argv = [sys.executable, "-m", entry, "operator", "--kubeconfig", str(kubeconfig or bed.kubeconfig),
                     "--bind-address", "127.0.0.1", "--health-port", str(self.health_port),
                     "--metrics-port", str(self.metrics_port), "--records-namespace", self.records_namespace, *args]
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
        self.proc = ManagedProcess(self.name, self.argv, log, env={**os.environ, **path, **(env or {})})
        if wait:
            try:
                wait_for(f"{self.name} /readyz", lambda: self._probe(wait), 60, self.proc, interval=0.1)
            except BaseException:
                # Never leave it running: an operator that is not ready yet still acts once it can (say, when a
                # later module grants its ServiceAccount more), racing the operator of that module.
                self.proc.stop()
                raise
        return self

    def _probe(self, wait: str) -> bool | None:
        resp = httpx.get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2)
        return True if resp.status_code == 200 or wait == "up" else None

    def readyz(self) -> tuple[int, str]:
        resp = httpx.get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2)
        return resp.status_code, resp.text.strip()

    def healthz(self) -> int:
        return httpx.get(f"http://127.0.0.1:{self.health_port}/healthz", timeout=2).status_code

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample: (name, sorted labels) -> value."""
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
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
