"""The webhook cannot be starved (issue 24): every review in a worker process within its CPU and memory budget, a
bounded wait for a worker, a deadline for each request head and body, a budget for every body held at once, a
connection cap; /healthz answers while a review runs. Each test runs its own `apprafter webhook` with the bound
it proves made small, and asserts what the user sees (the refusal, the count, the memory), never elapsed time."""

from __future__ import annotations

import contextlib
import signal
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.admission.cluster import Webhook, apply, eventually, fresh_namespace, message, ok, register
from tests.admission.reviews import EDITOR, body, parser_cr, review
from tests.charts.chart import CHART
from tests.testbed.kube import KubeTestBed, ssl_context

pytestmark = pytest.mark.testbed

MIB = 1 << 20


def chart_memory_limit() -> int:
    """webhook.resources.limits.memory of the chart's values, in bytes (Mi only, as the chart writes it)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    limit = values["webhook"]["resources"]["limits"]["memory"]
    assert limit.endswith("Mi"), limit
    return int(limit[:-2]) * MIB


def many_environments(count: int, namespace: str = "team-a", bad: bool = False) -> dict[str, Any]:
    """The parser example with `count` more environments (named against the rules when `bad`, each with a
    literal of its own: the shape that made the cross-field check quadratic)."""
    cr = parser_cr(namespace)
    for i in range(count):
        cr["spec"]["environments"][f"E{i}" if bad else f"e{i}"] = {"env": {"NOTE": f"literal-{i}-of-many"}}
    return cr


def two_megabytes(namespace: str = "team-a") -> dict[str, Any]:
    cr = parser_cr(namespace)
    cr["spec"]["base"]["env"] = {f"K{i}": "x" * 100 for i in range(17_500)}
    return cr


@contextlib.contextmanager
def webhook(tmp_path: Path, *args: str) -> Iterator[Webhook]:
    server = Webhook(tmp_path / "webhook", args)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def validate(server: Webhook, obj: dict[str, Any]) -> dict[str, Any]:
    with server.client() as client:
        resp = client.post("/validate", content=body(review(obj)), timeout=60)
    assert resp.status_code == 200, resp.text[:500]
    answer: dict[str, Any] = resp.json()["response"]
    return answer


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """A worker frozen (SIGSTOP) for the block: a review it holds stays in flight."""
    import os

    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):  # the webhook may have replaced it meanwhile
            os.kill(pid, signal.SIGCONT)


def in_background(server: Webhook, obj: dict[str, Any]) -> tuple[threading.Thread, list[dict[str, Any]]]:
    answers: list[dict[str, Any]] = []
    thread = threading.Thread(target=lambda: answers.append(validate(server, obj)), daemon=True)
    thread.start()
    return thread, answers


def test_a_review_over_its_cpu_budget_is_refused_and_the_worker_carries_on(tmp_path: Path) -> None:
    with webhook(tmp_path, "--workers", "1", "--review-cpu-seconds", "0.05") as server:
        [worker] = server.workers()
        answer = validate(server, many_environments(10_000, bad=True))
        assert answer["allowed"] is False and answer["status"]["code"] == 413
        assert "took more than the admission webhook's budget (0.05 s of CPU time)" in answer["status"]["message"]
        assert answer["uid"]  # the API server matches the answer to its request
        assert validate(server, parser_cr())["allowed"] is True
        assert server.workers() == [worker]  # not replaced: the budget stopped the review, not the worker
        assert server.metric("apprafter_webhook_refused_total", why="cpu") == 1


def test_a_review_over_its_memory_budget_is_refused_and_its_worker_replaced(tmp_path: Path) -> None:
    with webhook(tmp_path, "--workers", "1", "--review-memory-mb", "4") as server:
        [worker] = server.workers()
        answer = validate(server, two_megabytes())
        assert answer["allowed"] is False and "budget (its memory" in answer["status"]["message"], answer
        eventually("a new worker, warm", lambda: (server.metric("apprafter_webhook_worker_starts_total") == 2
                   and server.metric("apprafter_webhook_workers") == 1) or None)
        assert worker not in server.workers()
        assert validate(server, parser_cr())["allowed"] is True


def test_a_review_past_its_deadline_is_refused_and_its_worker_replaced(tmp_path: Path) -> None:
    with webhook(tmp_path, "--workers", "1", "--review-deadline-seconds", "0.5") as server:
        [worker] = server.workers()
        with stopped(worker):  # the review cannot finish: only the deadline ends it
            answer = validate(server, parser_cr())
        assert answer["allowed"] is False and "budget (0.5 s)" in answer["status"]["message"], answer
        assert server.metric("apprafter_webhook_refused_total", why="deadline") == 1
        eventually("a new worker, warm", lambda: (server.metric("apprafter_webhook_worker_starts_total") == 2
                   and server.metric("apprafter_webhook_workers") == 1) or None)
        assert worker not in server.workers()
        assert validate(server, parser_cr())["allowed"] is True


def test_healthz_answers_while_a_review_is_in_flight(tmp_path: Path) -> None:
    with webhook(tmp_path, "--workers", "1", "--review-deadline-seconds", "29") as server:
        [worker] = server.workers()
        with stopped(worker):
            thread, answers = in_background(server, many_environments(2000))
            eventually("the review in flight", lambda: server.metric("apprafter_webhook_reviews_in_flight") == 1
                       or None)
            with server.client() as client:
                assert client.get("/healthz").status_code == 200
                assert client.get("/readyz").status_code == 200
            assert server.metric("apprafter_webhook_reviews_in_flight") == 1 and not answers
        thread.join(60)
        assert answers and answers[0]["allowed"] is True


def test_a_large_review_never_takes_the_last_worker_and_the_wait_is_bounded(tmp_path: Path) -> None:
    with webhook(tmp_path, "--workers", "2", "--review-deadline-seconds", "29") as server:
        large = many_environments(6000)
        assert len(body(review(large))) > 256 << 10
        workers = server.workers()
        with contextlib.ExitStack() as frozen:
            for pid in workers:
                frozen.enter_context(stopped(pid))
            first, first_answers = in_background(server, large)
            eventually("one large review in flight", lambda: server.metric(
                "apprafter_webhook_reviews_in_flight", lane="large") == 1 or None)
            second, second_answers = in_background(server, large)
            third, third_answers = in_background(server, large)
            eventually("large reviews waiting", lambda: server.metric(
                "apprafter_webhook_reviews_waiting", lane="large") == 2 or None)
            fourth = validate(server, large)  # the large lane's wait is full: refused at once, retry later
            assert fourth["allowed"] is False and fourth["status"]["code"] == 429, fourth
            assert "at capacity (2 large reviews waiting for a worker)" in fourth["status"]["message"]
            small, small_answers = in_background(server, parser_cr())
            eventually("the small review on the other worker", lambda: server.metric(
                "apprafter_webhook_reviews_in_flight", lane="small") == 1 or None)
            assert server.metric("apprafter_webhook_reviews_in_flight", lane="large") == 1
        for thread in (first, second, third, small):
            thread.join(60)
        assert all(a[0]["allowed"] for a in (first_answers, second_answers, third_answers, small_answers))


def raw_tls(server: Webhook) -> ssl.SSLSocket:
    context = ssl_context(Path(server.cert.ca_path))
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    return context.wrap_socket(sock, server_hostname="127.0.0.1")


def head(length: int) -> bytes:
    return (f"POST /validate HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def test_slow_body_clients_cannot_grow_the_webhook_past_its_memory_limit(tmp_path: Path) -> None:
    clients, held = 60, MIB  # the attack: 60 clients holding bodies just under the size cap
    with webhook(tmp_path, "--max-buffered-mb", "32", "--read-timeout", "300") as server:
        before = server.rss_bytes()
        payload = body(review(two_megabytes()))
        sockets = []
        try:
            for _ in range(clients):
                sock = raw_tls(server)
                sock.sendall(head(3 * MIB - 1) + payload[:held])
                sockets.append(sock)
            # held: each client's body past its first 64 KiB counts against the budget
            counted = held - (64 << 10)
            eventually("every slow client refused or held", lambda: (
                server.metric("apprafter_webhook_refused_total", why="busy")
                + server.metric("apprafter_webhook_buffered_bytes") // counted) >= clients or None)
            rss = server.rss_bytes()
            assert server.metric("apprafter_webhook_buffered_bytes") <= 32 * MIB
            assert server.metric("apprafter_webhook_refused_total", why="busy") >= clients - (32 * MIB) // counted
            assert rss < chart_memory_limit(), (before, rss)
            assert validate(server, parser_cr())["allowed"] is True  # a small review still gets room
        finally:
            for sock in sockets:
                sock.close()
        eventually("the bodies given back", lambda: server.metric("apprafter_webhook_buffered_bytes") == 0 or None)


def test_a_client_that_sends_no_head_or_no_body_is_cut_off(tmp_path: Path) -> None:
    with webhook(tmp_path, "--head-timeout", "0.3", "--read-timeout", "0.3") as server:
        silent = raw_tls(server)
        assert silent.recv(1) == b""  # closed by the webhook: no request head came
        slow = raw_tls(server)
        slow.sendall(head(1000) + b'{"apiVersion"')
        answer = b""
        while chunk := slow.recv(4096):  # until the webhook closes the connection
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive in time" in answer, answer
        assert server.metric("apprafter_webhook_refused_total", why="slow") == 1


def test_connections_past_the_cap_get_503(tmp_path: Path) -> None:
    with webhook(tmp_path, "--max-connections", "4", "--head-timeout", "300") as server:
        idle = [raw_tls(server) for _ in range(4)]
        try:
            eventually("four connections open", lambda: server.metric("apprafter_webhook_connections") == 4 or None)
            with server.client() as client:
                assert client.post("/validate", content=body(review(parser_cr()))).status_code == 503
        finally:
            for sock in idle:
                sock.close()
        eventually("the connections closed", lambda: server.metric("apprafter_webhook_connections") == 0 or None)
        assert validate(server, parser_cr())["allowed"] is True


def test_through_the_api_server_a_tenant_gets_the_budget_refusal(admission_bed: KubeTestBed, tmp_path: Path,
                                                                   webhook_server: Webhook) -> None:
    """A dry-run create of 10 000 environments by an editor: the API server hands back the webhook's refusal, and
    another tenant's write right after is admitted."""
    with webhook(tmp_path, "--workers", "1", "--review-cpu-seconds", "0.05") as server:
        register(admission_bed, server.base_url, server.ca.pem)
        webhook_server.honoured = False  # the shared webhook is registered again by the next test's fixture
        hostile, other = fresh_namespace(admission_bed), fresh_namespace(admission_bed)
        heavy = many_environments(10_000, hostile)
        with admission_bed.as_user(EDITOR) as editor:
            eventually("the bounded webhook honoured", lambda: "budget" in message(
                apply(editor, admission_bed, heavy, dry_run=True)) or None)
            text = message(apply(editor, admission_bed, heavy, dry_run=True))
            assert 'admission webhook "applications.apprafter.io" denied the request' in text
            assert "took more than the admission webhook's budget (0.05 s of CPU time)" in text
            assert ok(apply(editor, admission_bed, parser_cr(other)))["spec"]["environment"] == "prod"


def test_the_chart_deadline_is_below_its_timeout() -> None:
    """The API server must get the webhook's own refusal, not its timeout: the review deadline the chart passes
    is below the configurations' timeoutSeconds."""
    from tests.admission.cluster import chart_objects

    [deployment] = [o for o in chart_objects() if o["kind"] == "Deployment" and o["metadata"]["name"] ==
                    "apprafter-admission"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    deadline = float(next(a.split("=", 1)[1] for a in args if a.startswith("--review-deadline-seconds=")))
    timeouts = {h["timeoutSeconds"] for o in chart_objects() if o["kind"].endswith("WebhookConfiguration")
                for h in o["webhooks"]}
    assert timeouts and deadline < min(timeouts), (deadline, timeouts)
