"""Benchmark: the admission webhook alone over TLS on loopback, and end to end through the API server.

(1) `apprafter webhook` (a subprocess, as in the cluster) answering the parser example's Application CREATE:
    200 requests/s for 10 s (open loop: latency counted from each request's scheduled time), then a
    saturation run (closed loop, `--clients` connections); /healthz on the same server and client at the same
    rate is the floor (TLS + HTTP + this Python client), so the review's own cost is the difference.
    `--servers` also runs the same ASGI app under hypercorn, side by side (why admission/ uses uvicorn).
(2) Application creates through the test bed's kube-apiserver into a namespace the webhook is registered for
    and into one it is not, interleaved; the difference is what the webhook adds to a user's write.
(3) `--hostile` (issues 24 and 34): another tenant's small creates through kube-apiserver at a fixed rate, alone and
    while a hostile tenant (another user) floods, interleaved rounds of the same run: p50/p99 before and during,
    side by side, in the webhook and end to end, and each tenant's refusals. The flood is `--flood valid` (issue 34:
    valid ~110 KiB Applications from `--flood-clients` connections) or `--flood heavy` (issue 24: 2 MB and
    10 000-environment ones). Also: the webhook's handler time through kube-apiserver at a paced `--rate`, with the
    bounds and shares in place; the webhook's resident memory (with its workers) before, during and after a burst of
    slow bodies; the CPU and memory one review of the largest Application etcd stores (1.5 MiB) takes, which the
    chart's budgets follow from.
    `--split-cpus`: the webhook (and its workers) on the last CPU, everything else (etcd, kube-apiserver, the
    clients, the flood) on the others, as when the webhook runs on a node of its own beside the control plane: what
    the other tenant then waits for is the webhook's sharing alone, not the API server's decoding of the flood.

Usage: .venv/bin/python scripts/bench_webhook.py [--rate 200] [--seconds 10] [--clients 4] [--creates 200]
                                                  [--servers] [--skip-e2e] [--hostile] [--hostile-rate 20]
                                                  [--flood valid|heavy] [--flood-clients 36] [--split-cpus]
                                                  [--flood-only]
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from renderer.load import load  # noqa: E402 - after the repository root is importable
from renderer.render import render_loaded  # noqa: E402 - as above
from tests.testbed.kube import KubeTestBed, start_kube  # noqa: E402 - as above
from tests.testbed.pki import CA, ServingCert  # noqa: E402 - as above
from tests.testbed.procs import ManagedProcess, free_port, wait_for  # noqa: E402 - as above

ROUNDS = 5
HYPERCORN = """
import asyncio, logging, sys
from hypercorn.asyncio import serve
from hypercorn.config import Config
from admission import review
from admission.app import make_app
review.warm_up()
logging.basicConfig(stream=sys.stderr, level=logging.INFO)
config = Config()
config.bind = [f"127.0.0.1:{sys.argv[3]}"]
config.certfile, config.keyfile = sys.argv[1], sys.argv[2]
config.accesslog = None
asyncio.run(serve(make_app(review.Settings(), ready=lambda: True), config))
"""


def parser_cr(namespace: str, name: str = "parser") -> dict[str, Any]:
    cr: dict[str, Any] = render_loaded(load(ROOT / "examples" / "parser"), "prod", "cr", namespace).objects[0]
    cr["metadata"]["name"] = name
    return cr


def review_body() -> bytes:
    cr = parser_cr("team-a")
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "apprafter.io", "version": "v1alpha1", "kind": "Application"},
        "resource": {"group": "apprafter.io", "version": "v1alpha1", "resource": "applications"},
        "name": "parser", "namespace": "team-a", "operation": "CREATE",
        "userInfo": {"username": "argocd-application-controller"}, "object": cr, "oldObject": None}}).encode()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def summary(values: list[float]) -> str:
    if not values:
        return "none"
    return f"p50 {pct(values, 0.5):6.2f} ms  p99 {pct(values, 0.99):6.2f} ms  (n={len(values)})"


def open_loop(base_url: str, ca: Path, send: Callable[[httpx.Client], httpx.Response], rate: float,
              seconds: float, workers: int = 4, token: str | None = None) -> list[float]:
    """Requests at a fixed rate; each latency from its scheduled time (no coordinated omission)."""
    total = int(rate * seconds)
    start = time.perf_counter() + 0.2
    latencies: list[float] = []
    lock, counter = threading.Lock(), iter(range(total))

    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def worker() -> None:
        with httpx.Client(base_url=base_url, verify=str(ca), timeout=10, headers=headers) as client:
            send(client)  # connect (TLS handshake) before the clock starts
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                due = start + i / rate
                time.sleep(max(0.0, due - time.perf_counter()))
                resp = send(client)
                done = time.perf_counter()
                assert resp.status_code == 200, resp.text
                with lock:
                    latencies.append(done - due)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def closed_loop(base_url: str, ca: Path, send: Callable[[httpx.Client], httpx.Response], clients: int,
                seconds: float) -> tuple[list[float], float]:
    """As fast as `clients` connections go: (latencies, requests per second)."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def worker() -> None:
        with httpx.Client(base_url=base_url, verify=str(ca), timeout=10) as client:
            send(client)
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                resp = send(client)
                elapsed = time.perf_counter() - t0
                assert resp.status_code == 200, resp.text
                with lock:
                    latencies.append(elapsed)

    began = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, len(latencies) / (time.perf_counter() - began)


