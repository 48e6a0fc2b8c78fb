"""Benchmark: `apprafter operator` on a loopback test bed (etcd + kube-apiserver).

Creates N Applications (no needs) at once and times until all are Ready; reports apps/s, per-reconcile
p50/p99 from the operator's own histogram, write requests per app, and write requests per no-op resync
(from the API server's apiserver_request_total, leases counted apart). Side by side in the same run, the
floor: the same children and status server-side applied directly by this script with the same concurrency.
Usage: .venv/bin/python scripts/bench_operator.py [--apps 200] [--workers 8] [--resync 15]
BENCH_OPERATOR_LAUNCHER=wrapper.py runs the operator as `python wrapper.py ARGS...` (e.g. under cProfile).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compatibility.inputs import parse_cr  # noqa: E402
from lifecycle.crd import OPERATOR_CRDS  # noqa: E402 - after the repo root is importable
from renderer.crds import crd_documents  # noqa: E402
from renderer.emit import dump_stream  # noqa: E402
from renderer.manifests import KINDS  # noqa: E402
from renderer.render import render_loaded  # noqa: E402
from tests.testbed.kube import KubeTestBed, start_kube  # noqa: E402
from tests.testbed.procs import ManagedProcess, free_port, wait_for  # noqa: E402
from toolchain.tools import crd_files  # noqa: E402

API = "apprafter.io/v1alpha1"
FLUX_KUSTOMIZATIONS_PER_S = 4.0  # the anchor the issue names (Flux's own benchmark)
WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE")
BASE = {"image": "ghcr.io/acme/bench:1.0.0", "replicas": 2, "expose": {"port": 8080, "network": "public"},
        "env": {"LOG_LEVEL": "info"}}


def application(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Application", "metadata": {"name": name, "namespace": namespace},
            "spec": {"environment": "prod", "base": BASE, "environments": {"prod": {}}}}


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def apiserver_writes(bed: KubeTestBed) -> dict[str, float]:
    """Write requests so far by resource, from the API server's own counter (every client, itself included)."""
    out: dict[str, float] = {}
    for name, labels, value in samples(bed.http.get("/metrics").text):
        if name == "apiserver_request_total" and labels.get("verb") in WRITE_VERBS:
            key = f"{labels.get('resource')}/{labels.get('subresource')}" if labels.get("subresource") \
                else str(labels.get("resource"))
            out[key] = out.get(key, 0.0) + value
    return out


def quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """histogram_quantile over cumulative (le, count) buckets, linear within a bucket like Prometheus."""
    total = buckets[-1][1]
    rank, prev_le, prev_count = q * total, 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_count) / max(count - prev_count, 1e-9))
        prev_le, prev_count = le, count
    return prev_le


def operator_metrics(port: int) -> dict[str, Any]:
    out: dict[str, Any] = {"buckets": [], "reconciles": 0.0, "writes": 0.0, "by_resource": {}}
    for name, labels, value in samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text):
        if name == "reconcile_duration_seconds_bucket" and labels.get("controller") == "application":
            out["buckets"].append((float(labels["le"]), value))
        elif name == "reconcile_total" and labels.get("controller") == "application":
            out["reconciles"] += value
        elif name == "apprafter_kube_writes_total" and labels.get("resource") != "leases":
            out["writes"] += value
            key = f"{labels['verb']} {labels['resource']}"
            out["by_resource"][key] = out["by_resource"].get(key, 0.0) + value
    out["buckets"].sort()
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ready_count(bed: KubeTestBed, namespace: str) -> int:
    items = bed.http.get(f"/apis/{API}/namespaces/{namespace}/applications").json()["items"]
    return sum(1 for a in items if (a.get("status") or {}).get("phase") == "Ready"
               and a["status"].get("observedGeneration") == a["metadata"]["generation"])


