"""Benchmark: how long the operator takes to converge after each fault of docs/operator.md's "failure modes" table,
on a loopback test bed of its own, default timings unless said (lease 30/20/10 s, watch timeout 120 s):
kill -9 mid-burst, etcd down 20 s, the API server restarted, both replicas killed at once, a stalled watch
(--watch-timeout 20: the bound scales with it), a field taken by another manager, the webhook down, API Priority and
Fairness throttling. Each figure is from the end of the fault (the process, server or webhook back) until every
Application is in its phase for its generation.
Usage: .venv/bin/python scripts/bench_faults.py [--apps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from renderer.manifests import KINDS  # noqa: E402 - after the repo root is importable
from tests.admission.cluster import Webhook, register, unregister  # noqa: E402
from tests.reconciler.conftest import install_our_crds  # noqa: E402
from tests.reconciler.faults import throttle, unthrottle  # noqa: E402
from tests.reconciler.helpers import apply, cr, edit, fresh_namespace  # noqa: E402
from tests.reconciler.operator_proc import Operator  # noqa: E402
from tests.reconciler.test_restarts_cluster import phases  # noqa: E402
from tests.testbed.gitops import chart_operator  # noqa: E402
from tests.testbed.kube import ApplyRejected, KubeTestBed, start_kube  # noqa: E402
from tests.testbed.procs import wait_for  # noqa: E402
from tests.testbed.proxy import SilentProxy  # noqa: E402
from toolchain.tools import crd_files  # noqa: E402

SIMPLE = edit(needs=None, env={"LOG_LEVEL": "info"})
FIGURES: list[tuple[str, str]] = []


def settle(bed: KubeTestBed, ns: str, names: list[str], phase: str = "Ready", op: Operator | None = None,
           restart: bool = False) -> float:
    """Seconds until every named Application is in `phase` for its generation; with `restart`, the operator is
    started again whenever it exits (what the kubelet does)."""
    start = time.perf_counter()

    def probe() -> bool | None:
        if restart and op is not None and not op.alive():
            op.start(wait=None)
        return all(p == phase for p in phases(bed, ns, names).values()) or None
    wait_for(f"{len(names)} {phase}", probe, 900, interval=0.1)
    return time.perf_counter() - start


def burst(bed: KubeTestBed, ns: str, names: list[str], spec: dict[str, Any]) -> None:
    for n in names:
        for _ in range(600):
            try:
                apply(bed, cr(ns, spec, name=n))
                break
            except ApplyRejected:
                time.sleep(0.1)


def note(fault: str, figure: str) -> None:
    FIGURES.append((fault, figure))
    print(f"{fault}: {figure}", flush=True)


def scenario(bed: KubeTestBed, work: Path, name: str, args: tuple[str, ...] = (),
             kubeconfig: Path | None = None) -> tuple[Operator, str]:
    ns = fresh_namespace(bed, name)
    op = Operator(bed, work / name, ("--namespace", ns, "--no-platform-stack", "--log-level", "warning", *args),
                  name=name, kubeconfig=kubeconfig)
    return op, ns


def kill_mid_burst(bed: KubeTestBed, work: Path, n: int) -> None:
    op, ns = scenario(bed, work, "kill", ("--no-leader-elect",))
    names = [f"a{i}" for i in range(n)]
    op.start()
    burst(bed, ns, names, SIMPLE)
    wait_for("the first Ready", lambda: "Ready" in phases(bed, ns, names).values() or None, 120, interval=0.01)
    op.kill()
    start = time.perf_counter()
    op.start()
    up = time.perf_counter() - start
    took = up + settle(bed, ns, names)
    note("kill -9 mid-burst", f"{took:.1f} s from restart to all {n} Ready ({up:.1f} s of it starting up)")
    op.stop()


def etcd_down(bed: KubeTestBed, work: Path, n: int) -> None:
    lease_ns = fresh_namespace(bed, "lease")
    op, ns = scenario(bed, work, "etcd", ("--leader-elect-resource-namespace", lease_ns))
    names = [f"a{i}" for i in range(n)]
    op.start()
    burst(bed, ns, names, SIMPLE)
    settle(bed, ns, names)
    bed.stop_etcd()
    time.sleep(20)  # the fault itself: 20 s without etcd
    exited = not op.alive()
    bed.start_etcd()
    start = time.perf_counter()
    burst(bed, ns, names, edit(SIMPLE, replicas=3))
    settle(bed, ns, names, op=op, restart=True)
    took = time.perf_counter() - start
    note("etcd down 20 s", f"{took:.1f} s from etcd back to {n} edits Ready (the leader "
         f"{'had exited (renew deadline 20 s) and was restarted' if exited else 'kept its lease'})")
    op.stop()


def apiserver_restart(bed: KubeTestBed, work: Path, n: int) -> None:
    op, ns = scenario(bed, work, "restart")
    names = [f"a{i}" for i in range(n)]
    op.start()
    burst(bed, ns, names, SIMPLE)
    settle(bed, ns, names)
    bed.restart_apiserver()
    start = time.perf_counter()
    burst(bed, ns, names, edit(SIMPLE, replicas=3))
    settle(bed, ns, names, op=op, restart=True)
    took = time.perf_counter() - start
    note("API server restarted", f"{took:.1f} s from its /readyz to {n} edits Ready")
    op.stop()


def both_leaders(bed: KubeTestBed, work: Path, n: int) -> None:
    lease_ns = fresh_namespace(bed, "lease")
    a, ns = scenario(bed, work, "both", ("--leader-elect-resource-namespace", lease_ns, "--identity", "a"))
    b = Operator(bed, work / "both-b", ("--namespace", ns, "--no-platform-stack", "--log-level", "warning",
                                        "--leader-elect-resource-namespace", lease_ns, "--identity", "b"),
                 name="both-b")
    names = [f"a{i}" for i in range(n)]
    a.start()
    b.start()
    burst(bed, ns, names, SIMPLE)
    settle(bed, ns, names)
    a.kill()
    b.kill()
    burst(bed, ns, names, edit(SIMPLE, replicas=3))
    start = time.perf_counter()
    a.start(wait="up")
    b.start(wait="up")
    settle(bed, ns, names)
    took = time.perf_counter() - start
    note("both replicas killed at once", f"{took:.1f} s from their restart to {n} edits Ready (the dead "
         "leader's Lease expires first: 30 s)")
    a.stop()
    b.stop()


def stalled_watch(bed: KubeTestBed, work: Path, n: int) -> None:
    server = urlsplit(bed.url)
    assert server.hostname and server.port
    proxy = SilentProxy(server.hostname, server.port)
    config = yaml.safe_load(bed.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    path = work / "proxied.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    op, ns = scenario(bed, work, "stall", ("--no-leader-elect", "--resync", "3600", "--watch-timeout", "20"),
                      kubeconfig=path)
    names = [f"a{i}" for i in range(n)]
    op.start()
    burst(bed, ns, names, SIMPLE)
    settle(bed, ns, names)
    proxy.freeze()
    start = time.perf_counter()
    burst(bed, ns, names, edit(SIMPLE, replicas=3))
    settle(bed, ns, names)
    took = time.perf_counter() - start
    note("watch stalled (held open, silent)", f"{took:.1f} s from the stall to {n} edits Ready with "
         "--watch-timeout 20 (bound 25 s + a re-list; 130 s at the default 120)")
    op.stop()
    proxy.stop()


def drift(bed: KubeTestBed, work: Path, n: int) -> None:
    op, ns = scenario(bed, work, "drift", ("--no-leader-elect",))
    op.start()
    burst(bed, ns, ["demo"], SIMPLE)
    settle(bed, ns, ["demo"])
    start = time.perf_counter()
    bed.http.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/demo/scale", params={"fieldManager": "kubectl"},
                   content=json.dumps({"spec": {"replicas": 9}}),
                   headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
    wait_for("put back", lambda: (bed.get("apps/v1", "Deployment", "demo", ns) or {}).get("spec", {}).get(
        "replicas") == 2 or None, 120, interval=0.02)
    scaled = time.perf_counter() - start
    start = time.perf_counter()
    bed.delete("v1", "Service", "demo", ns)
    wait_for("re-created", lambda: bed.get("v1", "Service", "demo", ns) or None, 120, interval=0.02)
    note("a child's field taken by another manager / a child deleted",
         f"put back in {scaled:.2f} s / re-created in {time.perf_counter() - start:.2f} s")
    op.stop()


def webhook_down(bed: KubeTestBed, work: Path, n: int) -> None:
    webhook = Webhook(work / "webhook")
    webhook.start()
    register(bed, webhook.base_url, webhook.ca.pem)
    ns = fresh_namespace(bed, "hook")
    op = chart_operator(bed, work / "hook", ("--no-leader-elect", "--no-platform-stack", "--namespace", ns), (ns,),
                        name="hook")
    names = [f"a{i}" for i in range(n)]
    try:
        op.start()
        burst(bed, ns, names[: n // 2], SIMPLE)
        assert webhook.process is not None
        webhook.process.popen.kill()
        refused = 0
        for name in names[n // 2:]:
            try:
                apply(bed, cr(ns, SIMPLE, name=name))
            except ApplyRejected:
                refused += 1
        webhook.stop()
        webhook.start()
        start = time.perf_counter()
        burst(bed, ns, names, SIMPLE)
        settle(bed, ns, names)
        took = time.perf_counter() - start
        note("webhook killed (failurePolicy Fail)", f"{refused} of {n - n // 2} writes refused while down; "
             f"{took:.1f} s from its return to all {n} Ready")
    finally:
        op.stop()
        unregister(bed)
        webhook.stop()


def throttled(bed: KubeTestBed, work: Path, n: int) -> None:
    name = "bench-throttled"
    token = bed.service_account_token(name, "operator")
    bed.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": name}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}})
    unthrottled = bed.kubeconfig_for(work / "plain.kubeconfig", token, name)
    took = {}
    for label, limited in (("unthrottled", False), ("throttled", True)):
        if limited:
            throttle(bed, name, (name, "operator"))
            time.sleep(2)  # the server takes up new flow control settings a moment later
        op, ns = scenario(bed, work, label, ("--no-leader-elect",), kubeconfig=unthrottled)
        names = [f"a{i}" for i in range(n)]
        burst(bed, ns, names, SIMPLE)
        start = time.perf_counter()
        op.start()
        settle(bed, ns, names)
        took[label] = time.perf_counter() - start
        rejected = op.metric("apprafter_kube_requests_total", code="429")
        total = op.metric("apprafter_kube_requests_total")
        op.stop()
    note("API Priority and Fairness throttling (1 share, no borrowing, reject)",
         f"{took['throttled']:.1f} s to {n} Ready vs {took['unthrottled']:.1f} s unthrottled; {rejected:.0f} of "
         f"{total:.0f} requests rejected with 429")
    unthrottle(bed, name)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--apps", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    args = parser.parse_args()
    scenarios: dict[str, Callable[[KubeTestBed, Path, int], None]] = {
        "kill": kill_mid_burst, "etcd": etcd_down, "restart": apiserver_restart, "both": both_leaders,
        "stall": stalled_watch, "drift": drift, "webhook": webhook_down, "throttle": throttled}
    chosen = [s for s in args.only.split(",") if s] or list(scenarios)
    with tempfile.TemporaryDirectory(prefix="apprafter-faults-", dir="/tmp") as tmp:
        work = Path(tmp)
        bed = start_kube(work / "kube", install_crds=False)
        try:
            bed.install_crds([f for f in crd_files() if any(k.plural in f.name for k in KINDS)])
            install_our_crds(bed, work)
            for name in chosen:
                scenarios[name](bed, work, args.apps)
        finally:
            bed.stop()
    load = os.getloadavg()
    print(f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    for fault, figure in FIGURES:
        print(f"| {fault} | {figure} |")


if __name__ == "__main__":
    main()