def cpu_seconds(proc: ManagedProcess) -> float:
    """User + system CPU time the server process has used (from /proc): what a review costs whatever the load."""
    fields = Path(f"/proc/{proc.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_times(proc: ManagedProcess, since: int) -> tuple[list[float], int]:
    """The webhook's own time per /validate review (its log line's "ms": body read to answer written), logged
    after byte offset `since`; and the new offset."""
    text = proc.log_path.read_bytes()
    times = []
    for line in text[since:].decode(errors="replace").splitlines():
        start = line.find('{"webhook":"validate"')
        if start >= 0:
            times.append(json.loads(line[start:])["ms"] / 1000)
    return times, len(text)


# The CPUs the webhook runs on (`--split-cpus`): none, the same CPUs as everything else.
WEBHOOK_CPUS: set[int] = set()


def split_cpus() -> None:
    """The webhook gets the last CPU; this process (and so the bed, the clients and the flood it starts) the rest."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--split-cpus needs two CPUs or more")
    WEBHOOK_CPUS.add(cpus[-1])
    os.sched_setaffinity(0, set(cpus[:-1]))
    print(f"webhook on CPU {cpus[-1]}, everything else on CPU {','.join(map(str, cpus[:-1]))}")


def start_server(kind: str, cert: ServingCert, workdir: Path) -> tuple[ManagedProcess, str]:
    port = free_port()
    # taskset sets the affinity before exec: the webhook's worker processes inherit it
    pinned = ["taskset", "-c", ",".join(map(str, sorted(WEBHOOK_CPUS)))] if WEBHOOK_CPUS else []
    if kind == "uvicorn":
        argv = [*pinned, sys.executable, "-m", "apprafter", "webhook", "--cert-file", str(cert.cert_path), "--key-file",
                str(cert.key_path), "--host", "127.0.0.1", "--port", str(port)]
    else:
        argv = [*pinned, sys.executable, "-c", HYPERCORN, str(cert.cert_path), str(cert.key_path), str(port)]
    proc = ManagedProcess(kind, argv, workdir / f"{kind}.log", cwd=ROOT)
    url = f"https://127.0.0.1:{port}"
    with httpx.Client(verify=str(cert.ca_path), timeout=5) as probe:
        wait_for(f"{kind} /readyz", lambda: probe.get(url + "/readyz").status_code == 200 or None, 60, proc)
    return proc, url


def bench_handler(args: argparse.Namespace, workdir: Path) -> None:
    cert = CA().serving_cert(workdir / "tls", "webhook")
    body = review_body()

    def validate(client: httpx.Client) -> httpx.Response:
        resp = client.post("/validate", content=body, headers={"Content-Type": "application/json"})
        assert resp.json()["response"]["allowed"] is True
        return resp

    def healthz(client: httpx.Client) -> httpx.Response:
        return client.get("/healthz")

    for kind in ("uvicorn", "hypercorn") if args.servers else ("uvicorn",):
        proc, url = start_server(kind, cert, workdir)
        try:
            print(f"--- {kind}: Application CREATE review ({len(body)} bytes), TLS on loopback")
            floor: list[float] = []
            reviews: list[float] = []
            _, offset = server_times(proc, 0)
            cpu = {"healthz": 0.0, "validate": 0.0}
            for _ in range(ROUNDS):  # interleaved, so both see the same machine load
                before = cpu_seconds(proc)
                floor += open_loop(url, cert.ca_path, healthz, args.rate, args.seconds / ROUNDS)
                middle = cpu_seconds(proc)
                reviews += open_loop(url, cert.ca_path, validate, args.rate, args.seconds / ROUNDS)
                cpu["healthz"] += middle - before
                cpu["validate"] += cpu_seconds(proc) - middle
            handler, offset = server_times(proc, offset)
            print(f"{args.rate:.0f} req/s for {args.seconds:.0f} s  /validate  {summary(reviews)}")
            print(f"{args.rate:.0f} req/s, in the webhook   /validate  {summary(handler)}   (its log: body read to "
                  "answer written)")
            print(f"{args.rate:.0f} req/s for {args.seconds:.0f} s  /healthz   {summary(floor)}   (floor: TLS + HTTP + "
                  "client)")
            print(f"review's own cost at {args.rate:.0f} req/s: p50 +{pct(reviews, .5) - pct(floor, .5):.2f} ms, "
                  f"p99 +{pct(reviews, .99) - pct(floor, .99):.2f} ms")
            per_review, per_probe = (1000 * cpu[k] / (args.rate * args.seconds) for k in ("validate", "healthz"))
            print(f"server CPU per request: /validate {per_review:.2f} ms, /healthz {per_probe:.2f} ms "
                  f"(one core: ~{1000 / per_review:.0f} reviews/s)")
            saturated, rps = closed_loop(url, cert.ca_path, validate, args.clients, args.seconds)
            handler, offset = server_times(proc, offset)
            print(f"saturation, {args.clients} connections: {rps:.0f} req/s  {summary(saturated)}")
            print(f"saturation, in the webhook:           {summary(handler)}")
        finally:
            proc.stop()


def bed_with_our_crds(workdir: Path, name: str) -> KubeTestBed:
    """A bare API server with the CRDs `apprafter crds` prints."""
    bed: KubeTestBed = start_kube(workdir / name, install_crds=False)
    try:
        crds = subprocess.run([sys.executable, "-m", "apprafter", "crds"], capture_output=True, text=True,
                              check=True, cwd=ROOT)
        (workdir / f"{name}-crds.yaml").write_text(crds.stdout)
        bed.install_crds([workdir / f"{name}-crds.yaml"])
    except BaseException:
        bed.stop()
        raise
    return bed


def bench_end_to_end(args: argparse.Namespace, workdir: Path) -> None:
    bed = bed_with_our_crds(workdir, "kube")
    cert = CA().serving_cert(workdir / "tls-e2e", "webhook")
    proc: ManagedProcess | None = None
    try:
        proc, url = start_server("uvicorn", cert, workdir)
        with_ns, without_ns = f"bench-on-{uuid.uuid4().hex[:6]}", f"bench-off-{uuid.uuid4().hex[:6]}"
        for ns in (with_ns, without_ns):
            bed.ensure_namespace(ns)
        bed.http.patch(f"/api/v1/namespaces/{with_ns}", json={"metadata": {"labels": {"apprafter-bench": "on"}}},
                       headers={"Content-Type": "application/merge-patch+json"}).raise_for_status()
        hook = {"name": "applications.apprafter.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Fail", "timeoutSeconds": 5, "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchLabels": {"apprafter-bench": "on"}},
                "clientConfig": {"url": url + "/validate", "caBundle": base64.b64encode(cert.ca_pem).decode()},
                "rules": [{"apiGroups": ["apprafter.io"], "apiVersions": ["v1alpha1"],
                           "operations": ["CREATE", "UPDATE"], "resources": ["applications"]}]}
        bed.apply({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": "apprafter-bench"}, "webhooks": [hook]})
        canary = parser_cr(with_ns, "canary")
        canary["spec"]["base"]["env"]["bad-key"] = "x"
        info = bed.resource_for("apprafter.io/v1alpha1", "Application")
        wait_for("the webhook to be honoured", lambda: "applications.apprafter.io" in bed.http.post(
            info.path(None, with_ns), json=canary, params={"dryRun": "All"}).text or None, 30)
        template = parser_cr("x")
        timings: dict[str, list[float]] = {with_ns: [], without_ns: []}
        for i in range(args.creates + 10):
            for ns in (with_ns, without_ns) if i % 2 else (without_ns, with_ns):
                obj = copy.deepcopy(template)
                obj["metadata"].update(name=f"app-{i:04d}", namespace=ns)
                t0 = time.perf_counter()
                resp = bed.http.post(info.path(None, ns), json=obj, params={"fieldValidation": "Strict"})
                elapsed = time.perf_counter() - t0
                assert resp.status_code == 201, resp.text
                if i >= 10:  # the first creates warm both paths (connections, caches)
                    timings[ns].append(elapsed)
        on, off = timings[with_ns], timings[without_ns]
        print("--- end to end: Application create (POST) through kube-apiserver, interleaved")
        print(f"webhook registered      {summary(on)}")
        print(f"webhook not registered  {summary(off)}")
        added_p50, added_p99 = pct(on, .5) - pct(off, .5), pct(on, .99) - pct(off, .99)
        print(f"added by the webhook: p50 +{added_p50:.2f} ms, p99 +{added_p99:.2f} ms "
              f"(median ratio {statistics.median(on) / statistics.median(off):.2f}x)")
    finally:
        if proc is not None:
            proc.stop()
        bed.stop()


def large_application(namespace: str, name: str, target: int) -> dict[str, Any]:
    """The parser example grown to about `target` bytes of env literals (valid: the review's whole path runs)."""
    cr = parser_cr(namespace, name)
    cr["spec"]["base"]["env"] = {f"K{i}": "x" * 100 for i in range(target // 110)}
    return cr


def many_environments(namespace: str, name: str, count: int) -> dict[str, Any]:
    """`count` environments, named against the rules, each with a literal: the shape that was quadratic."""
    cr = parser_cr(namespace, name)
    for i in range(count):
        cr["spec"]["environments"][f"E{i}"] = {"env": {"NOTE": f"literal-{i}-of-many"}}
    return cr


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and its children (the webhook and its review workers)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = 0
    for one in (pid, *map(int, children)):
        for line in Path(f"/proc/{one}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


FLOOD = """
import json, sys, threading, httpx
from pathlib import Path
url, ca, token, path, first, second, clients, out, pid = sys.argv[1:]
bodies = [Path(first).read_bytes(), Path(second).read_bytes()]
lock = threading.Lock()
def rss():
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = 0
    for one in (pid, *children):
        for line in Path(f"/proc/{one}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total
headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token != "-" else {})}
def flood(i):
    with httpx.Client(base_url=url, verify=ca, timeout=30, headers=headers) as client, open(out, "a") as log:
        while True:
            if token == "-":  # straight to the webhook: an AdmissionReview
                resp = client.post(path, content=bodies[i % 2])
                answer = resp.json()["response"]
                said = "admitted" if answer["allowed"] else answer["status"]["message"]
            else:
                resp = client.post(path, content=bodies[i % 2], params={"dryRun": "All"})
                said = resp.json().get("message", "") if resp.status_code >= 300 else "admitted"
            why = ("budget" if "budget" in said else "capacity" if "capacity" in said else "webhook timed out"
                   if "deadline" in said or "timeout" in said else "refused by the rules" if "denied" in said
                   else said[:80])
            with lock:
                log.write(json.dumps({"outcome": f"{resp.status_code} {why}"}) + "\\n")
                log.write(json.dumps({"rss": rss()}) + "\\n")
                log.flush()
            i += 1
for n in range(int(clients)):
    threading.Thread(target=flood, args=(n,), daemon=True).start()
threading.Event().wait()
"""
ONE_REVIEW = """
import json, sys, time
from admission import review
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
review.warm_up()
body = open(sys.argv[1], "rb").read()
before = hwm()
t0 = time.process_time()
outcome = review.validating(body, review.Settings())
print(json.dumps({"cpu": time.process_time() - t0, "grown": hwm() - before, "allowed": outcome.allowed}))
"""


def one_review_cost(workdir: Path) -> None:
    """CPU time and peak memory growth of one review of a 1.5 MiB Application (the largest etcd stores) and of a
    10 000-environment one, each in a fresh process warmed up as a worker is."""
    for what, obj in (("a 1.5 MiB Application", large_application("team-a", "large", 3 << 19)),
                      ("10 000 environments, each refused", many_environments("team-a", "wide", 10_000))):
        path = workdir / "review.json"
        path.write_bytes(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "apprafter.io", "version": "v1alpha1", "kind": "Application"},
            "operation": "CREATE", "userInfo": {"username": "bench"}, "object": obj}}).encode())
        out = subprocess.run([sys.executable, "-c", ONE_REVIEW, str(path)], capture_output=True, text=True,
                             check=True, cwd=ROOT)
        result = json.loads(out.stdout)
        print(f"one review of {what} ({path.stat().st_size >> 10} KiB): {result['cpu'] * 1000:.0f} ms CPU, peak "
              f"memory +{result['grown']:.0f} MiB, allowed={result['allowed']} (the chart's budget per review: "
              "2 s CPU, 96 MiB)")


def as_review(obj: dict[str, Any]) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "apprafter.io", "version": "v1alpha1", "kind": "Application"},
        "resource": {"group": "apprafter.io", "version": "v1alpha1", "resource": "applications"},
        "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"], "operation": "CREATE",
        "userInfo": {"username": "hostile"}, "object": obj, "oldObject": None}}).encode()


