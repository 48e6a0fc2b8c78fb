"""Benchmark: our registry client (platform_stack.registry, on httpx) vs oras-py's own `Registry` doing the same
calls against one loopback registry, measured side by side (interleaved runs, medians), and how soon a registry
that never answers is given up.

    tags         the tag list of a repository
    manifest     one manifest by tag (ours also checks its digest and shape)
    blob         the chart layer by digest (ours also checks its sha256 and cap)
    push         the chart as `stack push` lays it out, to a new repository each run
    no answer    ours against a server that accepts and never replies, read timeout 0.3 s: the time to the
                 one-line failure, as a ratio to the timeout (oras-py sends no timeout: it would wait forever)

Every call uses a fresh client, as each CLI command does (a connection, no token: the registry is open).
Usage: .venv/bin/python scripts/bench_registry.py [-n 21]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import oras.provider  # noqa: E402 - after the repo root is importable

from platform_stack.oci import (  # noqa: E402
    CHART_LAYER_MEDIA_TYPE,
    CONFIG_MEDIA_TYPE,
    config_json,
    manifest_annotations,
    read_archive,
)
from platform_stack.registry import Bounds, RegistryClient, RegistryFailure, connect  # noqa: E402
from tests.testbed.registry import start_registry  # noqa: E402

APPRAFTER = [sys.executable, "-c", "from apprafter.cli import main; main()"]


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def give_up_time(read_s: float) -> float:
    """Seconds from the request to our one-line failure on a server that accepts the connection and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        client = RegistryClient(host, True, None, [], Bounds(read_s=read_s))
        start = time.perf_counter()
        try:
            client.manifest("bench/none", "1.0.0")
        except RegistryFailure as e:
            assert "no answer within" in str(e), e
        else:
            raise AssertionError("a silent server gave a manifest")
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=21, help="runs per measurement (median reported)")
    args = parser.parse_args()
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp:
        work = Path(tmp)
        registry = start_registry(work)
        try:
            line = subprocess.run([*APPRAFTER, "stack", "build", "--out", str(work)], env=env, check=True,
                                  capture_output=True, text=True).stdout
            archive = read_archive(Path(line.split("  ", 1)[1].strip()))
            layer, config = work / archive.path.name, work / "config.json"
            layer.write_bytes(archive.data)
            config.write_bytes(config_json(archive))
            files, config_spec = [f"{layer}:{CHART_LAYER_MEDIA_TYPE}"], f"{config}:{CONFIG_MEDIA_TYPE}"
            annotations = manifest_annotations(archive)
            host, repo = registry.url, "bench/platform-stack"
            connect(host, True, []).push_artifact(f"{host}/{repo}:{archive.version}", files, config_spec, annotations)
            found = connect(host, True, []).manifest(repo, archive.version)
            assert found is not None
            layer_digest = found[1]["layers"][0]["digest"]
            fresh = count()

            def oras_client() -> oras.provider.Registry:
                return oras.provider.Registry(hostname=host, insecure=True)

            def oras_push() -> None:
                with contextlib.redirect_stdout(io.StringIO()):
                    oras_client().push(target=f"{host}/oras{next(fresh)}/platform-stack:{archive.version}",
                                       files=files, manifest_config=config_spec, manifest_annotations=annotations,
                                       disable_path_validation=True, quiet=True)

            pairs: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
                "tags": (lambda: connect(host, True, []).tags(repo),
                         lambda: oras_client().get_tags(f"{host}/{repo}")),
                "manifest": (lambda: connect(host, True, []).manifest(repo, archive.version),
                             lambda: oras_client().get_manifest(f"{host}/{repo}:{archive.version}")),
                "blob": (lambda: connect(host, True, []).blob(repo, layer_digest, 20 << 20),
                         lambda: oras_client().get_blob(f"{host}/{repo}", layer_digest).content),
                "push": (lambda: connect(host, True, []).push_artifact(
                             f"{host}/ours{next(fresh)}/platform-stack:{archive.version}", files, config_spec,
                             annotations),
                         oras_push),
            }
            times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in pairs}
            for _ in range(args.n):  # interleaved: both clients see the same machine state
                for name, (ours, theirs) in pairs.items():
                    times[name][0].append(timed(ours))
                    times[name][1].append(timed(theirs))
            silent = [give_up_time(0.3) for _ in range(5)]
        finally:
            registry.process.stop()
    print(f"median of {args.n} interleaved runs, fresh client each (load average {os.getloadavg()[0]:.1f}); "
          f"chart layer {len(archive.data)} bytes")
    print(f"{'':<10}{'ours':>10}{'oras-py':>10}{'ours / oras-py':>16}")
    for name, (ours, theirs) in times.items():
        mine, other = statistics.median(ours), statistics.median(theirs)
        print(f"{name:<10}{mine * 1000:>7.1f} ms{other * 1000:>7.1f} ms{mine / other:>15.2f}x")
    print(f"no answer: the one-line failure after {statistics.median(silent):.2f} s with a 0.3 s read timeout "
          f"({statistics.median(silent) / 0.3:.2f}x the timeout, median of 5)")


if __name__ == "__main__":
    main()
