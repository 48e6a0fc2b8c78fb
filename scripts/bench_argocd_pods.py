#!/usr/bin/env python3
"""Argo CD as pods on a node bed (tests/testbed/argocd_pods.py): per component, seconds from its apply to Ready,
with the image imports and the load average.

  .venv/bin/python scripts/bench_argocd_pods.py [--runs N]

Each run starts a node (a fresh bed, the image store kept between runs as the `node` fixture keeps it), imports
the images `make images` built under the test prefix, installs Argo CD and waits until every component is Ready,
uninstalls it (until its namespace is gone), then stops the node. Run it under `flock /tmp/apprafter-heavy.lock`,
or read the load beside each figure.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.images.podman import make_images
from tests.testbed.argocd_pods import UPSTREAM_IMAGES, install_argocd
from tests.testbed.node import start_node


def one_run(images: dict[str, str]) -> dict[str, float]:
    phases: dict[str, float] = {}
    bed = start_node(Path(tempfile.mkdtemp(prefix="apprafter-bed-", dir="/tmp")) / "node")
    try:
        mark = time.monotonic()
        for ref in images.values():
            bed.import_image(ref)
        phases["import the three images"] = time.monotonic() - mark
        mark = time.monotonic()
        argocd = install_argocd(bed, images)
        phases["install: apply to every component Ready and the API answering"] = time.monotonic() - mark
        phases.update({f"  {name}": seconds for name, seconds in sorted(argocd.ready_seconds.items())})
        mark = time.monotonic()
        argocd.uninstall()
        phases["uninstall: its namespace gone"] = time.monotonic() - mark
    finally:
        bed.stop()
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    built = make_images()
    images = {name: built[name].ref for name in UPSTREAM_IMAGES.values()}
    for run in range(args.runs):
        load = os.getloadavg()
        phases = one_run(images)
        print(f"run {run + 1} (load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
        for phase, seconds in phases.items():
            print(f"  {phase:<66} {seconds:6.1f} s")


if __name__ == "__main__":
    main()
