#!/usr/bin/env python3
"""How soon a pod's status change reaches its Application's status: crash/recover cycles on the node tier.

  .venv/bin/python scripts/bench_health.py [--cycles 50] [--probes/--no-probes]

Starts a node (tests/testbed/node.py), the operator (`apprafter operator`, its ServiceAccount with the chart's
RBAC) and one Application running the test image (one replica, an HTTP readiness probe every second). Each
cycle SIGKILLs the container through containerd (a crash: exit 137, the kubelet restarts it at once, a first
crash has no back-off) and times, from this script's own watches on the Pod and on the Application, both
transitions:

  down  the pod's Ready condition turns False -> the Application leaves phase Ready
  up    the pod's Ready condition turns True  -> the Application is phase Ready again

then deletes the pod so that the next cycle crashes a fresh one (a second crash of one container would wait out
the kubelet's back-off). Prints p50/p90/p99/max of each, and the load average. Run it under
`flock /tmp/apprafter-heavy.lock` (it starts a node bed).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reconciler.conftest import install_our_crds
from tests.reconciler.helpers import API, ARGO, cr
from tests.testbed.gitops import chart_operator
from tests.testbed.kube import ssl_context
from tests.testbed.node import NodeTestBed, has_condition, start_node
from tests.testbed.testapp import build_test_app

NAMESPACE, NAME = "bench-health", "web"


class Watch(threading.Thread):
    """One watch of a collection from this process: every event's object with the moment it arrived."""

    def __init__(self, bed: NodeTestBed, path: str) -> None:
        super().__init__(daemon=True)
        self.bed, self.path = bed, path
        self.events: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self.http = httpx.Client(base_url=bed.url, verify=ssl_context(bed.ca_path),
                                 headers={"Authorization": f"Bearer {bed.token}"},
                                 timeout=httpx.Timeout(30, read=None))
        listed = self.http.get(path).json()
        self.version = listed["metadata"]["resourceVersion"]
        self.start()

    def run(self) -> None:
        try:
            while True:
                with self.http.stream("GET", self.path, params={"watch": "1", "resourceVersion": self.version}) as s:
                    for line in s.iter_lines():
                        if line:
                            event = json.loads(line)
                            self.version = event["object"]["metadata"].get("resourceVersion", self.version)
                            self.events.put((time.monotonic(), event["object"]))
        except httpx.TransportError:  # the bed stopped under it at the end of the run: nothing more to time
            return

    def until(self, what: str, check: Callable[[dict[str, Any]], bool], timeout: float = 120) -> float:
        """The arrival time of the first event (from now on) whose object passes `check`."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                at, obj = self.events.get(timeout=left)
            except queue.Empty:
                break
            if check(obj):
                return at
        raise TimeoutError(f"no {what} within {timeout:.0f} s")

    def drain(self) -> None:
        while not self.events.empty():
            self.events.get_nowait()


def ready_pod(bed: NodeTestBed) -> dict[str, Any]:
    def one(items: list[dict[str, Any]]) -> dict[str, Any] | None:
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return live[0] if len(live) == 1 and has_condition(live[0], "Ready") else None
    found: dict[str, Any] = bed.wait_list("v1", "Pod", NAMESPACE, one, what="one Ready pod")
    return found


def pod_ready(name: str, ready: bool) -> Callable[[dict[str, Any]], bool]:
    return lambda pod: pod["metadata"]["name"] == name and has_condition(pod, "Ready") == ready


def phase(obj: dict[str, Any]) -> str | None:
    status = obj.get("status") or {}
    return status.get("phase") if status.get("observedGeneration") == obj["metadata"].get("generation") else None


def quantiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return (f"p50 {cuts[49] * 1000:6.0f} ms  p90 {cuts[89] * 1000:6.0f} ms  p99 {cuts[98] * 1000:6.0f} ms  "
            f"max {ordered[-1] * 1000:6.0f} ms  (n={len(ordered)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--probes", action=argparse.BooleanOptionalAction, default=True,
                        help="an HTTP readiness probe every second (default); without: Ready when started")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="apprafter-bed-", dir="/tmp"))
    print(f"load before: {os.getloadavg()[0]:.1f}", flush=True)
    bed = start_node(workdir / "node")
    operator = None
    try:
        image = bed.import_image(build_test_app())
        install_our_crds(bed, workdir)
        operator = chart_operator(bed, workdir / "operator", ("--no-leader-elect", "--no-platform-stack")).start()
        bed.ensure_namespace(NAMESPACE)
        base: dict[str, Any] = {"image": image, "replicas": 1, "expose": {"port": 8080}, "env": {"MODE": "serve"}}
        if args.probes:
            base["health"] = {"readiness": {"path": "/ready", "periodSeconds": 1, "failureThreshold": 1}}
        bed.apply(cr(NAMESPACE, base, name=NAME), field_manager=ARGO)
        bed.wait(API, "Application", NAME, NAMESPACE, lambda o: phase(o) == "Ready", what="Ready")
        pods = Watch(bed, f"/api/v1/namespaces/{NAMESPACE}/pods")
        apps = Watch(bed, f"/apis/{API}/namespaces/{NAMESPACE}/applications")
        down: list[float] = []
        up: list[float] = []
        for cycle in range(args.cycles):
            pod = ready_pod(bed)
            name = pod["metadata"]["name"]
            container = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
            bed.wait(API, "Application", NAME, NAMESPACE, lambda o: phase(o) == "Ready", what="Ready")
            pods.drain()
            apps.drain()
            bed.ctr("tasks", "kill", "--signal", "SIGKILL", container, check=True)
            pod_down = pods.until("the pod unready", pod_ready(name, False))
            app_down = apps.until("the Application out of Ready", lambda o: phase(o) not in (None, "Ready"))
            pod_up = pods.until("the pod Ready again", pod_ready(name, True))
            app_up = apps.until("the Application Ready again", lambda o: phase(o) == "Ready")
            down.append(max(0.0, app_down - pod_down))
            up.append(max(0.0, app_up - pod_up))
            print(f"cycle {cycle + 1:3}: down {down[-1] * 1000:6.0f} ms, up {up[-1] * 1000:6.0f} ms", flush=True)
            bed.http.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", params={"gracePeriodSeconds": "0"})
        print(f"\npod status change -> Application status, {args.cycles} crash/recover cycles "
              f"(readiness probe: {'HTTP every 1 s' if args.probes else 'none'}; load now {os.getloadavg()[0]:.1f}):")
        print(f"  down (pod unready -> Application leaves Ready): {quantiles(down)}")
        print(f"  up   (pod Ready -> Application Ready):          {quantiles(up)}")
        print(f"  both:                                            {quantiles(down + up)}")
        print(f"operator reconciles: {operator.reconciles():.0f}, writes: {operator.writes():.0f}")
    finally:
        if operator is not None:
            operator.stop()
        bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
