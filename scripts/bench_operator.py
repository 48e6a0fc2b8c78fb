"""Benchmark: `apprafter operator` on a loopback test bed (etcd + kube-apiserver, the Service range widened).

For each size (--apps 1000,2000,5000) on a fresh test bed: N Applications created at once, a mix — most public
without needs (Progressing: every child applied, and no Deployment controller runs here), one in ten with a claim
(Failed, Unbound: no provider here), one in twenty then given a gated change (AwaitingMigrationApproval) — timed
until every one is settled; apps/s, reconcile p50/p99 from the operator's own histogram, the operator's RSS (now and
peak) and CPU beside the API server's and etcd's, and the API requests of one no-op resync by method (writes must be
0; each reconcile reads its Application fresh, on purpose). --soak MINUTES then churns (create, update, delete at
--churn per second) and samples RSS each 30 s: flat means no leak. --floor also times the same children and status
applied directly by this script (the API server's own floor).
Usage: .venv/bin/python scripts/bench_operator.py [--apps 200] [--workers 8] [--resync 60] [--soak 0] [--floor]
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
FLUX_KUSTOMIZATIONS_PER_S = 1000 / 256  # the anchor the issue names: Flux's 1,000 Kustomizations in 4 m 16 s
WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE")
BASE = {"image": "ghcr.io/acme/bench:1.0.0", "replicas": 2, "expose": {"port": 8080, "network": "public"},
        "env": {"LOG_LEVEL": "info"}}
CLAIMED = {**BASE, "needs": {"pg": {"size": "small", "version": "16"}}, "env": {"DATABASE_URL": {"claim": "pg/url"}}}
GATED = {**BASE, "image": "ghcr.io/elsewhere/bench:1.0.0"}  # a new image repository: held for approval
SERVICE_CIDR = "10.96.0.0/12"  # ~1M Service addresses (the test bed's default /24 holds ~250)


def kind_of(i: int) -> str:
    """The mix: one in ten with a claim, one in twenty later given a gated change, the rest plain."""
    return "claim" if i % 10 == 5 else "gated" if i % 20 == 0 else "plain"


def application(namespace: str, name: str, base: dict[str, Any] = BASE) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Application", "metadata": {"name": name, "namespace": namespace},
            "spec": {"environment": "prod", "base": base, "environments": {"prod": {}}}}


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
    out: dict[str, Any] = {"buckets": [], "reconciles": 0.0, "writes": 0.0, "by_resource": {}, "requests": {}}
    for name, labels, value in samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text):
        if name == "apprafter_reconcile_duration_seconds_bucket" and labels.get("controller") == "application":
            out["buckets"].append((float(labels["le"]), value))
        elif name == "apprafter_reconcile_total" and labels.get("controller") == "application":
            out["reconciles"] += value
        elif name == "apprafter_kube_writes_total" and labels.get("resource") != "leases":
            out["writes"] += value
            key = f"{labels['verb']} {labels['resource']}"
            out["by_resource"][key] = out["by_resource"].get(key, 0.0) + value
        elif name == "apprafter_kube_requests_total":
            out["requests"][labels["method"]] = out["requests"].get(labels["method"], 0.0) + value
    out["buckets"].sort()
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> tuple[float, float]:
    """(resident now, peak resident) of a process, MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def phases(bed: KubeTestBed, namespace: str) -> dict[str, str]:
    """name -> phase of every Application that has processed its current generation (one paged LIST)."""
    out: dict[str, str] = {}
    cont = ""
    while True:
        params = {"limit": "2000", **({"continue": cont} if cont else {})}
        body = bed.http.get(f"/apis/{API}/namespaces/{namespace}/applications", params=params).json()
        for a in body["items"]:
            st = a.get("status") or {}
            if st.get("observedGeneration") == a["metadata"]["generation"]:
                out[a["metadata"]["name"]] = str(st.get("phase"))
        cont = body["metadata"].get("continue") or ""
        if not cont:
            return out


def settled(bed: KubeTestBed, namespace: str, want: dict[str, str]) -> bool | None:
    now = phases(bed, namespace)
    return all(now.get(n) == p for n, p in want.items()) or None


