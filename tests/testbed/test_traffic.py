"""The node agent's traffic stream: a connection never made is tried once more; an unanswered request is not."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.testbed.netns_agent import Traffic


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers, like the `hang` test workload."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.listen(64)
        yield listener.getsockname()[1]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stream(url: str, requests: int) -> dict[str, Any]:
    traffic = Traffic({"url": url, "interval": 0, "timeout": 0.3, "connect_timeout": 1, "max_seconds": 30})
    while sum(traffic.outcomes.values()) < requests and traffic.thread.is_alive():
        traffic.thread.join(0.05)
    return traffic.stop()


def test_a_refused_connection_is_tried_again_and_counts_as_failed_when_that_fails_too() -> None:
    counted = stream(f"http://127.0.0.1:{closed_port()}/", 3)
    assert counted["failed"] == counted["sent"] and counted["sent"] >= 3
    assert counted["retried"] == counted["sent"], counted  # each request: its retry was refused too
    retries = counted["retries"]
    assert isinstance(retries, list) and all("ConnectError" in line and "neighbours:" in line for line in retries)


def test_a_request_accepted_and_never_answered_is_not_retried(silent_listener: int) -> None:
    counted = stream(f"http://127.0.0.1:{silent_listener}/", 2)
    assert counted["outcomes"] == {"ReadTimeout": counted["sent"]} and counted["retried"] == 0, counted


def test_one_lost_connection_costs_a_retry_not_the_request() -> None:
    calls = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request.url)
        if len(calls) == 1:
            raise httpx.ConnectTimeout("timed out", request=request)
        return httpx.Response(200, text="v1\n")

    traffic = Traffic({"url": "http://web/", "max_seconds": 0})  # a stream that ends at once: one request here
    traffic.thread.join()
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        assert traffic._get(client) == ("200", "")
    assert len(calls) == 2 and len(traffic.retries) == 1 and dict(traffic.bodies) == {"v1\n": 1}
