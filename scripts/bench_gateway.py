#!/usr/bin/env python3
"""The Gateway's data-plane cost on the node tier (issue 32 item 4): Traefik (tests/testbed/traefik.py) in front of
one pod of the test image, against the same pod asked directly, in one run side by side; and the steps from apply
to the first HTTPS 200.

  .venv/bin/python scripts/bench_gateway.py [--seconds S] [--concurrency N] [--rounds R]

A node bed of its own (start_node), Traefik and the chart's `public` Gateway, one app rendered by our renderer
(`expose: {network: public}`). The load comes from inside the node's network namespace: N threads in one Python
process, each on one keep-alive connection (the test app answers HTTP/1.0 and closes every connection, so a
client talking to the pod connects anew for each request, as through the Gateway Traefik does to the pod),
GET / for S seconds per path; the three paths alternate R rounds (so a
change in the machine's load hits each alike): the pod's IP on 8080 (plain HTTP), the Gateway's address on 80 (a
hand-written route on the `http` listener to the same Service) and on 443 (the rendered route: TLS terminated by
Traefik, SNI the app's host). Prints requests per second, p50 and p99 per path and the ratios to the pod's, with
the load average. Run it under `flock /tmp/apprafter-heavy.lock`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.images.podman import make_images
from tests.testbed.node import NodeTestBed, start_node
from tests.testbed.testapp import build_test_app
from tests.testbed.traefik import GATEWAY, GATEWAY_API, NAMESPACE, deploy_app, install_traefik, route_accepted

# The load client, run inside the namespace (argv: a JSON spec): threads on keep-alive connections, each timing
# every request; prints the count, the failures and every latency in milliseconds.
CLIENT = r'''
import http.client, json, socket, ssl, sys, threading, time
spec = json.loads(sys.argv[1])
latencies, failures, lock = [], [], threading.Lock()
context = ssl.create_default_context(cafile=spec["ca"]) if spec["tls"] else None

def connect():
    conn = http.client.HTTPConnection(spec["host"], spec["port"], timeout=10)

    def dial():  # to the address, SNI and Host the app's host; http.client calls it again after a close
        sock = socket.create_connection((spec["address"], spec["port"]), timeout=10)
        conn.sock = context.wrap_socket(sock, server_hostname=spec["host"]) if context else sock
    conn.connect = dial
    return conn

def worker(stop_at):
    mine, bad, conn = [], 0, connect()
    while time.monotonic() < stop_at:
        started = time.monotonic()
        try:
            conn.request("GET", "/", headers={"Host": spec["host"]})
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except OSError:
            ok = False
            conn.close()
            conn = connect()
        if ok:
            mine.append((time.monotonic() - started) * 1000)
        else:
            bad += 1
    with lock:
        latencies.extend(mine)
        failures.append(bad)

stop_at = time.monotonic() + spec["seconds"]
threads = [threading.Thread(target=worker, args=(stop_at,)) for _ in range(spec["concurrency"])]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"ok": len(latencies), "failed": sum(failures), "latencies": latencies}))
'''


def load(bed: NodeTestBed, spec: dict[str, Any]) -> dict[str, float]:
    """One load run from inside the namespace: requests per second, p50 and p99 in milliseconds."""
    import subprocess

    out = subprocess.run(bed.nsenter(sys.executable, "-c", CLIENT, json.dumps(spec)), capture_output=True,
                         text=True, check=True, timeout=spec["seconds"] + 60).stdout
    result = json.loads(out)
    latencies = sorted(result["latencies"])
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {"rps": result["ok"] / spec["seconds"], "p50": cuts[49], "p99": cuts[98], "failed": result["failed"]}


def plain_route(host: str) -> dict[str, Any]:
    """The same Service on the Gateway's `http` listener: the proxy's cost without TLS."""
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": {"name": "bench-plain"}, "spec": {
        "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY,
                        "namespace": NAMESPACE, "sectionName": "http"}],
        "hostnames": [host], "rules": [{"backendRefs": [{"name": "bench", "port": 8080}]}]}}


def first_200(gateway: Any, host: str, started: float, timeout: float = 60) -> float:
    """Seconds from `started` to the first HTTPS 200 for `host` (asked every 50 ms)."""
    import subprocess

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if gateway.curl(f"https://{host}/", host, timeout=2).status == 200:
                return time.monotonic() - started
        except subprocess.CalledProcessError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"no HTTPS 200 for {host} within {timeout} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="apprafter-bench-gateway-", dir="/tmp"))
    started = time.monotonic()
    bed = start_node(workdir / "node")
    try:
        print(f"node up in {time.monotonic() - started:.1f} s")
        image = bed.import_image(build_test_app())
        traefik = bed.import_image(make_images(names=("traefik",))["traefik"].ref)
        mark = time.monotonic()
        gateway = install_traefik(bed, traefik, workdir / "gateway")
        print(f"Traefik installed, Gateway Programmed: {time.monotonic() - mark:.1f} s")

        mark = time.monotonic()
        objects, steps = deploy_app(gateway, workdir / "app", "bench", image, '{port: 8080, network: "public"}',
                                    "bench")
        host = objects["HTTPRoute"]["spec"]["hostnames"][0]
        bed.wait(GATEWAY_API, "HTTPRoute", "bench", "bench", route_accepted, timeout=60)
        steps["HTTPRoute Accepted"] = time.monotonic() - mark
        steps["first HTTPS 200"] = first_200(gateway, host, mark)
        print("apply -> first HTTPS 200, per step (s from the first apply):")
        for step, seconds in steps.items():
            print(f"  {step:<32} {seconds:6.2f}")

        # plain HTTP through the proxy: the app's redirect route (301 to HTTPS) gives way to a route to the app
        bed.delete(GATEWAY_API, "HTTPRoute", "bench-redirect", "bench")
        bed.apply(plain_route(host), "bench", field_manager="bench")
        bed.wait(GATEWAY_API, "HTTPRoute", "bench-plain", "bench", route_accepted, timeout=60)
        pods = bed.http.get("/api/v1/namespaces/bench/pods").json()["items"]
        pod_ip = next(p["status"]["podIP"] for p in pods if p["metadata"]["name"].startswith("bench-"))
        base = {"host": host, "seconds": args.seconds, "concurrency": args.concurrency, "ca": str(gateway.ca_path)}
        paths = {"pod direct (HTTP)": {**base, "address": pod_ip, "port": 8080, "tls": False},
                 "gateway HTTP": {**base, "address": gateway.address, "port": 80, "tls": False},
                 "gateway HTTPS": {**base, "address": gateway.address, "port": 443, "tls": True}}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
        loads = []
        for _ in range(args.rounds):
            for name, spec in paths.items():
                results[name].append(load(bed, spec))
                loads.append(os.getloadavg()[0])
        print(f"\n{args.rounds} rounds x {args.seconds:.0f} s per path, {args.concurrency} keep-alive connections, "
              f"load average {min(loads):.1f}-{max(loads):.1f}")
        print(f"{'path':<20} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7} {'rps/pod':>8} {'p50/pod':>8} "
              f"{'p99/pod':>8}")
        median = {name: {k: statistics.median(r[k] for r in runs) for k in ("rps", "p50", "p99", "failed")}
                  for name, runs in results.items()}
        direct = median["pod direct (HTTP)"]
        for name, m in median.items():
            print(f"{name:<20} {m['rps']:8.0f} {m['p50']:8.2f} {m['p99']:8.2f} {m['failed']:7.0f} "
                  f"{m['rps'] / direct['rps']:8.2f} {m['p50'] / direct['p50']:8.2f} {m['p99'] / direct['p99']:8.2f}")
    finally:
        bed.stop()


if __name__ == "__main__":
    main()
