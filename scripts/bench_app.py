"""Benchmark: what issue 43's app commands add to a render, side by side in one run (medians of interleaved runs,
CPU time of the whole process): the plugin's render of an app without and with sealed secrets beside it (every sync
pays for reading them), and `app add --dry-run` (the render, git, the Argo CD Applications) against `render`.

Usage: .venv/bin/python scripts/bench_app.py [--runs 15] [--secrets 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import timed_cpu

APPRAFTER = [sys.executable, "-m", "apprafter"]
APP = '''apiVersion: "apprafter.io/v1alpha1"
kind:       "Application"
metadata: name: "shop"
spec: {
	base: {
		image: "ghcr.io/acme/shop:1.4.2"
		expose: {port: 3000, network: "public"}
		needs: {pg: {}, redis: {}}
		env: {
			DATABASE_URL: claim.pg.url
			REDIS_URL:    claim.redis.url
%s		}
	}
	environments: {staging: replicas: 1, prod: {replicas: 3, expose: hostname: "shop.acme.example"}}
}
'''


def _repo(where: Path, secrets: int) -> Path:
    """An app repository with `secrets` sealed secrets for prod (sealed with a throwaway certificate)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    from tests.lifecycle.credentials.test_sealing import _certificate

    where.mkdir(parents=True)
    env = "".join(f'\t\t\tS{n}: secret: "s{n}/key"\n' for n in range(secrets))
    (where / "apprafter").mkdir()
    (where / "apprafter" / "Application.cue").write_text(APP % env)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (where / "cert.pem").write_bytes(_certificate(key))
    for n in range(secrets):
        subprocess.run([*APPRAFTER, "secret", "seal", f"s{n}", "key", "-e", "prod", "-n", "shop-prod", "--cert",
                        "cert.pem"], cwd=where, input=b"value", check=True, capture_output=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=where, check=True)
    subprocess.run(["git", "remote", "add", "origin", "https://git.example.com/acme/shop.git"], cwd=where, check=True)
    return where


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--secrets", type=int, default=8)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} interleaved runs each; CPU ms, medians")
    with tempfile.TemporaryDirectory() as tmp:
        plain, sealed = _repo(Path(tmp) / "plain", 0), _repo(Path(tmp) / "sealed", args.secrets)
        render = [*APPRAFTER, "render", ".", "-e", "prod", "-n", "shop-prod"]
        add = [*APPRAFTER, "app", "add", "--dry-run", "-e", "prod"]
        cpu: dict[str, list[float]] = {"render": [], f"render, {args.secrets} sealed": [], "app add --dry-run": []}
        for _ in range(args.runs):
            cpu["render"].append(timed_cpu(render, plain)[1])
            cpu[f"render, {args.secrets} sealed"].append(timed_cpu(render, sealed)[1])
            cpu["app add --dry-run"].append(timed_cpu(add, plain)[1])
        base = statistics.median(cpu["render"])
        for what, values in cpu.items():
            median = statistics.median(values)
            print(f"{what:28} {median * 1000:7.1f} ms  {median / base:5.2f}x render")


if __name__ == "__main__":
    main()
