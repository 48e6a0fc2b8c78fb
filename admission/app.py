"""The webhook's ASGI app: routes, the 3 MiB body limit, one log line and the metrics per review."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest

from admission import review
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


class _TooLarge(AppRafterError):
    """The body is over the limit (refused with 413 before it is read whole); the caller's to fix."""

    exit_code = USER_EXIT
    retry = False


async def _body(receive: Receive, scope: Scope, limit: int) -> bytes:
    """The request body, or _TooLarge as soon as it exceeds `limit` (the rest is never buffered)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise _TooLarge
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _send(send: Send, status: int, body: bytes, content_type: bytes = b"application/json") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


Ready = Callable[[], bool]


def make_app(settings: review.Settings, ready: Ready, limit: int = review.MAX_BODY_BYTES
             ) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """POST /validate and /mutate (AdmissionReview v1), GET /healthz, /readyz, /metrics."""
    reviewers: dict[str, Callable[[bytes], review.Outcome]] = {
        "/validate": lambda body: review.validating(body, settings),
        "/mutate": lambda body: review.mutating(body, settings, time_now()),
    }

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan and websockets: nothing to do
        path, method = scope["path"], scope["method"]
        if path in reviewers and method == "POST":
            await _review(path, reviewers[path], scope, receive, send, limit)
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


async def _review(path: str, reviewer: Callable[[bytes], review.Outcome], scope: Scope, receive: Receive,
                  send: Send, limit: int) -> None:
    started = time.perf_counter()
    try:
        body = await _body(receive, scope, limit)
    except _TooLarge:
        outcome, status = review.too_large(limit), 413
    else:
        try:
            outcome, status = reviewer(body), 200
        except Exception:  # a bug must refuse, never answer 500 or allow; logged with its traceback
            log.exception("review failed")
            outcome, status = review.internal_error(body), 200
    payload = json.dumps(outcome.review).encode()
    await _send(send, status, payload)
    elapsed = time.perf_counter() - started
    labels = (path.lstrip("/"), outcome.kind, outcome.operation, "true" if outcome.allowed else "false")
    REQUESTS.labels(*labels).inc()
    LATENCY.labels(*labels).observe(elapsed)
    # Fields only, never values or messages: an env literal may be a credential.
    log.info(json.dumps({"webhook": labels[0], "kind": outcome.kind, "object": outcome.subject, "user": outcome.user,
                         "operation": outcome.operation, "allowed": outcome.allowed, "fields": list(outcome.fields),
                         "ms": round(elapsed * 1000, 3)}, separators=(",", ":")))
