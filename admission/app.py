"""The webhook's ASGI app: routes, the 3 MiB body limit, a deadline for reading a body and a budget for all bodies
held at once (with each writer's share of it), the review itself in a worker process (admission.pool) or inline, one
log line and the metrics."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest

from admission import memory, review
from admission.pool import REFUSED, ReviewPool
from admission.shares import Flow
from toolchain.errors import USER_EXIT, AppRafterError
from toolchain.timestamps import time_now

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger("apprafter.webhook")
LABELS = ("webhook", "kind", "operation", "allowed")
REQUESTS = Counter("apprafter_webhook_requests", "AdmissionReviews answered.", LABELS)
LATENCY = Histogram("apprafter_webhook_request_duration_seconds", "Time to answer an AdmissionReview, body read to "
                    "answer written.", LABELS,
                    buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))


FREE_BYTES = 64 << 10
WRITER_BYTES = 4096  # the body's start that says who writes (admission.review.writer_hint)
BUFFERED = Gauge("apprafter_webhook_buffered_bytes", "Bytes of request bodies held in memory now.")


class _TooLarge(AppRafterError):
    """The body is over the limit (refused with 413 before it is read whole); the caller's to fix."""

    exit_code = USER_EXIT
    retry = False


class _NoRoom(AppRafterError):
    """No room for the request: its writer's wait is full (`why`), or the bodies held at once would pass the
    webhook's buffer budget or the writer's share of it (refused with 429: retry)."""

    exit_code = USER_EXIT

    def __init__(self, head: bytes, why: str | None = None) -> None:
        super().__init__("no room for the request body")
        self.head = head  # the body's start, for its request uid
        self.why = why


class BodyBudget:
    """Bytes of request bodies the process holds at once, whoever sends them, and each writer's share of them: a
    slow client holding a body just under the size limit takes its part from here, so many of them cannot grow the
    process past its limit, and one writer's cannot take everyone else's room."""

    def __init__(self, limit: int, per_flow: int | None = None) -> None:
        self.limit = limit
        self.per_flow = per_flow if per_flow is not None else limit
        self.used = 0
        self.flows: dict[Flow, int] = {}

    def take(self, flow: Flow, size: int) -> bool:
        mine = self.flows.get(flow, 0)
        if self.used + size > self.limit or mine + size > self.per_flow:
            return False
        self.used += size
        self.flows[flow] = mine + size
        BUFFERED.set(self.used)
        return True

    def give(self, flow: Flow, size: int) -> None:
        if not size:
            return
        self.used -= size
        left = self.flows.pop(flow, 0) - size
        if left > 0:
            self.flows[flow] = left
        BUFFERED.set(self.used)
        if not self.used:
            memory.settle()


@dataclasses.dataclass(frozen=True)
class Bounds:
    """What one request may take before it is reviewed (docs/admission.md "Bounds")."""

    max_body: int = review.MAX_BODY_BYTES
    read_seconds: float = 10.0  # the whole body, from the end of the head (the API server sends it at once)
    buffered: int = 48 << 20  # every body held at once, past each one's first FREE_BYTES
    flow_share: int = 4  # one writer (admission.shares.Flow) may hold 1/flow_share of `buffered`

    @property
    def buffered_per_flow(self) -> int:
        return self.buffered // self.flow_share


class _Read:
    """A request body being read: into one buffer (never copied again on its way to a worker), its writer known from
    its first bytes, what it took from the budget."""

    def __init__(self, scope: Scope) -> None:
        client = scope.get("client")
        self.client = str(client[0]) if client else "-"
        self.flow: Flow | None = None
        self.data = bytearray()
        self.held = 0

    def writer(self) -> Flow:
        if self.flow is None:
            user, namespace = review.writer_hint(self.data)
            self.flow = Flow(self.client, user, namespace)
        return self.flow


async def _body(receive: Receive, scope: Scope, bounds: Bounds, budget: BodyBudget, read: _Read,
                full: Callable[[Flow, int], str | None]) -> None:
    """Read the request body into `read`, or raise _TooLarge as soon as it exceeds the limit (the rest is never
    buffered), _NoRoom when its writer's wait is full (`full`, asked once the first bytes say who writes) or the
    budget of all bodies (or the writer's share of it) is spent; what it took from the budget is in `read.held` (the
    caller gives it back)."""
    declared = _length(scope)
    if declared > bounds.max_body:
        raise _TooLarge
    data = read.data
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        if len(data) + len(chunk) > bounds.max_body:
            raise _TooLarge
        data += chunk
        more = bool(message.get("more_body"))
        if read.flow is None and (len(data) >= WRITER_BYTES or not more):
            why = full(read.writer(), max(declared, len(data)))
            if why is not None:
                raise _NoRoom(bytes(data[:4096]), why)
        # Every request's first FREE_BYTES come free (the connection cap bounds them): a small review always
        # finds room however many large bodies are held.
        counted = max(0, len(data) - FREE_BYTES) - read.held
        if counted and not budget.take(read.writer(), counted):
            raise _NoRoom(bytes(data[:4096]))
        read.held += counted
        if not more:
            break


