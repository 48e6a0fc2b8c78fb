"""A container's log as the kubelet serves it through the API server (`pods/log`, as `kubectl logs`), line by line,
followed or not; bounded in bytes per line and by the caller's parameters."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx

from controller_runtime.errors import KubeError
from controller_runtime.replies import error_of

if TYPE_CHECKING:
    from controller_runtime.client import Kube

__all__ = ["LINE_BYTES", "pod_log"]

LINE_BYTES = 16 * 1024  # a longer line is cut there (a runaway log without newlines must not fill memory)


async def pod_log(kube: Kube, namespace: str, pod: str, container: str, *, follow: bool = False,
                  since_seconds: int | None = None, tail_lines: int | None = None) -> AsyncIterator[str]:
    """The lines of `container` in `pod` (without their newline), until the log ends or, when following, until the
    container stops or the caller stops reading."""
    params: dict[str, str] = {"container": container}
    if follow:
        params["follow"] = "true"
    if since_seconds is not None:
        params["sinceSeconds"] = str(since_seconds)
    if tail_lines is not None:
        params["tailLines"] = str(tail_lines)
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
    try:
        async with kube.watcher.stream("GET", path, params=params) as response:
            if response.status_code != 200:
                body = (await response.aread())[:2048].decode("utf-8", "replace")
                raise KubeError(f"GET {path}: {response.status_code} {body.strip()}", response.status_code,
                                detail=body.strip())
            async for line in response.aiter_lines():
                yield line.rstrip("\r\n")[:LINE_BYTES]
    except httpx.HTTPError as e:
        raise error_of(e, f"GET {path}") from e
