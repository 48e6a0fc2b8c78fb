"""Benchmark: `needs: redis` from an Application to a ready claim (issue 31 item 3), on a loopback test bed (etcd +
kube-apiserver), the operator as a subprocess and Debian's redis-server on 127.0.0.1 named by a redis-server
ServiceProvider's `address` (the operator runs on the host, where no ClusterIP answers).

One at a time (--claims N, default 20): an Application with one redis need created, timed until its claim says
ready (the binder bound it, the ACL user was set and tried, the connection Secret written); p50/p99/max. Then
--burst N Applications at once, timed until every claim is ready. And Redis' used_memory per claim (ACL users plus
one key each).
Usage: .venv/bin/python scripts/bench_redis_claims.py [--claims 20] [--burst 20]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reconciler.conftest import install_our_crds  # noqa: E402 - after the repo root is importable
from tests.reconciler.operator_proc import FAST, Operator  # noqa: E402
from tests.testbed.kube import KubeTestBed, start_kube  # noqa: E402
from tests.testbed.procs import wait_for  # noqa: E402
from tests.testbed.redis import start_redis  # noqa: E402

API = "apprafter.io/v1alpha1"
SERVICES, PROVIDER = "apprafter-redis", "redis-bench"
APP = {"image": "ghcr.io/acme/bench:1.0.0", "expose": {"port": 8080},
       "needs": {"redis": {"selector": {"bench": "redis"}}}, "env": {"REDIS_URL": {"claim": "redis/url"}}}


def application(namespace: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Application", "metadata": {"name": "demo", "namespace": namespace},
            "spec": {"environment": "prod", "base": APP, "environments": {"prod": {}}}}


def ready(bed: KubeTestBed, namespace: str) -> bool | None:
    claim = bed.get(API, "ResourceClaim", "demo-redis", namespace) or {}
    return True if (claim.get("status") or {}).get("ready") is True else None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=20)
    parser.add_argument("--burst", type=int, default=20)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="apprafter-bench-redis-"))
    admin = secrets.token_urlsafe(24)
    server = start_redis(workdir / "redis", password=admin)
    bed = start_kube(workdir / "kube")
    operator: Operator | None = None
    try:
        install_our_crds(bed, workdir)
        bed.ensure_namespace(SERVICES)
        bed.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{PROVIDER}-admin",
                                                                      "namespace": SERVICES},
                   "stringData": {"password": admin}}, field_manager="admin")
        bed.apply({"apiVersion": API, "kind": "ServiceProvider", "metadata": {"name": PROVIDER,
                                                                             "labels": {"bench": "redis"}},
                   "spec": {"type": "redis", "backend": "redis-server", "config": {"address": server.address}}},
                  field_manager="admin")
        operator = Operator(bed, workdir / "operator", ["--no-leader-elect", *FAST, "--no-platform-stack"])
        operator.start()
        as_admin = redis.Redis(port=server.port, password=admin)
        before = int(as_admin.info("memory")["used_memory"])

        took: list[float] = []
        for i in range(args.claims):
            namespace = f"bench-{i}"
            bed.ensure_namespace(namespace)
            started = time.monotonic()
            bed.apply(application(namespace), field_manager="argocd-controller")
            wait_for(f"{namespace}/demo-redis ready", lambda n=namespace: ready(bed, n), 120, interval=0.01)
            took.append(time.monotonic() - started)
        ms = [t * 1000 for t in took]
        print(f"one at a time, {len(ms)} claims: Application created -> claim ready p50 {statistics.median(ms):.0f} ms,"
              f" p99 {percentile(ms, 0.99):.0f} ms, max {max(ms):.0f} ms, min {min(ms):.0f} ms")

        burst = [f"burst-{i}" for i in range(args.burst)]
        for namespace in burst:
            bed.ensure_namespace(namespace)
        started = time.monotonic()
        for namespace in burst:
            bed.apply(application(namespace), field_manager="argocd-controller")
        wait_for("every burst claim ready", lambda: all(ready(bed, n) for n in burst) or None, 300, interval=0.05)
        print(f"{len(burst)} at once: every claim ready after {time.monotonic() - started:.2f} s")

        users = args.claims + args.burst
        after = int(as_admin.info("memory")["used_memory"])
        print(f"redis used_memory: {before} -> {after} bytes with {users} ACL users: "
              f"{(after - before) / users:.0f} bytes per claim (no keys written)")
    finally:
        if operator is not None:
            operator.stop()
        bed.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
