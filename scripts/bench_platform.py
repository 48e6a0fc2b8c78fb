"""Benchmark: one check of the PlatformStack controller against a real registry on loopback, as a ratio to the
floor a verified upgrade cannot avoid, measured side by side (interleaved runs, medians).

    cold check   a fresh controller: list tags, resolve, cosign-verify the target's digest, pull both charts by
                 digest, classify the change (platform_stack.upstream.check: what one check runs in its thread)
    warm check   the same controller again: verification and charts remembered, so tags, digests, classification
    cosign       bare `cosign verify` of the same digest with the same flags (the floor of a cold check)
    helm pull    `helm pull` of the target chart (what Argo CD runs for the umbrella afterwards)

Wall and CPU time (this process and every process it waited for) are printed for each.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from platform_stack.check_result import Baseline  # noqa: E402
from platform_stack.signing import EMPTY_TRUSTED_ROOT  # noqa: E402 - after the repo root is importable
from platform_stack.stack_secrets import PublicKeys  # noqa: E402
from platform_stack.upstream import Upstream, check  # noqa: E402
from tests.testbed.registry import start_registry  # noqa: E402
from toolchain.tools import resolve  # noqa: E402

APPRAFTER = [sys.executable, "-c", "from apprafter.cli import main; main()"]


def run(argv: list[str], env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(argv[:4])}...\n{proc.stderr}")
    return proc.stdout


def measured(call: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) of one call: this process's CPU plus that of the children it waited for."""
    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    start, before = time.perf_counter(), cpu()
    call()
    return time.perf_counter() - start, cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=11, help="runs per measurement (median reported)")
    args = parser.parse_args()
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000", "COSIGN_PASSWORD": "bench"}
    with tempfile.TemporaryDirectory(prefix="bench-platform-") as tmp:
        work = Path(tmp)
        registry = start_registry(work)
        try:
            charts = {}
            for version in ("0.1.0", "0.2.0"):
                line = run([*APPRAFTER, "stack", "build", "--out", str(work / version), "--version", version], env)
                charts[version] = line.split("  ", 1)[1].strip()
            run([str(resolve("cosign")), "generate-key-pair", "--output-key-prefix", str(work / "release")],
                {"PATH": os.environ["PATH"], "HOME": tmp, "COSIGN_PASSWORD": "bench"})
            digests = {}
            for version, tgz in charts.items():
                ref = run([*APPRAFTER, "stack", "push", tgz, "--to", f"oci://{registry.url}/bench", "--plain-http"],
                          env).strip()
                digests[version] = ref.rsplit("@", 1)[1]
                run([*APPRAFTER, "stack", "sign", f"{registry.url}/bench/platform-stack@{digests[version]}", "--key",
                     str(work / "release.key")], env)
            repository = f"oci://{registry.url}/bench/platform-stack"
            keys = PublicKeys("bench/keys", (("release.pub", (work / "release.pub").read_bytes()),))
            baseline = Baseline("0.1.0", digests["0.1.0"], repository.removeprefix("oci://"))

            def one_check(upstream: Upstream) -> None:
                result = check(upstream.open(repository, True, []), keys, channel="stable", pin=None,
                               auto_upgrade=True, tier=None, overrides={}, baseline=baseline,
                               kube_version="v1.34.4")
                assert result.target is not None and result.target.version == "0.2.0", result.finding

            warm = Upstream()
            one_check(warm)
            root = work / "trusted_root.json"
            root.write_text(json.dumps(EMPTY_TRUSTED_ROOT))
            cosign = [str(resolve("cosign")), "verify", "--key", str(work / "release.pub"),
                      "--insecure-ignore-tlog=true", "--offline=true", "--trusted-root", str(root),
                      f"{registry.url}/bench/platform-stack@{digests['0.2.0']}"]
            pulls = work / "pulls"
            helm = [str(resolve("helm")), "pull", f"oci://{registry.url}/bench/platform-stack", "--version", "0.2.0",
                    "--plain-http", "--destination", str(pulls)]
            pulls.mkdir()
            helm_env = {"PATH": os.environ["PATH"], "HOME": tmp}
            cosign_env = {"PATH": os.environ["PATH"], "HOME": tmp, "DOCKER_CONFIG": tmp}
            cases: dict[str, Callable[[], object]] = {
                "cold check": lambda: one_check(Upstream()),
                "warm check": lambda: one_check(warm),
                "cosign verify": lambda: run(cosign, cosign_env),
                "helm pull": lambda: run(helm, helm_env),
            }
            times: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
            for _ in range(args.n):  # interleaved: every case sees the same machine state
                for name, call in cases.items():
                    times[name].append(measured(call))
        finally:
            registry.process.stop()
    wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
    print(f"median of {args.n} interleaved runs (load average {os.getloadavg()[0]:.1f})")
    print(f"{'':<14}{'wall':>10}{'cpu':>10}{'wall / cosign':>15}")
    for name in cases:
        print(f"{name:<14}{wall[name] * 1000:>7.0f} ms{cpu[name] * 1000:>7.0f} ms"
              f"{wall[name] / wall['cosign verify']:>14.2f}x")


if __name__ == "__main__":
    main()