def direct_floor(bed: KubeTestBed, namespace: str, n: int, workers: int) -> float:
    """Seconds to server-side apply, from this script, what the operator writes for n apps (children + status)."""
    bed.ensure_namespace(namespace)
    bodies = []
    for i in range(n):
        cr = application(namespace, f"app{i:03d}")
        bed.apply(cr)
        loaded = parse_cr(json.dumps(cr), "bench", strict_json=True)
        bodies.append((cr, render_loaded(loaded, "prod", "manifests", namespace).objects))

    def one(item: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
        cr, objects = item
        for obj in objects:
            bed.apply(obj, namespace, field_manager="bench-floor")
        info = bed.resource_for(API, "Application")
        body = {"apiVersion": API, "kind": "Application", "metadata": cr["metadata"],
                "status": {"phase": "Ready", "observedGeneration": 1, "lastAppliedSpec": BASE}}
        bed.http.patch(info.path(cr["metadata"]["name"], namespace) + "/status",
                       params={"fieldManager": "bench-floor", "force": "true"}, content=json.dumps(body).encode(),
                       headers={"Content-Type": "application/apply-patch+yaml"}).raise_for_status()

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, bodies))
    took = time.perf_counter() - start
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:  # the test bed's service range is a /24
        list(pool.map(lambda i: bed.delete("v1", "Service", f"app{i:03d}", namespace), range(n)))
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--apps", type=int, default=200)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--resync", type=float, default=15.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="apprafter-bench-", dir="/tmp") as tmp:
        work = Path(tmp)
        bed = start_kube(work / "kube", install_crds=False)
        op: ManagedProcess | None = None
        try:
            bed.install_crds([f for f in crd_files() if any(k.plural in f.name for k in KINDS)])
            (work / "crds.yaml").write_text(dump_stream(crd_documents(OPERATOR_CRDS)))
            bed.install_crds([work / "crds.yaml"])
            floor = direct_floor(bed, "floor", args.apps, args.workers)

            health, metrics = free_port(), free_port()
            launcher = os.environ.get("BENCH_OPERATOR_LAUNCHER")  # e.g. a profiling wrapper
            op = ManagedProcess("operator", [sys.executable, *([launcher] if launcher else ["-m", "apprafter",
                                                                                              "operator"]),
                                             "--kubeconfig",
                                             str(bed.kubeconfig), "--bind-address", "127.0.0.1",
                                             "--health-port", str(health), "--metrics-port", str(metrics),
                                             "--workers", str(args.workers), "--resync", str(args.resync),
                                             "--namespace", "bench",  # not the floor's namespace
                                             "--log-level", "warning"],
                                work / "operator.log", env=dict(os.environ))
            wait_for("operator ready", lambda: httpx.get(f"http://127.0.0.1:{health}/readyz").status_code == 200
                     or None, 60, op, interval=0.1)
            bed.ensure_namespace("bench")
            before = operator_metrics(metrics)
            cpu = {p.name: cpu_seconds(p.popen.pid) for p in [*bed.processes, op]}
            start = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
                list(pool.map(lambda i: bed.apply(application("bench", f"app{i:03d}")), range(args.apps)))
            submitted = time.perf_counter() - start
            wait_for(f"{args.apps} Applications Ready", lambda: ready_count(bed, "bench") == args.apps or None,
                     600, op, interval=0.25)
            elapsed = time.perf_counter() - start
            cpu = {name: cpu_seconds(p.popen.pid) - cpu[name] for name, p in
                   ((p.name, p) for p in [*bed.processes, op])}
            after = operator_metrics(metrics)
            buckets = [(le, c - dict(before["buckets"]).get(le, 0.0)) for le, c in after["buckets"]]

            time.sleep(3)  # let the last status events drain
            writes0 = apiserver_writes(bed)
            seen = operator_metrics(metrics)["reconciles"]
            resync_writes = operator_metrics(metrics)["writes"]
            resync_start = time.perf_counter()
            wait_for("one resync of every Application", lambda: operator_metrics(metrics)["reconciles"]
                     >= seen + args.apps or None, args.resync * 3, op, interval=0.5)
            window = time.perf_counter() - resync_start
            writes1 = apiserver_writes(bed)
            delta = {k: v - writes0.get(k, 0.0) for k, v in writes1.items() if v - writes0.get(k, 0.0)}
            leases = delta.pop("leases", 0.0)

            rate = args.apps / elapsed
            print(f"{args.apps} Applications Ready in {elapsed:.1f} s: {rate:.1f} apps/s "
                  f"({rate / FLUX_KUSTOMIZATIONS_PER_S:.1f}x Flux's ~{FLUX_KUSTOMIZATIONS_PER_S:.0f} "
                  f"Kustomizations/s; submitting them took {submitted:.1f} s)")
            print("CPU seconds used meanwhile: " + ", ".join(f"{n} {s:.1f}" for n, s in cpu.items())
                  + f" (of {2 * elapsed:.0f} on 2 cores, shared with whatever else runs)")
            print(f"floor, same children and status applied directly with {args.workers} threads: {floor:.1f} s "
                  f"({args.apps / floor:.1f} apps/s); operator / floor = {elapsed / floor:.2f}x")
            print(f"reconcile duration p50 {1000 * quantile(buckets, 0.5):.0f} ms, p99 "
                  f"{1000 * quantile(buckets, 0.99):.0f} ms over {int(buckets[-1][1])} reconciles "
                  f"({buckets[-1][1] / args.apps:.1f} per app); operator writes per app "
                  f"{(after['writes'] - before['writes']) / args.apps:.1f}: " + ", ".join(
                      f"{k} {(v - before['by_resource'].get(k, 0.0)) / args.apps:.1f}"
                      for k, v in sorted(after["by_resource"].items())))
            ours = operator_metrics(metrics)["writes"] - resync_writes
            print(f"no-op resync of {args.apps} Applications ({window:.1f} s): the operator sent {ours:.0f} writes "
                  "(its lease renewals apart); "
                  f"the API server counted {sum(delta.values()):.0f} writes {delta or ''} and {leases:.0f} lease "
                  "renewals (the operator's and the API server's own, counted apart)")
        finally:
            if op is not None:
                op.stop(grace=30)
            bed.stop()


if __name__ == "__main__":
    main()
