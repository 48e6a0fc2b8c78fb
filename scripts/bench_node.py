#!/usr/bin/env python3
"""Node tier start-up, cold and warm, phase by phase (tests/testbed/node.py), with the load average.

  .venv/bin/python scripts/bench_node.py [--runs N] [--no-cold] [--image REF]

cold: the node's image store is empty and the test image is not in podman's storage (buildah builds it); warm:
both are there (the store a previous run left). Each run starts a node as the
`node` fixture does (every pinned CRD installed), imports the test image, runs one pod from it until Ready and
stops the node; `--image` also imports that image (e.g. the operator's) and reports its import time. Run it
under `flock /tmp/apprafter-heavy.lock` on a machine nobody else loads, or read the load beside each figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.testbed.node import start_node
from tests.testbed.testapp import build_test_app


def one_run(cold: bool, extra_image: str | None) -> dict[str, float]:
    phases: dict[str, float] = {}
    started = time.monotonic()
    if cold:  # an empty image store, and the test image not built
        os.environ["APPRAFTER_NODE_IMAGE_CACHE"] = tempfile.mkdtemp(prefix="apprafter-bench-store-")
        ref = build_test_app()
        subprocess.run(["podman", "image", "rm", "--force", ref], capture_output=True, check=False,
                       env={**os.environ, "CONTAINERS_CONF": "tools/containers.conf"})
        started = time.monotonic()
        build_test_app()
        phases["build test image"] = time.monotonic() - started
    workdir = Path(tempfile.mkdtemp(prefix="apprafter-bed-", dir="/tmp")) / "node"
    begin = time.monotonic()
    bed = start_node(workdir)
    try:
        phases.update({f"start: {k}": v for k, v in bed.timings.items()})
        mark = time.monotonic()
        image = bed.import_image(build_test_app())
        phases["import test image"] = time.monotonic() - mark
        if extra_image:
            mark = time.monotonic()
            bed.import_image(extra_image)
            phases[f"import {extra_image}"] = time.monotonic() - mark
        mark = time.monotonic()
        bed.ensure_namespace("bench")
        bed.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "bench"},
                   "spec": {"containers": [{"name": "app", "image": image, "imagePullPolicy": "Never",
                                            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080},
                                                               "periodSeconds": 1}}]}})
        bed.wait_condition("v1", "Pod", "web", "bench", "Ready")
        phases["pod Ready after apply"] = time.monotonic() - mark
        phases["total to a Ready pod"] = time.monotonic() - begin
    finally:
        mark = time.monotonic()
        bed.stop()
        phases["stop"] = time.monotonic() - mark
        if cold:
            shutil.rmtree(os.environ.pop("APPRAFTER_NODE_IMAGE_CACHE"), ignore_errors=True)
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="warm runs (default 3)")
    parser.add_argument("--no-cold", action="store_true")
    parser.add_argument("--image", help="another podman image to import and time, e.g. the operator's")
    args = parser.parse_args()
    kinds = ([] if args.no_cold else ["cold"]) + ["warm"] * args.runs
    for kind in kinds:
        load = os.getloadavg()
        phases = one_run(kind == "cold", args.image)
        after = os.getloadavg()
        print(f"{kind} (load {load[0]:.1f} -> {after[0]:.1f}):")
        for name, seconds in phases.items():
            print(f"  {name:<45} {seconds:6.2f} s")


if __name__ == "__main__":
    main()
