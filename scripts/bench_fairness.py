"""Benchmark: fairness between tenants (issue 24 item 6). One good Application's time to Ready in its own namespace
— alone, with 50 failing heavy (~0.5 MB) Applications of another tenant queued just before it, and after an operator
restart with all of them queued — measured side by side in one run on a loopback test bed; the ratios to alone are
the figures (goal: within 2x). Also prints the per-namespace queue wait the operator reports
(apprafter_workqueue_namespace_queue_duration_seconds).
Usage: .venv/bin/python scripts/bench_fairness.py [--heavy 50] [--runs 3] [--workers 8]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compatibility.crd import ALL_CRDS  # noqa: E402 - after the repo root is importable
from renderer.crds import crd_documents  # noqa: E402
from renderer.emit import dump_stream  # noqa: E402
from renderer.manifests import KINDS  # noqa: E402
from tests.testbed.kube import KubeTestBed, start_kube  # noqa: E402
from tests.testbed.procs import ManagedProcess, free_port, wait_for  # noqa: E402
from toolchain.tools import crd_files  # noqa: E402

API = "apprafter.io/v1alpha1"
GOOD = {"image": "ghcr.io/acme/good:1.0.0", "replicas": 2, "expose": {"port": 8080, "network": "public"},
        "env": {"LOG_LEVEL": "info"}}
# ~0.5 MB: thousands of env entries, and one claim reference to a need it does not declare (refused after the
# whole document was read and checked: the expensive way to fail)
HEAVY = {**GOOD, "env": {**{f"K{i}": "v" * 100 for i in range(4200)}, "DB": {"claim": "pg/url"}}}


def application(namespace: str, name: str, base: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Application", "metadata": {"name": name, "namespace": namespace},
            "spec": {"environment": "prod", "base": base, "environments": {"prod": {}}}}


def phase(bed: KubeTestBed, namespace: str, name: str) -> str | None:
    obj = bed.get(API, "Application", name, namespace) or {}
    st = obj.get("status") or {}
    return str(st.get("phase")) if st.get("observedGeneration") == obj.get("metadata", {}).get("generation") else None


class Operator:
    def __init__(self, bed: KubeTestBed, work: Path, workers: int) -> None:
        self.bed, self.work, self.workers, self.starts = bed, work, workers, 0
        self.health, self.metrics = free_port(), free_port()
        self.proc: ManagedProcess | None = None

    def start(self) -> float:
        """Start; the moment it is ready."""
        self.starts += 1
        self.proc = ManagedProcess("operator", [
            sys.executable, "-m", "apprafter", "operator", "--kubeconfig", str(self.bed.kubeconfig),
            "--bind-address", "127.0.0.1", "--health-port", str(self.health), "--metrics-port", str(self.metrics),
            "--workers", str(self.workers), "--no-leader-elect", "--no-platform-stack", "--log-level", "warning"],
            self.work / f"operator.{self.starts}.log", env=dict(os.environ))
        wait_for("operator ready", lambda: httpx.get(f"http://127.0.0.1:{self.health}/readyz").status_code == 200
                 or None, 60, self.proc, interval=0.05)
        return time.perf_counter()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(grace=10)

    def waits(self) -> dict[str, tuple[float, float]]:
        """namespace -> (keys taken, seconds waited in all) from the per-namespace queue wait histogram."""
        text = httpx.get(f"http://127.0.0.1:{self.metrics}/metrics", timeout=10).text
        out: dict[str, list[float]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name.startswith("apprafter_workqueue_namespace_queue_duration_seconds_"):
                    entry = out.setdefault(s.labels["namespace"], [0.0, 0.0])
                    if s.name.endswith("_count"):
                        entry[0] += s.value
                    elif s.name.endswith("_sum"):
                        entry[1] += s.value
        return {ns: (c, t) for ns, (c, t) in out.items()}


def ready_after(bed: KubeTestBed, namespace: str, name: str, since: float) -> float:
    wait_for(f"{namespace}/{name} Ready", lambda: phase(bed, namespace, name) == "Ready" or None, 600, interval=0.02)
    return time.perf_counter() - since


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heavy", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="apprafter-fair-", dir="/tmp") as tmp:
        work = Path(tmp)
        bed = start_kube(work / "kube", install_crds=False)
        op = Operator(bed, work, args.workers)
        try:
            bed.install_crds([f for f in crd_files() if any(k.plural in f.name for k in KINDS)])
            (work / "crds.yaml").write_text(dump_stream(crd_documents(ALL_CRDS)))
            bed.install_crds([work / "crds.yaml"])
            for ns in ("good", "tenant"):
                bed.ensure_namespace(ns)
            op.start()
            alone, flooded, restarted, restart_alone = [], [], [], []
            waits: dict[str, tuple[float, float]] = {}
            for run in range(args.runs):
                start = time.perf_counter()
                bed.apply(application("good", f"alone{run}", GOOD))
                alone.append(ready_after(bed, "good", f"alone{run}", start))

                with concurrent.futures.ThreadPoolExecutor(8) as pool:  # the flood lands first
                    list(pool.map(lambda i, r=run: bed.apply(application("tenant", f"heavy{r}-{i}", HEAVY)),
                                  range(args.heavy)))
                start = time.perf_counter()
                bed.apply(application("good", f"flooded{run}", GOOD))
                flooded.append(ready_after(bed, "good", f"flooded{run}", start))
                wait_for("the flood refused", lambda r=run: all(phase(bed, "tenant", f"heavy{r}-{i}") == "Failed"
                                                                for i in range(args.heavy)) or None, 600, interval=1)
                waits = op.waits()  # before the restart resets the operator's metrics

                op.stop()  # restarted with every Application queued (heavy ones of every run so far)
                bed.apply(application("good", f"restarted{run}", GOOD))
                restarted.append(ready_after(bed, "good", f"restarted{run}", op.start()))
                op.stop()
                for i in range(args.heavy):  # and the same restart without the heavy ones, for the ratio
                    bed.delete(API, "Application", f"heavy{run}-{i}", "tenant")
                bed.apply(application("good", f"restart-alone{run}", GOOD))
                restart_alone.append(ready_after(bed, "good", f"restart-alone{run}", op.start()))
            load = os.getloadavg()
            a, f, r, ra = (statistics.median(x) for x in (alone, flooded, restarted, restart_alone))
            print(f"good Application to Ready (median of {args.runs}; load {load[0]:.1f} {load[1]:.1f} "
                  f"{load[2]:.1f}): alone {a * 1000:.0f} ms; with {args.heavy} failing ~0.5 MB Applications of "
                  f"another tenant queued first {f * 1000:.0f} ms ({f / a:.1f}x alone)")
            print(f"after a restart with them queued {r * 1000:.0f} ms from ready, vs {ra * 1000:.0f} ms without them "
                  f"({r / ra:.1f}x)")
            print("queue wait by namespace (keys, mean): " + ", ".join(
                f"{ns} {int(c)} keys {1000 * t / max(c, 1):.0f} ms" for ns, (c, t) in sorted(waits.items())))
            print("runs (ms): alone " + " ".join(f"{x * 1000:.0f}" for x in alone) + "; flooded " + " ".join(
                f"{x * 1000:.0f}" for x in flooded) + "; restarted " + " ".join(f"{x * 1000:.0f}" for x in restarted)
                + "; restart alone " + " ".join(f"{x * 1000:.0f}" for x in restart_alone))
        finally:
            op.stop()
            bed.stop()


if __name__ == "__main__":
    main()