def flood_rounds(workdir: Path, argv: list[str], measure: Callable[[], list[float]]) -> tuple[list[float], list[float]]:
    """(alone, during): `measure` in interleaved rounds without and with the flood process `argv` running."""
    alone: list[float] = []
    during: list[float] = []
    for _ in range(ROUNDS):
        alone += measure()
        flooding = subprocess.Popen(argv, cwd=ROOT)  # its own interpreter: its threads take none of this one's
        time.sleep(1.0)  # under way before the round starts
        during += measure()
        flooding.terminate()
        flooding.wait(30)
    return alone, during


def outcomes_of(path: Path) -> tuple[dict[str, int], int]:
    counts: dict[str, int] = {}
    peak = 0
    for line in path.read_text().splitlines() if path.exists() else []:
        entry = json.loads(line)
        if entry.get("rss"):
            peak = max(peak, entry["rss"])
        else:
            counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    return counts, peak


def bench_hostile_webhook(args: argparse.Namespace, workdir: Path) -> None:
    """The webhook alone: the other tenant's reviews at --rate while the flood posts hostile reviews to it."""
    cert = CA().serving_cert(workdir / "tls-alone", "webhook")
    proc, url = start_server("uvicorn", cert, workdir)
    try:
        small = review_body()
        (workdir / "w-0.json").write_bytes(as_review(large_application("hostile", "large", 2 << 20)))
        (workdir / "w-1.json").write_bytes(as_review(many_environments("hostile", "wide", 10_000)))
        argv = [sys.executable, "-c", FLOOD, url, str(cert.ca_path), "-", "/validate", str(workdir / "w-0.json"),
                str(workdir / "w-1.json"), str(args.clients), str(workdir / "w-outcomes.jsonl"), str(proc.popen.pid)]

        def validate(client: httpx.Client) -> httpx.Response:
            resp = client.post("/validate", content=small, headers={"Content-Type": "application/json"})
            assert resp.json()["response"]["allowed"] is True, resp.text
            return resp

        alone, during = flood_rounds(workdir, argv, lambda: open_loop(url, cert.ca_path, validate, args.rate,
                                                                      args.seconds / ROUNDS))
        counts, peak = outcomes_of(workdir / "w-outcomes.jsonl")
        print(f"--- the webhook alone: the other tenant's reviews at {args.rate:.0f}/s, a flood of 2 MB and "
              f"10 000-environment reviews from {args.clients} connections")
        print(f"other tenant's reviews, alone          {summary(alone)}")
        print(f"other tenant's reviews, during a flood {summary(during)}")
        print(f"p50 {pct(during, .5) / pct(alone, .5):.2f}x, p99 {pct(during, .99) / pct(alone, .99):.2f}x "
              "(during / alone, same run)")
        print("hostile reviews: " + ", ".join(f"{n} x {k}" for k, n in sorted(counts.items())))
        print(f"webhook resident memory, workers included: peak {peak / (1 << 20):.0f} MiB (chart limit 384 MiB)")
    finally:
        proc.stop()


