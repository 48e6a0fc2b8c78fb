"""Benchmark: a pg claim's creation -> Ready with the provider's Pooler on, beside the same with it off (issue 42 item
5), in one run on one node: two cloudnative-pg providers, each its own Cluster (one instance of 250m / 256Mi), one
with `pooler.enabled` (the default: the operator writes the Cluster's Pooler, PgBouncer from the `pgbouncer` image),
one with `pooler.enabled: false`. After each provider's first claim (the Cluster made, initialised and Ready, both at
once), --claims further Applications per provider, one at a time, the two providers taking turns (which goes first
alternates every round, so the load falls on both alike): Application created -> claim ready (CloudNativePG reconciled
the role and applied the Database, the connection Secret written with `url` and `pooledUrl`). Prints p50, p99, max and
min of each, the ratio pooled / direct, and the load average at the start and at the end.

Ready is the claim's `status.ready`, written after its Secret; the Secret's `pooledUrl` is checked to name the
Pooler's Service (pooler on) or the Cluster's `-rw` Service (off). Ready does not wait for the first pooled login to
work (CloudNativePG's instance manager puts its auth function into a new database on its next pass: docs/open-ends.md).

A real node (tests/testbed/node.py), CloudNativePG and the PostgreSQL and PgBouncer images built here
(tests/testbed/cnpg.py, `make images`), the operator in the node's network namespace as the node tests run it; the
Applications run no pod (replicas: 0): the claim's path alone is timed. Run it under `flock
/tmp/apprafter-heavy.lock` (it starts a node). `measure` is the part tests/reconciler/test_bench_pg_pooler_cluster.py
runs with two claims on the API server, CloudNativePG played there.
Usage: .venv/bin/python scripts/bench_pg_pooler_claims.py [--claims 50]
"""

from __future__ import annotations

import argparse
import base64
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller_runtime.quantity import whole_bytes  # noqa: E402 - after the repo root is importable
from lifecycle.backends.pg_cluster import DEFAULT_SIZE, SHARES  # noqa: E402
from tests.testbed.kube import KubeTestBed  # noqa: E402
from tests.testbed.procs import BedError, wait_for  # noqa: E402

API = "apprafter.io/v1alpha1"
SERVICES = "apprafter-pg"
SIDES = ("pooled", "direct")  # the provider with its Pooler, the one without
SLOW = 60.0  # a claim not ready by then: what it and its Cluster say is printed, and it is waited for on
CLAIM_TIMEOUT = 600.0


class Side(NamedTuple):
    """One provider of the comparison: its name, its Cluster, whether its pooler is on."""

    name: str
    cluster: str
    pooler: bool


def sides(run: str = "bench") -> dict[str, Side]:
    return {"pooled": Side(f"pg-{run}-pooled", f"pg-{run}-pooled", True),
            "direct": Side(f"pg-{run}-direct", f"pg-{run}-direct", False)}


def volume_for(claims: int) -> str:
    """A Cluster's volume that holds the shares of `claims` claims of the default size (lifecycle.backends.pg_cluster:
    each claim reserves its share; the node's host-path volumes take any size)."""
    share = whole_bytes(SHARES[DEFAULT_SIZE]) or 0
    return f"{max(1, math.ceil(claims * share / 2**30))}Gi"


def provider(side: Side, namespace: str, storage_class: str | None, claims: int) -> dict[str, Any]:
    storage = {"size": volume_for(claims), **({"storageClassName": storage_class} if storage_class else {})}
    config = {"cluster": side.cluster, "namespace": namespace, "instances": 1, "storage": storage,
              "resources": {"cpu": "250m", "memory": "256Mi"}, "sharedBuffersPercent": 25,
              **({} if side.pooler else {"pooler": {"enabled": False}})}
    return {"apiVersion": API, "kind": "ServiceProvider",
            "metadata": {"name": side.name, "labels": {"bench-pooler": side.name}},
            "spec": {"type": "pg", "backend": "cloudnative-pg", "config": config}}


