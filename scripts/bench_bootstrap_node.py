#!/usr/bin/env python3
"""The stack from an empty node to the first Healthy user app (tests/testbed/stack_on_node.py), step by step: each
step's wall time, its share of the total, and the load average before and after it.

  .venv/bin/python scripts/bench_bootstrap_node.py [--runs N]

Each run starts a node bed of its own without any CRD (as tests/images/test_bootstrap_node.py does), publishes the
stack and our charts into a registry the node reaches, runs `apprafter cluster-bootstrap` on the node, waits for
Argo CD's pods, the umbrella's sync, the operator's and the webhook's pods (cert-manager played) and a user app from
git Healthy with running pods, then stops the node. The images are `make images`' (built first, not timed). Run it
under `flock /tmp/apprafter-heavy.lock`, or read the load beside each figure.
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
from tests.testbed.node import start_node
from tests.testbed.stack_on_node import from_zero
from tests.testbed.testapp import build_test_app

IMAGES = ("argocd", "redis", "argocd-cue-cmp", "apprafter-operator")


def one_run(images: dict[str, str], test_image: str) -> tuple[dict[str, float], dict[str, float]]:
    """(step -> seconds, step -> the 1-minute load average at its end) of one run from an empty node."""
    workdir = Path(tempfile.mkdtemp(prefix="apprafter-bed-", dir="/tmp"))
    started = time.monotonic()
    bed = start_node(workdir / "node", install_crds=False)
    steps = {"start the node bed (no CRD)": time.monotonic() - started}
    loads = {"start the node bed (no CRD)": os.getloadavg()[0]}
    try:
        started = time.monotonic()
        image = bed.import_image(test_image)
        steps["import the user app's image"] = time.monotonic() - started
        loads["import the user app's image"] = os.getloadavg()[0]
        stack = from_zero(bed, workdir / "bootstrap", images, image)
        stack.stop()
        steps.update(stack.timings)
        loads.update(stack.loads)
    finally:
        bed.stop()
    return steps, loads


# The steps a user waits for once the release is published and the images are where the node runs them.
USER_STEPS = ("prerequisites", "apprafter cluster-bootstrap", "Argo CD", "umbrella", "operator", "webhook", "first")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    built = make_images()
    images = {name: built[name].ref for name in IMAGES}
    test_image = build_test_app()
    for run in range(args.runs):
        before = os.getloadavg()
        steps, loads = one_run(images, test_image)
        total = sum(steps.values())
        user = sum(seconds for name, seconds in steps.items() if name.startswith(USER_STEPS))
        print(f"run {run + 1}: load average before {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}")
        print(f"  {'step':<72} {'seconds':>8} {'of total':>8} {'of user':>8} {'load':>5}")
        for step, seconds in steps.items():
            share = f"{seconds / user:8.1%}" if step.startswith(USER_STEPS) else " " * 8
            print(f"  {step:<72} {seconds:8.1f} {seconds / total:8.1%} {share} {loads[step]:5.2f}")
        print(f"  {'cluster-bootstrap to the first Healthy user app (the user steps)':<72} {user:8.1f} "
              f"{user / total:8.1%}")
        print(f"  {'total from an empty machine state (node start, publish, imports included)':<72} {total:8.1f}")


if __name__ == "__main__":
    main()
