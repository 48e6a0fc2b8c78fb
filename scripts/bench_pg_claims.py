"""Benchmark: `needs: pg` on the node tier with CloudNativePG (issue 31, Performance): the first claim, step by step
(Application created -> claim bound -> the shared Cluster made -> Cluster Ready -> claim ready -> Application Ready),
then --claims further Applications one at a time (Application created -> claim ready: CloudNativePG made the role
and the database, the connection Secret written; p50/p99/max), and the shared instance's memory per claim (its pod's
working set from the kubelet's summary API, before and after the further claims).

A real node (tests/testbed/node.py), CloudNativePG and the PostgreSQL image built here (tests/testbed/cnpg.py, `make
images`), the operator in the node's network namespace as the node tests run it. The further Applications run no
pod (replicas: 0): the claim's path alone is timed, and the node's two cores are not spent on 20 idle app pods.
Run it under `flock /tmp/apprafter-heavy.lock` (it starts a node) and read the load average it prints.
Usage: .venv/bin/python scripts/bench_pg_claims.py [--claims 20]
"""

from __future__ import annotations

import argparse
import calendar
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller_runtime.quantity import whole_bytes  # noqa: E402 - after the repo root is importable
from lifecycle.backends.pg_cluster import DEFAULT_SIZE, SHARES  # noqa: E402
from tests.images.podman import make_images  # noqa: E402
from tests.reconciler.conftest import install_our_crds  # noqa: E402
from tests.reconciler.operator_proc import FAST, Operator  # noqa: E402
from tests.testbed import cnpg  # noqa: E402
from tests.testbed.node import NodeTestBed, start_node  # noqa: E402
from tests.testbed.procs import wait_for  # noqa: E402
from tests.testbed.testapp import build_test_app  # noqa: E402

API = "apprafter.io/v1alpha1"
SERVICES, PROVIDER, CLUSTER = "apprafter-pg", "pg-bench", "postgres-bench"


def application(namespace: str, image: str, replicas: int) -> dict[str, Any]:
    base = {"image": image, "replicas": replicas, "expose": {"port": 8080}, "needs": {"pg": {"selector": {
        "bench": "pg"}}}, "env": {"MODE": "serve", "DATABASE_URL": {"claim": "pg/url"}}}
    return {"apiVersion": API, "kind": "Application", "metadata": {"name": "demo", "namespace": namespace},
            "spec": {"environment": "prod", "base": base, "environments": {"prod": {}}}}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def claim(bed: NodeTestBed, namespace: str) -> dict[str, Any]:
    return (bed.get(API, "ResourceClaim", "demo-pg", namespace) or {}).get("status") or {}


def claim_ready(bed: NodeTestBed, namespace: str) -> bool | None:
    return True if claim(bed, namespace).get("ready") is True else None


def app_ready(bed: NodeTestBed, namespace: str) -> bool | None:
    obj = bed.get(API, "Application", "demo", namespace) or {"metadata": {}}
    status = obj.get("status") or {}
    return True if status.get("phase") == "Ready" and \
        status.get("observedGeneration") == obj["metadata"].get("generation") else None


def working_set(bed: NodeTestBed, pod: str, after: float) -> int:
    """The pod's working set from the kubelet's summary API, as sampled after `after` (time.time())."""
    def sample() -> int | None:
        summary = bed.http.get(f"/api/v1/nodes/{bed.node_name}/proxy/stats/summary").json()
        memory = next((p.get("memory") or {} for p in summary.get("pods", []) if p["podRef"]["name"] == pod), {})
        stamp = memory.get("time", "")
        if not stamp:
            return None
        sampled = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
        return int(memory["workingSetBytes"]) if sampled > after else None
    return wait_for(f"a summary sample of {pod} newer than now", sample, 120, interval=1)


