"""go-containerregistry's in-memory OCI registry (`registry` binary) on a loopback port."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import httpx

from tests.testbed.procs import ManagedProcess, tool, wait_for


@dataclasses.dataclass
class OciRegistry:
    """A running registry. `url` is "127.0.0.1:PORT" (an OCI reference prefix); `base_url` is http://..."""

    host: str
    port: int
    process: ManagedProcess

    @property
    def url(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.url}"

    def ref(self, repository: str, tag: str = "latest") -> str:
        """An OCI reference in this registry, e.g. 127.0.0.1:5000/apprafter/stack:1.0.0."""
        return f"{self.url}/{repository}:{tag}"


def start_registry(workdir: Path, timeout: float = 20.0) -> OciRegistry:
    """Start `registry -port 0` (it listens on localhost only) and read the port it chose from its log."""
    proc = ManagedProcess("registry", [tool("registry"), "-port", "0"], workdir / "registry.log")
    try:
        port = wait_for(
            "the registry to report its port", lambda: _port_from_log(proc.log_text()), timeout, proc
        )
        reg = OciRegistry("127.0.0.1", port, proc)
        wait_for(
            "the registry to answer /v2/",
            lambda: httpx.get(reg.base_url + "/v2/", timeout=2).status_code == 200 or None,
            timeout,
            proc,
        )
        return reg
    except BaseException:
        proc.stop()
        raise


def _port_from_log(text: str) -> int | None:
    m = re.search(r"serving on port (\d+)", text)
    return int(m.group(1)) if m else None