def direct_floor(bed: KubeTestBed, namespace: str, n: int, workers: int) -> float:
    """Seconds to server-side apply, from this script, what the operator writes for n apps (children + status)."""
    bed.ensure_namespace(namespace)
    bodies = []
    for i in range(n):
        cr = application(namespace, f"app{i:04d}")
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
    return time.perf_counter() - start


def start_operator(bed: KubeTestBed, work: Path, args: argparse.Namespace) -> tuple[ManagedProcess, int]:
    health, metrics = free_port(), free_port()
    launcher = os.environ.get("BENCH_OPERATOR_LAUNCHER")  # e.g. a profiling wrapper
    op = ManagedProcess("operator", [sys.executable, *([launcher] if launcher else ["-m", "apprafter", "operator"]),
                                     "--kubeconfig", str(bed.kubeconfig), "--bind-address", "127.0.0.1",
                                     "--health-port", str(health), "--metrics-port", str(metrics),
                                     "--workers", str(args.workers), "--resync", str(args.resync),
                                     "--namespace", "bench",  # not the floor's namespace
                                     "--no-platform-stack", "--log-level", "warning"],
                        work / "operator.log", env=dict(os.environ))
    wait_for("operator ready", lambda: httpx.get(f"http://127.0.0.1:{health}/readyz").status_code == 200
             or None, 60, op, interval=0.1)
    return op, metrics


def burst(bed: KubeTestBed, bodies: list[dict[str, Any]], workers: int) -> float:
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(bed.apply, bodies))
    return time.perf_counter() - start


def one_size(n: int, args: argparse.Namespace, work: Path) -> None:
    bed = start_kube(work / "kube", install_crds=False, service_cidr=SERVICE_CIDR)
    op: ManagedProcess | None = None
    try:
        bed.install_crds([f for f in crd_files() if any(k.plural in f.name for k in KINDS)])
        (work / "crds.yaml").write_text(dump_stream(crd_documents(OPERATOR_CRDS)))
        bed.install_crds([work / "crds.yaml"])
        floor = direct_floor(bed, "floor", n, args.workers) if args.floor else None
        op, metrics = start_operator(bed, work, args)
        bed.ensure_namespace("bench")
        names = {f"app{i:04d}": kind_of(i) for i in range(n)}
        # every child applied; no Deployment controller runs on this bed, so a workload stays Progressing
        # a claim no provider serves fails its Application at once (Unbound: no provider runs on this bed)
        want = {name: "Failed" if kind == "claim" else "Progressing" for name, kind in names.items()}
        before = operator_metrics(metrics)
        procs = [*bed.processes, op]
        cpu = {p.name: cpu_seconds(p.popen.pid) for p in procs}
        start = time.perf_counter()
        submitted = burst(bed, [application("bench", name, CLAIMED if kind == "claim" else BASE)
                                for name, kind in names.items()], args.workers)
        wait_for(f"{n} Applications settled", lambda: settled(bed, "bench", want), 3600, op, interval=1)
        elapsed = time.perf_counter() - start
        used = {p.name: cpu_seconds(p.popen.pid) - cpu[p.name] for p in procs}
        after = operator_metrics(metrics)
        buckets = [(le, c - dict(before["buckets"]).get(le, 0.0)) for le, c in after["buckets"]]
        rss, peak = rss_mib(op.popen.pid)
        rate = n / elapsed
        load = os.getloadavg()
        claims = sum(k == "claim" for k in names.values())
        print(f"== {n} Applications (load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {claims} with a claim, "
              f"{sum(k == 'gated' for k in names.values())} later gated): settled in {elapsed:.1f} s, {rate:.1f} "
              f"apps/s ({rate / FLUX_KUSTOMIZATIONS_PER_S:.1f}x Flux's {FLUX_KUSTOMIZATIONS_PER_S:.1f}/s); "
              f"submitting took {submitted:.1f} s")
        print("  CPU seconds meanwhile: " + ", ".join(f"{name} {s:.1f}" for name, s in used.items())
              + f" (of {2 * elapsed:.0f} on 2 cores, shared with whatever else runs); operator / API server "
              f"{used['operator'] / max(used['kube-apiserver'], 1e-9):.2f}")
        print(f"  operator RSS {rss:.0f} MiB (peak {peak:.0f} MiB)")
        print(f"  reconcile p50 {1000 * quantile(buckets, 0.5):.0f} ms, p99 {1000 * quantile(buckets, 0.99):.0f} ms "
              f"over {int(buckets[-1][1])} reconciles ({buckets[-1][1] / n:.1f} per app); writes per app "
              f"{(after['writes'] - before['writes']) / n:.1f}", flush=True)

        gated = [name for name, kind in names.items() if kind == "gated"]
        start_gated = time.perf_counter()
        burst(bed, [application("bench", name, GATED) for name in gated], args.workers)
        want.update(dict.fromkeys(gated, "AwaitingMigrationApproval"))
        wait_for(f"{len(gated)} gated changes held", lambda: settled(bed, "bench", want), 3600, op, interval=1)
        held = time.perf_counter() - start_gated
        print(f"  {len(gated)} gated changes held in {held:.1f} s", flush=True)

        time.sleep(3)  # the last status events drain
        writes0, seen = apiserver_writes(bed), operator_metrics(metrics)
        resync_start = time.perf_counter()
        wait_for("one resync of every Application", lambda: operator_metrics(metrics)["reconciles"]
                 >= seen["reconciles"] + n or None, args.resync * 3 + n / 2, op, interval=0.5)
        window = time.perf_counter() - resync_start
        done = operator_metrics(metrics)
        delta = {k: v - writes0.get(k, 0.0) for k, v in apiserver_writes(bed).items() if v - writes0.get(k, 0.0)}
        leases = delta.pop("leases", 0.0)
        requests = {m: v - seen["requests"].get(m, 0.0) for m, v in done["requests"].items()
                    if v - seen["requests"].get(m, 0.0)}

        if floor is not None:
            print(f"  floor (the same children and status applied by this script, {args.workers} threads): "
                  f"{floor:.1f} s, {n / floor:.1f} apps/s; operator / floor {elapsed / floor:.2f}x")
        print(f"  no-op resync of {n} ({window:.1f} s): operator requests {requests} (writes "
              f"{done['writes'] - seen['writes']:.0f}); the API server counted {sum(delta.values()):.0f} writes "
              f"{delta or ''} and {leases:.0f} lease renewals")
        if args.soak:
            soak(bed, op, n, args)
    finally:
        if op is not None:
            op.stop(grace=30)
        bed.stop()


