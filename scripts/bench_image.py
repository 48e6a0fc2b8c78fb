"""Benchmark: a plugin render through the argocd-cue-cmp image under podman vs the same plugin on the host.

Both are Argo CD's own plugin server called by the test bed's client (as argocd-repo-server calls it), on
the same repository; runs are interleaved and medians printed as a ratio. Build the image first
(`make images`). Usage: .venv/bin/python scripts/bench_image.py [--runs 15]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the test bed's servers and client live in tests/

from tests.images.podman import VERSION, Image, inspect, start_sidecar  # noqa: E402 - after the path entry
from tests.testbed.cmp import start_cmp_server  # noqa: E402 - after the path entry
from toolchain.tools import resolve  # noqa: E402 - after the path entry


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--image", default=f"localhost/argocd-cue-cmp:{VERSION}")
    args = parser.parse_args()
    image = Image(args.image, inspect(args.image)["Id"])
    with tempfile.TemporaryDirectory(prefix="bench-img-", dir="/tmp") as tmp:
        work = Path(tmp)
        repo = work / "repo"
        shutil.copytree(ROOT / "examples" / "parser", repo / "apps" / "parser")
        host = start_cmp_server(ROOT, work / "host", path=[Path(sys.executable).parent, resolve("cue").parent])
        start = time.perf_counter()
        sidecar = start_sidecar(image, work / "sidecar", "apprafter-bench-sidecar")
        ready = time.perf_counter() - start
        try:
            params = [{"name": "environment", "string": "prod"}]
            times: dict[str, list[float]] = {"host": [], "image": []}
            for _ in range(args.runs):
                for label, server in (("host", host), ("image", sidecar)):
                    t0 = time.perf_counter()
                    server.generate(repo, "apps/parser", app_name="parser", parameters=params)
                    times[label].append(time.perf_counter() - t0)
        finally:
            sidecar.stop()
            host.stop()
    host_ms, image_ms = (statistics.median(times[k]) * 1000 for k in ("host", "image"))
    size = inspect(args.image)["Size"] / 1e6
    print(f"image {args.image}: {size:.0f} MB; container start to plugin socket ready: {ready:.2f} s")
    print(f"generate examples/parser (prod), median of {args.runs}: image {image_ms:.0f} ms vs host {host_ms:.0f} ms"
          f" = {image_ms / host_ms:.2f}x")


if __name__ == "__main__":
    main()
