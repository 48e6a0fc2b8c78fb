"""Benchmark: `apprafter cluster-bootstrap` on an empty loopback API server (etcd + kube-apiserver, no CRD) with a
stack release pushed and cosign-signed into Debian's docker-registry (a login), measured side by side in one run:

    verify        `apprafter stack verify` of the same version (the floor: the loader verifies exactly this first)
    dry run       cluster-bootstrap --dry-run on the empty server (verify, read the chart, read the cluster, decide)
    first run     the run from empty: Argo CD's install.yaml of the pin, the sidecar settings, the CRDs (waited
                  until Established), the PlatformStack, the root Application
    second run    the run again: everything read, nothing written

Each is the wall time of the CLI process (its start-up included); the load average is printed beside them. The
figures go to docs/measurements.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.testbed.argocd import ARGOCD_VERSIONS, install_manifest  # noqa: E402 - after the repo root is importable
from tests.testbed.distribution import start_distribution  # noqa: E402
from tests.testbed.kube import start_kube  # noqa: E402
from tests.testbed.stack_releases import Publisher, build_releases, key_pairs  # noqa: E402

APPRAFTER = [sys.executable, "-c", "from apprafter.cli import main; main()"]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run([*APPRAFTER, *argv], capture_output=True, text=True, env=env, timeout=600, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:2])}: exit {proc.returncode}\n{proc.stderr}")
    return seconds, proc.stdout


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-bootstrap-") as tmp:
        work = Path(tmp)
        registry = start_distribution(work / "registry", "htpasswd")
        kube = start_kube(work / "kube", install_crds=False)
        try:
            charts = build_releases(work / "charts", [("1.1.0", None, {})])
            (work / "keys").mkdir()
            keys = key_pairs(work / "keys", ("release",))
            publisher = Publisher(registry, charts, keys, work / "publisher")
            publisher.publish("releases", [("1.1.0", "release")])
            env = {**os.environ, "DOCKER_CONFIG": publisher.env["DOCKER_CONFIG"]}
            reference = f"oci://{registry.url}/releases/platform-stack"
            public = str(keys["release"][1])
            args = ["cluster-bootstrap", reference, "--version", "1.1.0", "--key", public, "--tier", "solo",
                    "--domain", "example.com", "--kubeconfig", str(kube.kubeconfig),
                    "--argocd-manifest", str(install_manifest(ARGOCD_VERSIONS[0]))]
            verify, _ = timed(["stack", "verify", f"{registry.url}/releases/platform-stack:1.1.0", "--key", public],
                              env)
            dry, printed = timed([*args, "--dry-run"], env)
            first, _ = timed(args, env)
            second, said = timed(args, env)
            assert "nothing to change" in said, said
            objects = printed.count("\n---\n") + 1
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"objects applied from empty: {objects} (Argo CD {ARGOCD_VERSIONS[0]}'s install.yaml included)")
            print(f"stack verify {verify:.2f} s | dry run {dry:.2f} s | first run {first:.2f} s | "
                  f"second run {second:.2f} s   (load {load})")
            print(f"first run / verify = {first / verify:.1f}x, second run / first run = {second / first:.2f}")
        finally:
            kube.stop()
            registry.stop()


if __name__ == "__main__":
    main()
