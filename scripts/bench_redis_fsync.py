"""Benchmark: what a durable redis instance costs (issue 42 item 3): redis-benchmark's SET throughput against the
integrated instance's own command line (lifecycle.backends.redis.instance_objects: START, the append-only file and
the ACL file in a data directory) under each `appendfsync` (always, everysec, no), beside the same server without
the append-only file (what it ran before: `--appendonly no`); and the time a restart takes to load what it wrote.

Side by side in one run: the variants interleaved in rounds (--rounds, default 3), each on a fresh directory on the
same disk, redis-server on 127.0.0.1, redis-benchmark as the admin (`-t set -n N -c 50 -d 64 -r 100000`). The data
directory is on /tmp's disk unless --dir names another (the node's volumes are on the host's disk here too).
Usage: .venv/bin/python scripts/bench_redis_fsync.py [--requests 100000] [--rounds 3] [--dir PATH]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lifecycle.backends import redis as core  # noqa: E402 - after the repo root is importable
from lifecycle.backends.contract import Site  # noqa: E402
from tests.testbed.procs import free_port  # noqa: E402

VARIANTS = ("off", "no", "everysec", "always")  # off: --appendonly no, as before issue 42


def command(policy: str, data: Path, port: int) -> list[str]:
    """The instance's container command and args (its pod's), on loopback at `port`, its volume `data`."""
    config = core.CORE.configure({"metadata": {"name": "bench"}, "spec": {
        "type": "redis", "backend": "redis-server", "config": {
            "resources": {"memory": "1Gi", "cpu": "1"}, "appendfsync": "everysec" if policy == "off" else policy}}},
        Site("bench", "localhost/redis:bench"))
    assert isinstance(config, core.Config)
    deployment = next(o for o in core.instance_objects(config) if o["kind"] == "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    args = list(container["args"])
    args[args.index("--port") + 1] = str(port)
    args[args.index("--bind") + 1: args.index("--bind") + 3] = ["127.0.0.1", "-::1"]
    if policy == "off":
        args[args.index("--appendonly") + 1] = "no"
    return [part if part != "/data" else str(data) for part in container["command"]] + args


def started(policy: str, data: Path, port: int, admin: str) -> tuple[subprocess.Popen[bytes], float]:
    """The server, and the seconds until its admin's PING answers (it loads what `data` holds first)."""
    began = time.monotonic()
    proc = subprocess.Popen(command(policy, data, port), env={"PATH": "/usr/bin:/bin", "ADMIN_PASSWORD": admin},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, password=admin)
    while True:
        try:
            if client.ping():
                return proc, time.monotonic() - began
        except redis.ConnectionError:  # not up, or LOADING
            if proc.poll() is not None:
                raise SystemExit(f"redis-server ({policy}) exited with {proc.returncode}") from None
            time.sleep(0.01)


def one(policy: str, requests: int, base: Path) -> tuple[float, float]:
    """SET requests per second under `policy`, and the restart's seconds to answer again with what it wrote."""
    data = Path(tempfile.mkdtemp(dir=base, prefix=f"{policy}-"))
    port, admin = free_port(), secrets.token_urlsafe(24)
    proc, _ = started(policy, data, port, admin)
    try:
        # redis-benchmark reads no password from the environment: this run's throwaway one in its argv
        out = subprocess.run(["redis-benchmark", "-p", str(port), "-a", admin, "-t", "set", "-n", str(requests),
                              "-c", "50", "-d", "64", "-r", "100000", "-q", "--csv"],
                             capture_output=True, text=True, check=True).stdout
        rps = float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
    finally:
        proc.terminate()
        proc.wait(60)
    proc, load = started(policy, data, port, admin)
    proc.terminate()
    proc.wait(60)
    shutil.rmtree(data)
    return rps, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    given = parser.parse_args()
    if shutil.which("redis-benchmark") is None:
        raise SystemExit("redis-benchmark not found: run `make setup` (Debian's redis-tools, with redis-server)")
    base = Path(tempfile.mkdtemp(dir=given.dir, prefix="bench-redis-fsync-"))
    results: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    try:
        for _ in range(given.rounds):
            for variant in VARIANTS:
                results[variant].append(one(variant, given.requests, base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    baseline = statistics.median(r for r, _ in results["off"])
    print(f"redis-benchmark SET, {given.requests} requests, 50 clients, 64-byte values; load {os.getloadavg()[0]:.1f}")
    print("| appendfsync | SET/s per round | median | vs no append-only file | restart to PONG (median) |")
    print("|---|---|---|---|---|")
    for variant in VARIANTS:
        rps = [r for r, _ in results[variant]]
        load = statistics.median(t for _, t in results[variant])
        print(f"| {variant if variant != 'off' else '(no append-only file)'} | "
              f"{', '.join(f'{r:,.0f}' for r in rps)} | {statistics.median(rps):,.0f} | "
              f"{statistics.median(rps) / baseline:.2f}x | {load * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