async def _send(send: Send, status: int, body: bytes, content_type: bytes = b"application/json",
                close: bool = False) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


Ready = Callable[[], bool]
Reviewer = Callable[[bytearray, float, Flow], Awaitable[review.Outcome]]


def make_app(settings: review.Settings, ready: Ready, bounds: Bounds | None = None, pool: ReviewPool | None = None
             ) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """POST /validate and /mutate (AdmissionReview v1), GET /healthz, /readyz, /metrics. With a pool, reviews run
    in its worker processes (what `apprafter webhook` serves); without one, inline on the event loop."""
    bounds = bounds or Bounds()
    budget = BodyBudget(bounds.buffered, bounds.buffered_per_flow)

    def reviewer(path: str) -> Reviewer:
        async def one(body: bytearray, started: float, flow: Flow) -> review.Outcome:
            if pool is not None:
                return await pool.review(path, body, time_now(), started, flow)
            if path == "/mutate":
                return review.mutating(bytes(body), settings, time_now())
            return review.validating(bytes(body), settings)
        return one

    reviewers = {path: reviewer(path) for path in ("/validate", "/mutate")}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan and websockets: nothing to do
        path, method = scope["path"], scope["method"]
        if path in reviewers and method == "POST":
            await _review(path, reviewers[path], scope, receive, send, bounds, budget, pool)
        elif path in reviewers:
            await _send(send, 405, b'{"message": "POST an AdmissionReview"}')
        elif path == "/healthz" and method == "GET":
            await _send(send, 200, b"ok", b"text/plain")
        elif path == "/readyz" and method == "GET":
            ok = ready()
            await _send(send, 200 if ok else 503, b"ok" if ok else b"not ready", b"text/plain")
        elif path == "/metrics" and method == "GET":
            await _send(send, 200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST.encode())
        else:
            await _send(send, 404, b'{"message": "not found: POST /validate or /mutate"}')

    return app


def _never_full(flow: Flow, size: int) -> str | None:
    return None


def _length(scope: Scope) -> int:
    """The Content-Length a request declares (0 when none)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return 0


async def _review(path: str, reviewer: Reviewer, scope: Scope, receive: Receive, send: Send, bounds: Bounds,
                  budget: BodyBudget, pool: ReviewPool | None) -> None:
    started = time.perf_counter()
    arrived = time.monotonic()  # the review's deadline counts from the request's head, as the API server's does
    read = _Read(scope)
    close = False
    full = pool.full if pool is not None else _never_full
    try:
        try:
            async with asyncio.timeout(bounds.read_seconds):
                await _body(receive, scope, bounds, budget, read, full)
        except _TooLarge:
            outcome, status, close = review.too_large(bounds.max_body), 413, True
        except _NoRoom as e:
            REFUSED.labels("busy").inc()
            why = e.why or (f"request bodies held at once would pass {bounds.buffered >> 20} MiB, or this writer's "
                            f"share of them, {bounds.buffered_per_flow >> 20} MiB")
            outcome, status, close = review.busy(e.head, why), 200, True
        except TimeoutError:
            REFUSED.labels("slow").inc()
            log.warning("body not read within %g s: connection closed", bounds.read_seconds)
            await _send(send, 408, b'{"message": "the request body did not arrive in time"}', close=True)
            return
        else:
            try:
                outcome, status = await reviewer(read.data, arrived, read.writer()), 200
            except Exception:  # a bug must refuse, never answer 500 or allow; logged with its traceback
                log.exception("review failed")
                outcome, status = review.internal_error(bytes(read.data)), 200
    finally:
        if read.flow is not None:
            budget.give(read.flow, read.held)
        read.data = bytearray()  # given back now, not when the answer is written
    payload = json.dumps(outcome.review).encode()
    await _send(send, status, payload, close=close)
    elapsed = time.perf_counter() - started
    labels = (path.lstrip("/"), outcome.kind, outcome.operation, "true" if outcome.allowed else "false")
    REQUESTS.labels(*labels).inc()
    LATENCY.labels(*labels).observe(elapsed)
    # Fields only, never values or messages: an env literal may be a credential.
    log.info(json.dumps({"webhook": labels[0], "kind": outcome.kind, "object": outcome.subject, "user": outcome.user,
                         "operation": outcome.operation, "allowed": outcome.allowed, "fields": list(outcome.fields),
                         "ms": round(elapsed * 1000, 3)}, separators=(",", ":")))
