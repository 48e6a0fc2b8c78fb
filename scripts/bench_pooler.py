"""Benchmark: what the pooled URL gives (issue 42 item 5): pgbench's transactions per second (`SELECT 1`) straight
to PostgreSQL (the direct URL) beside through PgBouncer in transaction mode with the provider's default bounds (the
pooled URL: lifecycle.backends.pg_pooler's parameters, 4 server sessions for the claim), with a new connection for
every transaction (`pgbench -C`: an app that connects per request, the pooler's case) and with connections kept
(an app with its own pool: what the extra hop costs).

Side by side in one run: the four interleaved in rounds (--rounds, default 3), the same clients (--clients, default
8) for the same time (--seconds, default 8). The role's connection limit is an xlarge claim's (50): with a small
one's (10) the direct path aborted at 8 clients (`too many connections for role`: with a connection per
transaction, the exiting backends still count), while through PgBouncer the role never holds more than its 4.
PostgreSQL 15 is the host's (Debian's, the PostgreSQL image's major); PgBouncer is the binary of the `pgbouncer`
image `make images` builds (Debian's 1.18), taken out of it with podman; both on 127.0.0.1 without TLS (on the
cluster both sides speak TLS: a handshake per connection on either path), run as `nobody`, the claim's role logging
in with SCRAM as on the Cluster.
Usage: .venv/bin/python scripts/bench_pooler.py [--rounds 3] [--clients 8] [--seconds 8] [--image REF]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lifecycle.backends.pg_cluster import CONNECTIONS  # noqa: E402 - after the repo root is importable
from lifecycle.backends.pg_pooler import pooler_object, pooling_of  # noqa: E402 - after the repo root is importable
from lifecycle.service_provider import with_defaults  # noqa: E402
from tests.testbed.procs import free_port  # noqa: E402

BIN = Path("/usr/lib/postgresql/15/bin")
ROLE = "shop.cart-pg"  # a claim's role and database, one name (lifecycle.backends.pg_cluster.tenant_of)
POOL = with_defaults("pg", "cloudnative-pg", {})["pooler"]["poolSize"]
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def run(*argv: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True, env=env)


def pgbouncer_from(image: str, into: Path) -> Path:
    """The image's pgbouncer binary and the one library the host lacks (c-ares), copied out with podman."""
    env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "tools" / "containers.conf")}
    container = run("podman", "create", image, "true", env=env).stdout.strip()
    try:
        for path in ("/usr/sbin/pgbouncer", "/usr/lib/x86_64-linux-gnu/libcares.so.2"):
            run("podman", "cp", f"{container}:{path}", into / Path(path).name, env=env)
    finally:
        run("podman", "rm", container, env=env)
    return into / "pgbouncer"