def application(namespace: str, image: str, side: Side) -> dict[str, Any]:
    base = {"image": image, "replicas": 0, "expose": {"port": 8080},
            "needs": {"pg": {"selector": {"bench-pooler": side.name}}},
            "env": {"MODE": "serve", "DATABASE_URL": {"claim": "pg/pooledUrl"}}}
    return {"apiVersion": API, "kind": "Application", "metadata": {"name": "demo", "namespace": namespace},
            "spec": {"environment": "prod", "base": base, "environments": {"prod": {}}}}


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank q-quantile (p99 of 50 values is the largest, of 100 the 99th)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def _ready(bed: KubeTestBed, namespace: str) -> bool | None:
    status = (bed.get(API, "ResourceClaim", "demo-pg", namespace) or {}).get("status") or {}
    return True if status.get("ready") is True else None


def _pooled_host(bed: KubeTestBed, namespace: str) -> str:
    secret = bed.get("v1", "Secret", "demo-pg-conn", namespace) or {}
    pooled = base64.b64decode((secret.get("data") or {}).get("pooledUrl", "")).decode()
    return pooled.rpartition("@")[2].partition(":")[0]


def said(bed: KubeTestBed, namespace: str, side: Side, services: str) -> str:
    """What a claim that is slow to be ready, its Database and its Cluster say (no secret in any of them)."""
    status = (bed.get(API, "ResourceClaim", "demo-pg", namespace) or {}).get("status") or {}
    conditions = {c["type"]: f"{c['reason']}: {c.get('message', '')}" for c in status.get("conditions") or []}
    cluster = (bed.get("postgresql.cnpg.io/v1", "Cluster", side.cluster, services) or {}).get("status") or {}
    roles = (cluster.get("managedRolesStatus") or {}).get("byStatus") or {}
    role = f"{namespace}.demo-pg"
    database = (bed.get("postgresql.cnpg.io/v1", "Database", role, services) or {}).get("status")
    return (f"{namespace}: claim {conditions}; Cluster {cluster.get('phase')}, role in "
            f"{[k for k, v in roles.items() if role in (v or [])]}; Database {database}")


def claim_ready(bed: KubeTestBed, namespace: str, image: str, side: Side, services: str) -> float:
    """Seconds from the Application's creation to its claim's status.ready (the Secret's pooled host checked)."""
    bed.ensure_namespace(namespace)
    began = time.monotonic()
    bed.apply(application(namespace, image, side), field_manager="argocd-controller")
    try:
        wait_for(f"{namespace}/demo-pg ready", lambda: _ready(bed, namespace), SLOW, interval=0.05)
    except BedError:
        print(f"not ready after {SLOW:.0f} s: {said(bed, namespace, side, services)}", flush=True)
        wait_for(f"{namespace}/demo-pg ready", lambda: _ready(bed, namespace), CLAIM_TIMEOUT - SLOW, interval=0.05)
    took = time.monotonic() - began
    wanted = f"{side.cluster}-{'pooler' if side.pooler else 'rw'}.{services}.svc"
    host = _pooled_host(bed, namespace)
    if host != wanted:
        raise AssertionError(f"{namespace}: pooledUrl goes to {host!r}, not {wanted!r}")
    return took


class Report(NamedTuple):
    first: dict[str, float]  # the first claim of each side (its Cluster made and Ready), seconds
    further: dict[str, list[float]]  # each side's further claims, seconds
    load_start: tuple[float, float, float]
    load_end: tuple[float, float, float]


def measure(bed: KubeTestBed, image: str, claims: int, services: str, run: str = "bench",
            storage_class: str | None = None, first_ready: Callable[[str], None] | None = None) -> Report:
    """Both providers made, their first claims at once, then `claims` further claims each, taking turns. The
    operator (watching `services` for pg, with a PgBouncer image) and CloudNativePG (or what plays it) run already.
    `first_ready`: called with each side once its first claim is ready (the node waits for the Pooler there)."""
    load_start = os.getloadavg()
    made = sides(run)
    for side in made.values():
        bed.apply(provider(side, services, storage_class, claims + 2), field_manager="admin")  # one spare
    started = time.monotonic()
    for name, side in made.items():
        bed.ensure_namespace(f"{run}-{name}-first")
        bed.apply(application(f"{run}-{name}-first", image, side), field_manager="argocd-controller")
    first: dict[str, float] = {}
    for name in SIDES:
        wait_for(f"{name}'s first claim ready", lambda n=name: _ready(bed, f"{run}-{n}-first"), 900, interval=0.1)
        first[name] = time.monotonic() - started
        if first_ready is not None:
            first_ready(name)
    further: dict[str, list[float]] = {name: [] for name in SIDES}
    for i in range(claims):
        for name in (SIDES if i % 2 == 0 else SIDES[::-1]):
            further[name].append(claim_ready(bed, f"{run}-{name}-{i}", image, made[name], services))
            print(f"{name} {i}: {further[name][-1]:.2f} s", file=sys.stderr, flush=True)
    return Report(first, further, load_start, os.getloadavg())


