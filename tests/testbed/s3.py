"""versitygw on a free loopback port: the s3 backend's object store, posix storage and internal IAM under a workdir.

Its root account (the admin the backend's edge signs as) comes from the environment, never argv (`ps` shows argv).
The admin API answers on the S3 port (no --admin-port). It is up when a request signed as the root is answered 200:
the listener, the IAM store and the signature check all work then.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
from httpx_auth import AWS4Auth

from tests.testbed.procs import ManagedProcess, free_port, tool, wait_for

REGION = "us-east-1"  # versitygw's default --region, which every signature's scope must name


@dataclasses.dataclass
class S3Server:
    """A running versitygw; `endpoint` is "http://127.0.0.1:PORT", S3 and admin API alike."""

    port: int
    process: ManagedProcess
    data: Path  # the posix backend's root: one directory per bucket
    iam: Path  # the internal IAM's directory (users.json)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.stop()


def start_s3(workdir: Path, root_access: str, root_secret: str, versioning: bool = False,
             timeout: float = 60.0) -> S3Server:
    """Start versitygw's posix backend on `workdir`/data with its internal IAM in `workdir`/iam and wait until a
    ListBuckets signed as the root is answered. With `versioning`, buckets may turn versioning on (old versions are
    kept in `workdir`/versions; without it, PutBucketVersioning is answered 501 VersioningNotConfigured)."""
    data, iam = workdir / "data", workdir / "iam"
    data.mkdir(parents=True, exist_ok=True)
    iam.mkdir(exist_ok=True)
    port = free_port()
    posix = ["posix"]
    if versioning:
        (workdir / "versions").mkdir(exist_ok=True)
        posix += ["--versioning-dir", str(workdir / "versions")]
    # no IAM cache: a deleted or changed account takes effect at once, not up to its TTL (120 s) later, as the
    # backend runs its own gateways (lifecycle.backends.s3)
    argv: list[str | Path] = [tool("versitygw"), "--port", f"127.0.0.1:{port}", "--iam-dir", str(iam), "--quiet",
                              "--iam-cache-disable",
                              *posix, str(data)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "ROOT_ACCESS_KEY_ID": root_access,
           "ROOT_SECRET_ACCESS_KEY": root_secret}
    proc = ManagedProcess("versitygw", argv, workdir / "versitygw.log", env=env, cwd=workdir)
    server = S3Server(port, proc, data, iam)
    auth = AWS4Auth(root_access, root_secret, REGION, "s3")

    def answered() -> bool | None:
        return httpx.get(server.endpoint + "/", auth=auth, timeout=2, trust_env=False).status_code == 200 or None

    try:
        wait_for("versitygw to answer a signed ListBuckets", answered, timeout, proc)
        return server
    except BaseException:
        proc.stop()
        raise