def start_postgres(data: Path, port: int, password: str) -> subprocess.Popen[bytes]:
    run(*AS_NOBODY, BIN / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C")
    (data / "pg_hba.conf").write_text("local all postgres trust\nhost sameuser all 127.0.0.1/32 scram-sha-256\n"
                                      "host all all all reject\n")
    proc = subprocess.Popen([*AS_NOBODY, str(BIN / "postgres"), "-D", str(data), "-p", str(port), "-k", str(data),
                             "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if subprocess.run([BIN / "pg_isready", "-h", str(data), "-p", str(port)], capture_output=True).returncode == 0:
            break
        time.sleep(0.05)
    sql = (f"create role \"{ROLE}\" login password '{password}' connection limit {CONNECTIONS['xlarge']}; "
           f"create database \"{ROLE}\" owner \"{ROLE}\"")
    for statement in sql.split("; "):
        run(*AS_NOBODY, BIN / "psql", "-X", "-h", data, "-p", str(port), "-U", "postgres", "-d", "postgres",
            "-qc", statement)
    return proc


def start_pgbouncer(binary: Path, work: Path, port: int, pg_port: int, secret: str) -> subprocess.Popen[bytes]:
    """PgBouncer with the Pooler's parameters (the provider's defaults), the role's SCRAM secret in its auth file
    (on the Cluster CloudNativePG's auth_query reads the same secret)."""
    pooling = pooling_of(with_defaults("pg", "cloudnative-pg", {}), "bench")
    if pooling is None:
        raise SystemExit("the provider's defaults give no pooler")
    pooler = pooler_object({"metadata": {"name": "bench", "namespace": "bench", "uid": "u"}}, "bench", pooling)
    parameters = pooler["spec"]["pgbouncer"]["parameters"]
    assert parameters["default_pool_size"] == str(POOL)
    (work / "userlist.txt").write_text(f'"{ROLE}" "{secret}"\n')
    (work / "pgbouncer.ini").write_text(
        f"[databases]\n* = host=127.0.0.1 port={pg_port}\n[pgbouncer]\nlisten_addr = 127.0.0.1\n"
        f"listen_port = {port}\nunix_socket_dir =\nauth_type = scram-sha-256\nauth_file = {work}/userlist.txt\n"
        f"pool_mode = {pooler['spec']['pgbouncer']['poolMode']}\n"
        + "".join(f"{k} = {v}\n" for k, v in sorted(parameters.items())) + "log_connections = 0\n"
        "log_disconnections = 0\nignore_startup_parameters = extra_float_digits,options\n")
    os.chmod(work, 0o755)
    for path in work.iterdir():
        os.chmod(path, 0o755 if path.is_dir() or path.name == "pgbouncer" else 0o644)
    env = {**os.environ, "LD_LIBRARY_PATH": str(work)}
    proc = subprocess.Popen([*AS_NOBODY, str(binary), str(work / "pgbouncer.ini")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # listening: a TCP connect answers
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    raise SystemExit("pgbouncer did not listen within 30 s")


def pgbench(port: int, password: str, script: Path, clients: int, seconds: int, connect: bool) -> float:
    """pgbench's tps, with a new connection per transaction (`connect`) or connections kept."""
    argv = [BIN / "pgbench", "-n", *(["-C"] if connect else []), "-f", script, "-c", str(clients), "-j", "2",
            "-T", str(seconds), "-h", "127.0.0.1", "-p", str(port), "-U", ROLE, ROLE]
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                         env={**os.environ, "PGPASSWORD": password, "PGSSLMODE": "disable"})
    found = re.search(r"tps = ([0-9.]+)", out.stdout)
    if out.returncode or not found:
        raise SystemExit(f"pgbench failed:\n{out.stdout}{out.stderr}")
    return float(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--image", default=os.environ.get("PGBOUNCER_IMAGE", "localhost/pgbouncer:0.1.0"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-pooler-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        os.chmod(work, 0o755)
        data, bouncer = work / "data", work / "pgbouncer"
        data.mkdir(mode=0o700)
        bouncer.mkdir()
        shutil.chown(data, 65534, 65534)
        binary = pgbouncer_from(args.image, bouncer)
        password, pg_port, pool_port = secrets.token_urlsafe(32), free_port(), free_port()
        procs.append(start_postgres(data, pg_port, password))
        secret = run(*AS_NOBODY, BIN / "psql", "-X", "-h", data, "-p", str(pg_port), "-U", "postgres", "-d",
                     "postgres", "-Atc", f"select rolpassword from pg_authid where rolname = '{ROLE}'").stdout.strip()
        procs.append(start_pgbouncer(binary, bouncer, pool_port, pg_port, secret))
        script = work / "select1.sql"
        script.write_text("SELECT 1;\n")
        runs: dict[tuple[bool, str], list[float]] = {(c, p): [] for c in (True, False) for p in ("direct", "pooled")}
        for _ in range(args.rounds):
            for connect, path in runs:
                port = pg_port if path == "direct" else pool_port
                runs[connect, path].append(pgbench(port, password, script, args.clients, args.seconds, connect))
        print(f"{args.clients} clients, {args.seconds} s x {args.rounds} rounds, median transactions/s "
              f"(PgBouncer {args.image}, transaction pooling, pool of {POOL})")
        for connect in (True, False):
            d, p = (statistics.median(runs[connect, path]) for path in ("direct", "pooled"))
            rounds = " / ".join(", ".join(f"{x:.0f}" for x in runs[connect, path]) for path in ("direct", "pooled"))
            what = "a new connection per transaction" if connect else "connections kept      "
            print(f"{what}: direct {d:7.0f}  pooled {p:7.0f}  ratio pooled/direct {p / d:.2f}  (rounds {rounds})")
        return 0
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