def lines(report: Report) -> list[str]:
    """What the bench prints: each side's p50, p99, max, min (ms), the ratios, the load averages."""
    said = [f"load average at start: {' / '.join(f'{x:.2f}' for x in report.load_start)}",
            "first claim of each provider (its Cluster made, initialised, Ready; both at once): " + "; ".join(
                f"{name} {report.first[name]:.1f} s" for name in SIDES)]
    stats = {}
    for name in SIDES:
        ms = [t * 1000 for t in report.further[name]]
        stats[name] = (statistics.median(ms), percentile(ms, 0.99), max(ms), min(ms))
        said.append(f"{name}: {len(ms)} further claims one at a time, Application created -> claim ready: p50 "
                    f"{stats[name][0]:.0f} ms, p99 {stats[name][1]:.0f} ms, max {stats[name][2]:.0f} ms, min "
                    f"{stats[name][3]:.0f} ms")
    pooled, direct = stats["pooled"], stats["direct"]
    said.append(f"pooled / direct: p50 {pooled[0] / direct[0]:.2f}x, p99 {pooled[1] / direct[1]:.2f}x")
    said.append(f"load average at end: {' / '.join(f'{x:.2f}' for x in report.load_end)}")
    return said


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=50, help="further claims per provider (default 50)")
    args = parser.parse_args()
    os.environ.setdefault("PYTEST_XDIST_WORKER", "gw6")
    from tests.images.podman import make_images
    from tests.reconciler.conftest import install_our_crds
    from tests.reconciler.operator_proc import FAST, NODE_PLATFORM, Operator
    from tests.testbed import cnpg
    from tests.testbed.node import start_node
    from tests.testbed.testapp import build_test_app

    workdir = Path(tempfile.mkdtemp(prefix="apprafter-bench-pooler-", dir="/tmp"))
    bed = start_node(workdir / "node")
    operator: Operator | None = None
    try:
        test_app = bed.import_image(build_test_app())
        images = make_images(names=("cnpg", "postgresql", "pgbouncer"))
        operator_image, postgres_image, pgbouncer_image = (bed.import_image(images[name].ref)
                                                           for name in ("cnpg", "postgresql", "pgbouncer"))
        installed = cnpg.install(bed, operator_image, postgres_image, pgbouncer_image)
        install_our_crds(bed, workdir)
        bed.ensure_namespace(SERVICES)
        platform = workdir / "platform.yaml"
        platform.write_text(f"providerNamespaces: {{pg: {SERVICES}}}\n{NODE_PLATFORM}")
        operator = Operator(bed, workdir / "operator", [
            "--no-leader-elect", "--no-platform-stack", *FAST, "--platform", str(platform),
            "--backend-image", f"cloudnative-pg={postgres_image}",
            "--backend-image", f"cloudnative-pg.pgbouncer={pgbouncer_image}"], name="pooler-bench", inside=bed)
        operator.start()

        def pooler_up(name: str) -> None:
            if name == "pooled":  # its Pooler's PgBouncer running, as an app would use it, before the timed claims
                bed.wait_condition("apps/v1", "Deployment", f"{sides()[name].cluster}-pooler", SERVICES,
                                   "Available", timeout=300)

        report = measure(bed, test_app, args.claims, SERVICES, storage_class=installed.storage_class,
                         first_ready=pooler_up)
        print("\n".join(lines(report)))
    finally:
        if operator is not None:
            operator.stop()
        cnpg.uninstall(bed)
        bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
