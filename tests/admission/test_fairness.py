"""Fair webhook capacity through the real API server (issue 34): one tenant writing valid ~110 KiB Applications from
two dozen clients fills its own share of the workers and of the wait and is refused (429, at capacity); another
tenant's writes in the same run are never refused, nor is the operator's reviewed write. Their latency is printed
(calm and during the flood), never asserted: scripts/bench_webhook.py --hostile measures it."""

from __future__ import annotations

import contextlib
import copy
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.admission.cluster import Webhook, apply, eventually, fresh_namespace, merge_status, ok, register
from tests.admission.reviews import EDITOR, FLOODER, OPERATOR, parser_cr, plan
from tests.testbed.kube import KubeTestBed

pytestmark = pytest.mark.testbed

FLOOD_CLIENTS = 24


def large_application(namespace: str, name: str = "flood") -> dict[str, Any]:
    """The parser example grown to ~110 KiB of env literals (valid: the review's whole path runs)."""
    cr = parser_cr(namespace)
    cr["metadata"]["name"] = name
    cr["spec"]["base"]["env"] = {f"K{i}": "x" * 100 for i in range(1000)}
    return cr


@contextlib.contextmanager
def flooding(bed: KubeTestBed, namespace: str) -> Iterator[dict[str, int]]:
    """FLOODER's dry-run creates of a large Application from FLOOD_CLIENTS clients for the block; the outcomes by
    status code."""
    outcomes: dict[str, int] = {}
    stop = threading.Event()
    lock = threading.Lock()
    big = large_application(namespace)

    def flood() -> None:
        with bed.as_user(FLOODER) as client:
            while not stop.is_set():
                try:
                    resp = apply(client, bed, big, dry_run=True)
                    said = f"{resp.status_code} at capacity" if "at capacity" in resp.text else str(resp.status_code)
                except httpx.HTTPError as e:
                    said = type(e).__name__
                with lock:
                    outcomes[said] = outcomes.get(said, 0) + 1

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(FLOOD_CLIENTS)]
    for thread in threads:
        thread.start()
    try:
        yield outcomes
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)


def writes(bed: KubeTestBed, namespace: str, count: int, tag: str) -> tuple[list[float], list[str]]:
    """EDITOR's creates of the parser example, one after another: (seconds each, the refusals)."""
    times, refused = [], []
    with bed.as_user(EDITOR) as client:
        for i in range(count):
            cr = copy.deepcopy(parser_cr(namespace))
            cr["metadata"]["name"] = f"{tag}-{i:03d}"
            started = time.perf_counter()
            resp = apply(client, bed, cr)
            times.append(time.perf_counter() - started)
            if resp.status_code >= 300:
                refused.append(f"{resp.status_code}: {resp.text[:300]}")
    return times, refused


def ms(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1] * 1000


def test_a_flood_from_one_tenant_is_refused_before_another_tenants_write(admission_bed: KubeTestBed, tmp_path: Path,
                                                                         webhook_server: Webhook) -> None:
    bed = admission_bed
    server = Webhook(tmp_path / "webhook", ("--workers", "2", "--review-queue", "4"))
    server.start()
    try:
        register(bed, server.base_url, server.ca.pem)
        webhook_server.honoured = False  # the shared webhook is registered again by the next test's fixture
        flood_ns, other_ns = fresh_namespace(bed, "flood"), fresh_namespace(bed, "other")
        eventually("this webhook honoured", lambda: server.metric("apprafter_webhook_requests_total") > 0 or None
                   if ok(apply(bed.as_user(EDITOR), bed, parser_cr(other_ns))) else None)
        calm, calm_refused = writes(bed, other_ns, 10, "calm")
        pending = plan(other_ns)
        with bed.as_user(OPERATOR) as operator:
            ok(apply(operator, bed, pending))  # spared by matchConditions: its identity allows it
            ok(merge_status(operator, bed, pending, {"phase": "pending-approval"}))
        with flooding(bed, flood_ns) as outcomes:
            eventually("the flood refused at capacity", lambda: outcomes.get("429 at capacity") or None, 120)
            during, during_refused = writes(bed, other_ns, 15, "during")
            with bed.as_user(OPERATOR) as operator:  # reviewed (it may not approve), in the operator's own lane
                superseded = ok(merge_status(operator, bed, pending, {"phase": "superseded"}))
            assert superseded["status"]["phase"] == "superseded"
            flood_refused = server.metric("apprafter_webhook_refused_total", why="busy") + server.metric(
                "apprafter_webhook_refused_total", why="pushed")
        print(f"\nanother tenant, calm:           p50 {ms(calm, .5):7.1f} ms  p99 {ms(calm, .99):7.1f} ms  "
              f"refused {len(calm_refused)}/{len(calm)}")
        print(f"another tenant, during a flood: p50 {ms(during, .5):7.1f} ms  p99 {ms(during, .99):7.1f} ms  "
              f"refused {len(during_refused)}/{len(during)}")
        print(f"the flood ({FLOOD_CLIENTS} clients, ~110 KiB each): {dict(sorted(outcomes.items()))}")
        handler = {tag: [entry["ms"] / 1000 for entry in server.reviews() if f"{other_ns}/{tag}-" in entry["object"]]
                   for tag in ("calm", "during")}
        print(f"in the webhook, another tenant: calm p50 {ms(handler['calm'], .5):.1f} ms p99 "
              f"{ms(handler['calm'], .99):.1f} ms; during p50 {ms(handler['during'], .5):.1f} ms p99 "
              f"{ms(handler['during'], .99):.1f} ms")
        assert not calm_refused and not during_refused, (calm_refused, during_refused)
        assert flood_refused >= 1 and outcomes.get("429 at capacity", 0) >= 1, outcomes
    finally:
        server.stop()