def step(what: str, probe: Callable[[], Any], started: float, steps: list[tuple[str, float]],
         timeout: float = 600) -> None:
    wait_for(what, probe, timeout, interval=0.05)
    steps.append((what, time.monotonic() - started))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault("PYTEST_XDIST_WORKER", "gw6")
    workdir = Path(tempfile.mkdtemp(prefix="apprafter-bench-pg-", dir="/tmp"))
    print(f"load average at start: {os.getloadavg()}")
    bed = start_node(workdir / "node")
    operator: Operator | None = None
    try:
        test_app = bed.import_image(build_test_app())
        images = make_images(names=("cnpg", "postgresql"))
        operator_image, postgres_image = (bed.import_image(images[name].ref) for name in ("cnpg", "postgresql"))
        installed = cnpg.install(bed, operator_image, postgres_image)
        install_our_crds(bed, workdir)
        bed.ensure_namespace(SERVICES)
        platform = workdir / "platform.yaml"
        platform.write_text(f"providerNamespaces: {{pg: {SERVICES}}}\n")
        # every claim reserves its size's share of the volume (issue 41): 1Gi held 8 small claims, the 9th waited
        share = whole_bytes(SHARES[DEFAULT_SIZE]) or 0
        volume = f"{max(1, math.ceil((args.claims + 2) * share / 2**30))}Gi"
        bed.apply({"apiVersion": API, "kind": "ServiceProvider", "metadata": {"name": PROVIDER,
                                                                             "labels": {"bench": "pg"}},
                   "spec": {"type": "pg", "backend": "cloudnative-pg", "config": {
                       "cluster": CLUSTER, "namespace": SERVICES, "instances": 1,
                       "storage": {"size": volume, "storageClassName": installed.storage_class},
                       "resources": {"cpu": "250m", "memory": "256Mi"}, "sharedBuffersPercent": 25}}},
                  field_manager="admin")
        operator = Operator(bed, workdir / "operator", ["--no-leader-elect", "--no-platform-stack", *FAST,
                                                         "--platform", str(platform),
                                                         "--backend-image", f"cloudnative-pg={postgres_image}"],
                            name="pg-bench", inside=bed)
        operator.start()

        first = "bench-first"
        bed.ensure_namespace(first)
        steps: list[tuple[str, float]] = []
        started = time.monotonic()
        bed.apply(application(first, test_app, 1), field_manager="argocd-controller")
        step("claim bound", lambda: claim(bed, first).get("provider") or None, started, steps)
        step("shared Cluster made", lambda: bed.get(cnpg.API, "Cluster", CLUSTER, SERVICES), started, steps)
        step("shared Cluster Ready", lambda: cnpg.cluster_ready(bed.get(cnpg.API, "Cluster", CLUSTER, SERVICES) or {
            "spec": {}}), started, steps)
        step("claim ready", partial(claim_ready, bed, first), started, steps)
        step("Application Ready", lambda: app_ready(bed, first), started, steps)
        print("first claim, from the Application's creation: " + "; ".join(f"{what} {at:.1f} s" for what, at in steps))

        primary = (bed.get(cnpg.API, "Cluster", CLUSTER, SERVICES) or {})["status"]["currentPrimary"]
        before = working_set(bed, primary, time.time())
        took: list[float] = []
        for i in range(args.claims):
            namespace = f"bench-{i}"
            bed.ensure_namespace(namespace)
            began = time.monotonic()
            bed.apply(application(namespace, test_app, 0), field_manager="argocd-controller")
            wait_for(f"{namespace}/demo-pg ready", partial(claim_ready, bed, namespace), 120, interval=0.05)
            took.append(time.monotonic() - began)
        ms = [t * 1000 for t in took]
        print(f"one at a time, {len(ms)} further claims: Application created -> claim ready p50 "
              f"{statistics.median(ms):.0f} ms, p99 {percentile(ms, 0.99):.0f} ms, max {max(ms):.0f} ms, min "
              f"{min(ms):.0f} ms")
        after = working_set(bed, primary, time.time())
        print(f"instance pod {primary} working set: {before / 2**20:.1f} MiB with 1 claim -> {after / 2**20:.1f} MiB "
              f"with {args.claims + 1}: {(after - before) / args.claims / 2**20:.2f} MiB per further claim "
              f"(limit 256 MiB, shared_buffers 64MB)")
        print(f"load average at end: {os.getloadavg()}")
    finally:
        if operator is not None:
            operator.stop()
        cnpg.uninstall(bed)
        bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