TENANT, FLOODER = "tenant-other", "tenant-flood"


def bed_with_tenants(workdir: Path, name: str) -> KubeTestBed:
    """A bare API server with our CRDs and two tenants who may write Applications (and nothing else)."""
    bed: KubeTestBed = start_kube(workdir / name, install_crds=False, users={TENANT: (), FLOODER: ()})
    try:
        crds = subprocess.run([sys.executable, "-m", "apprafter", "crds"], capture_output=True, text=True,
                              check=True, cwd=ROOT)
        (workdir / f"{name}-crds.yaml").write_text(crds.stdout)
        bed.install_crds([workdir / f"{name}-crds.yaml"])
        rbac = "rbac.authorization.k8s.io"
        bed.apply({"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": "bench-tenant"},
                   "rules": [{"apiGroups": ["apprafter.io"], "resources": ["applications"], "verbs": ["*"]}]})
        bed.apply({"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "bench-tenant"},
                   "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "bench-tenant"},
                   "subjects": [{"kind": "User", "name": u, "apiGroup": rbac} for u in (TENANT, FLOODER)]})
    except BaseException:
        bed.stop()
        raise
    return bed


def register_webhook(bed: KubeTestBed, url: str, cert: ServingCert, namespaces: list[str], name: str) -> None:
    hook = {"name": "applications.apprafter.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 5, "matchPolicy": "Equivalent",
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                        "values": namespaces}]},
            "clientConfig": {"url": url + "/validate", "caBundle": base64.b64encode(cert.ca_pem).decode()},
            "rules": [{"apiGroups": ["apprafter.io"], "apiVersions": ["v1alpha1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["applications"]}]}
    bed.apply({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": name}, "webhooks": [hook]})
    info = bed.resource_for("apprafter.io/v1alpha1", "Application")
    canary = parser_cr(namespaces[0], "canary")
    canary["spec"]["base"]["env"]["bad-key"] = "x"
    wait_for("the webhook to be honoured", lambda: "applications.apprafter.io" in bed.http.post(
        info.path(None, namespaces[0]), json=canary, params={"dryRun": "All"}).text or None, 30)


def handler_times(proc: ManagedProcess, namespace: str, since: int = 0) -> list[float]:
    """The webhook's own time (its log's "ms") for each review of an object in `namespace`, after byte `since`."""
    times = []
    for line in proc.log_path.read_bytes()[since:].decode(errors="replace").splitlines():
        start = line.find('{"webhook":"validate"')
        if start >= 0:
            entry = json.loads(line[start:])
            if f" {namespace}/" in entry["object"]:
                times.append(entry["ms"] / 1000)
    return times


def bench_paced(args: argparse.Namespace, workdir: Path) -> None:
    """Creates through kube-apiserver at a paced --rate: the webhook's handler time with the bounds and shares."""
    bed = bed_with_tenants(workdir, "kube-paced")
    cert = CA().serving_cert(workdir / "tls-paced", "webhook")
    proc: ManagedProcess | None = None
    try:
        proc, url = start_server("uvicorn", cert, workdir)
        ns = f"paced-{uuid.uuid4().hex[:6]}"
        bed.ensure_namespace(ns)
        register_webhook(bed, url, cert, [ns], "apprafter-bench-paced")
        info = bed.resource_for("apprafter.io/v1alpha1", "Application")
        template, counter, lock = parser_cr(ns, "x"), iter(range(10**7)), threading.Lock()
        since = proc.log_path.stat().st_size

        def create(client: httpx.Client) -> httpx.Response:
            obj = copy.deepcopy(template)
            with lock:
                obj["metadata"]["name"] = f"p-{next(counter):07d}"
            resp = client.post(info.path(None, ns), json=obj, params={"dryRun": "All"})
            assert resp.status_code == 201, resp.text
            return httpx.Response(200)

        e2e = open_loop(bed.url, bed.ca_path, create, args.rate, args.seconds, workers=8,
                        token=bed.user_tokens[TENANT])
        handler = handler_times(proc, ns, since)
        print(f"--- through kube-apiserver at a paced {args.rate:.0f} creates/s for {args.seconds:.0f} s (dry run)")
        print(f"end to end:        {summary(e2e)}")
        print(f"in the webhook:    {summary(handler)}   (body read to answer written)")
    finally:
        if proc is not None:
            proc.stop()
        bed.stop()


def bench_hostile(args: argparse.Namespace, workdir: Path) -> None:
    bed = bed_with_tenants(workdir, "kube-hostile")
    cert = CA().serving_cert(workdir / "tls-hostile", "webhook")
    proc: ManagedProcess | None = None
    try:
        proc, url = start_server("uvicorn", cert, workdir)
        good, hostile = f"good-{uuid.uuid4().hex[:6]}", f"hostile-{uuid.uuid4().hex[:6]}"
        for ns in (good, hostile):
            bed.ensure_namespace(ns)
        register_webhook(bed, url, cert, [good, hostile], "apprafter-bench-hostile")
        info = bed.resource_for("apprafter.io/v1alpha1", "Application")
        failed: list[str] = []
        counter = iter(range(1_000_000))
        lock = threading.Lock()
        template = parser_cr(good, "x")

        def create(client: httpx.Client) -> httpx.Response:
            obj = copy.deepcopy(template)
            with lock:
                obj["metadata"]["name"] = f"good-{next(counter):06d}"
            resp = client.post(info.path(None, good), json=obj)
            if resp.status_code != 201:
                with lock:
                    failed.append(resp.json().get("message", resp.text)[:160])
            return httpx.Response(200)

        if args.flood == "valid":
            flood = [large_application(hostile, "flood", 110 << 10)] * 2
            what = f"valid ~110 KiB Applications from {args.flood_clients} connections"
        else:
            flood = [large_application(hostile, "large", 2 << 20), many_environments(hostile, "wide", 10_000)]
            what = f"2 MB and 10 000-environment Applications from {args.flood_clients} connections"
        for i, obj in enumerate(flood):
            (workdir / f"heavy-{i}.json").write_bytes(json.dumps(obj).encode())
        argv = [sys.executable, "-c", FLOOD, bed.url, str(bed.ca_path), bed.user_tokens[FLOODER],
                info.path(None, hostile), str(workdir / "heavy-0.json"), str(workdir / "heavy-1.json"),
                str(args.flood_clients), str(workdir / "outcomes.jsonl"), str(proc.popen.pid)]
        print(f"--- through kube-apiserver: another tenant's creates at {args.hostile_rate:.0f}/s, a flood (dry-run "
              f"creates) of {what}, another user")
        rounds: list[tuple[str, int, int]] = []  # (alone|during, log offset before, after)

        def measure(tag: str) -> list[float]:
            before = proc.log_path.stat().st_size if proc is not None else 0
            out = open_loop(bed.url, bed.ca_path, create, args.hostile_rate, args.seconds / ROUNDS, workers=2,
                            token=bed.user_tokens[TENANT])
            rounds.append((tag, before, proc.log_path.stat().st_size if proc is not None else 0))
            return out

        phase = iter(["alone", "during"] * ROUNDS)
        alone, during = flood_rounds(workdir, argv, lambda: measure(next(phase)))
        outcomes, peak = outcomes_of(workdir / "outcomes.jsonl")
        handler: dict[str, list[float]] = {"alone": [], "during": []}
        text = proc.log_path.read_bytes()
        for tag, start, end in rounds:
            for line in text[start:end].decode(errors="replace").splitlines():
                at = line.find('{"webhook":"validate"')
                if at >= 0 and f" {good}/" in json.loads(line[at:])["object"]:
                    handler[tag].append(json.loads(line[at:])["ms"] / 1000)
        print(f"another tenant's creates, alone          {summary(alone)}")
        print(f"another tenant's creates, during a flood {summary(during)}")
        print(f"end to end: p50 {pct(during, .5) / pct(alone, .5):.2f}x, p99 {pct(during, .99) / pct(alone, .99):.2f}x "
              "(during / alone, same run)")
        print(f"in the webhook, alone                    {summary(handler['alone'])}")
        print(f"in the webhook, during a flood           {summary(handler['during'])}")
        if handler["alone"] and handler["during"]:
            print(f"in the webhook: p50 {pct(handler['during'], .5) / pct(handler['alone'], .5):.2f}x, p99 "
                  f"{pct(handler['during'], .99) / pct(handler['alone'], .99):.2f}x (during / alone)")
        print(f"another tenant's creates refused: {len(failed)} of {len(alone) + len(during)}"
              + (f" (first: {failed[0]})" if failed else ""))
        print("the flood's writes: " + ", ".join(f"{n} x {k}" for k, n in sorted(outcomes.items())))
        print(f"webhook resident memory, workers included: peak {peak / (1 << 20):.0f} MiB (chart limit 384 MiB)")
    finally:
        if proc is not None:
            proc.stop()
        bed.stop()


SLOW_HEAD = "POST /validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n"


def bench_memory(args: argparse.Namespace, workdir: Path) -> None:
    """RSS of the webhook and its workers before, during and after 60 slow clients (8 addresses) each holding 1 MiB
    of a body (the budget: 48 MiB): what the burst takes, and whether it is given back."""
    import socket
    import ssl

    cert = CA().serving_cert(workdir / "tls-memory", "webhook")
    proc, url = start_server("uvicorn", cert, workdir)
    port = int(url.rsplit(":", 1)[1])
    try:
        time.sleep(1.0)
        before = tree_rss(proc.popen.pid)
        payload = as_review(large_application("team-a", "large", 2 << 20))
        context = ssl.create_default_context(cafile=str(cert.ca_path))
        held = []
        for i in range(60):
            raw = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(f"127.0.1.{i % 8 + 1}",
                                                                                             0))
            sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
            sock.sendall(SLOW_HEAD.format(3 << 20).encode() + payload[: 1 << 20])
            held.append(sock)
        time.sleep(3.0)
        during = tree_rss(proc.popen.pid)
        for sock in held:
            sock.close()
        time.sleep(5.0)  # the bodies given back, the heap trimmed a second later
        after = tree_rss(proc.popen.pid)
        mib = 1 << 20
        print("--- memory: 60 slow clients holding 1 MiB each (budget 48 MiB), the webhook and its workers")
        print(f"resident: before {before / mib:.0f} MiB, during {during / mib:.0f} MiB "
              f"(+{(during - before) / mib:.0f}), after {after / mib:.0f} MiB (+{(after - before) / mib:.0f})")
    finally:
        proc.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--creates", type=int, default=200)
    parser.add_argument("--servers", action="store_true", help="also run the app under hypercorn, side by side")
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--hostile", action="store_true", help="only the hostile-tenant run (3), and one review's cost")
    parser.add_argument("--hostile-rate", type=float, default=20, help="the other tenant's creates per second")
    parser.add_argument("--flood", choices=("valid", "heavy"), default="valid",
                        help="valid ~110 KiB Applications (issue 34) or 2 MB / 10 000-environment ones (issue 24)")
    parser.add_argument("--flood-clients", type=int, default=36, help="the flooding tenant's connections")
    parser.add_argument("--flood-only", action="store_true",
                        help="with --hostile: only the flood through kube-apiserver (another tenant's creates)")
    parser.add_argument("--split-cpus", action="store_true",
                        help="the webhook on the last CPU, the API server, clients and flood on the others")
    args = parser.parse_args()
    if args.split_cpus:
        split_cpus()
    with tempfile.TemporaryDirectory(prefix="apprafter-bench-webhook-") as tmp:
        if args.hostile and args.flood_only:
            bench_hostile(args, Path(tmp))
            return
        if args.hostile:
            one_review_cost(Path(tmp))
            bench_memory(args, Path(tmp))
            bench_hostile_webhook(args, Path(tmp))
            if not args.skip_e2e:
                bench_paced(args, Path(tmp))
                bench_hostile(args, Path(tmp))
            return
        bench_handler(args, Path(tmp))
        if not args.skip_e2e:
            bench_end_to_end(args, Path(tmp))


if __name__ == "__main__":
    main()