def soak(bed: KubeTestBed, op: ManagedProcess, n: int, args: argparse.Namespace) -> None:
    """Churn for args.soak minutes (create, update, delete in turn at args.churn per second); RSS each 30 s."""
    started, step, samples_ = time.monotonic(), 0, [rss_mib(op.popen.pid)[0]]
    next_sample = started + 30
    while time.monotonic() - started < args.soak * 60:
        i = n + step // 3
        name, verb = f"churn{i:05d}", ("create", "update", "delete")[step % 3]
        if verb == "delete":
            bed.delete(API, "Application", name, "bench")
        else:
            bed.apply(application("bench", name, {**BASE, "replicas": 2 if verb == "create" else 3}))
        step += 1
        time.sleep(max(0.0, started + step / args.churn - time.monotonic()))
        if time.monotonic() >= next_sample:
            samples_.append(rss_mib(op.popen.pid)[0])
            next_sample += 30
    third = max(1, len(samples_) // 3)
    first, last = sum(samples_[:third]) / third, sum(samples_[-third:]) / third
    print(f"  soak {args.soak:.0f} min, {step} changes at {args.churn:.1f}/s: RSS first third {first:.0f} MiB, last "
          f"third {last:.0f} MiB, max {max(samples_):.0f} MiB ({len(samples_)} samples: "
          + " ".join(f"{s:.0f}" for s in samples_) + ")")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--apps", default="200", help="comma-separated sizes, each on a fresh test bed")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--resync", type=float, default=60.0)
    parser.add_argument("--floor", action="store_true", help="also time the direct-apply floor")
    parser.add_argument("--soak", type=float, default=0.0, metavar="MINUTES", help="churn after the largest size")
    parser.add_argument("--churn", type=float, default=2.0, metavar="PER_S")
    args = parser.parse_args()
    sizes = [int(s) for s in args.apps.split(",")]
    soak_minutes, args.soak = args.soak, 0.0
    for k, n in enumerate(sizes):
        args.soak = soak_minutes if k == len(sizes) - 1 else 0.0
        with tempfile.TemporaryDirectory(prefix="apprafter-bench-", dir="/tmp") as tmp:
            one_size(n, args, Path(tmp))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
