"""What the API server's replies and a failed connection mean, as KubeError with the server's words and its
retry class: a lightkube or httpx failure, a raw reply's Status, a watch stream's line, Retry-After, and when a
watch that has received nothing has stalled. Sends nothing: controller_runtime.client makes the requests."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
from lightkube import ApiError

from controller_runtime.errors import KubeError

__all__ = ["STALLED", "TRANSPORT_FAILURES", "error_of", "refusal", "retry_after", "stalled", "watch_deadline",
           "watch_event"]

STALLED = "Stalled"  # the reason of the KubeError a stalled watch ends with
# What a connection's end can raise past httpx unmapped: httpcore 1.0.9 maps anyio's EndOfStream on a read but not on
# a write (a TLS peer that closed while we sent: anyio's TLSStream.send raises it), and it escaped every caller.
TRANSPORT_FAILURES: tuple[type[Exception], ...] = (anyio.EndOfStream, anyio.BrokenResourceError,
                                                   anyio.ClosedResourceError, OSError)


def watch_deadline(server_timeout: float) -> float:
    """How long a watch may stay open: the server closes it after `server_timeout` seconds, so one open a grace
    period past that (a quarter of it, 1 to 10 s) has stalled."""
    return server_timeout + min(10.0, max(1.0, server_timeout / 4))


def stalled(what: str, server_timeout: int) -> KubeError:
    """The error a watch open past its deadline with nothing received ends with (reason STALLED)."""
    return KubeError(f"{what}: nothing received past the watch's deadline ({watch_deadline(server_timeout):.0f} s; "
                     f"the server closes it after {server_timeout} s): stalled", 0, STALLED)


def retry_after(response: httpx.Response | None) -> float | None:
    """The Retry-After of a reply, in seconds (the API server sends whole seconds with 429 and some 5xx)."""
    value = response.headers.get("Retry-After") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def error_of(e: Exception, what: str) -> KubeError:
    """A failed request of `what` (`get Kind ns/name`, ...): the server's Status, a reply that is none, or no answer."""
    if isinstance(e, ApiError):
        status = e.status
        words = status.message or status.reason or ""
        return KubeError(f"{what}: {words}", int(status.code or 0), status.reason or "", retry_after(e.response), words)
    if isinstance(e, httpx.HTTPStatusError):  # a reply that is no Status, e.g. the 404 of an API group not served
        code = e.response.status_code
        return KubeError(f"{what}: HTTP {code} {e.response.reason_phrase}", code, "", retry_after(e.response))
    return KubeError(f"cannot reach the API server ({what}): {type(e).__name__}: {e}", 0)


def _said(response: httpx.Response) -> str:
    """The message of a Status reply (else the status line)."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    return f"HTTP {response.status_code} {response.reason_phrase}"


def refusal(response: httpx.Response, what: str) -> KubeError:
    """A raw request's reply of status 300 or more, with the server's words."""
    words = _said(response)
    return KubeError(f"{what}: {words}", response.status_code, "", retry_after(response), words)


def watch_event(line: str, what: str) -> tuple[str, dict[str, Any]]:
    """One line of a watch stream: (type, object); an ERROR event (410 Gone, say) is raised as its KubeError."""
    try:
        event = json.loads(line)
    except ValueError as e:
        raise KubeError(f"{what}: a line of the stream is not JSON ({e})") from e
    kind, obj = event.get("type"), event.get("object")
    if not isinstance(kind, str) or not isinstance(obj, dict):
        raise KubeError(f"{what}: a watch event without type and object")
    if kind == "ERROR":
        words = str(obj.get("message") or obj.get("reason") or "")
        raise KubeError(f"{what}: {words}", int(obj.get("code") or 0), str(obj.get("reason") or ""), None, words)
    return kind, obj
