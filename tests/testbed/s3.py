"""versitygw on a free loopback port: the s3 backend's object store, posix storage and internal IAM under a workdir;
or (`start_s3_for_node`) on the node bed's address, an object store outside its cluster that its pods reach.

Its root account (the admin the backend's edge signs as) comes from the environment, never argv (`ps` shows argv).
The admin API answers on the S3 port (no --admin-port). It is up when a request signed as the root is answered 200:
the listener, the IAM store and the signature check all work then.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import httpx
from httpx_auth import AWS4Auth

from tests.testbed.node import NODE_IP, REPO, NodeTestBed
from tests.testbed.procs import ManagedProcess, free_port, tool, wait_for

REGION = "us-east-1"  # versitygw's default --region, which every signature's scope must name


@dataclasses.dataclass
class S3Server:
    """A running versitygw; `endpoint` is "http://127.0.0.1:PORT", S3 and admin API alike."""

    port: int
    process: ManagedProcess
    data: Path  # the posix backend's root: one directory per bucket
    iam: Path  # the internal IAM's directory (users.json)
    helpers: tuple[ManagedProcess, ...] = ()  # what carries the endpoint to this host (start_s3_for_node)
    pods_endpoint: str | None = None  # where a node bed's pods reach it (start_s3_for_node)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        for proc in (*self.helpers, self.process):
            proc.stop()


def _process(workdir: Path, listen: str, root_access: str, root_secret: str, versioning: bool,
             wrap: NodeTestBed | None = None) -> tuple[ManagedProcess, Path, Path]:
    """versitygw listening on `listen` (in the node bed's network namespace with `wrap`): its process, data, IAM."""
    data, iam = workdir / "data", workdir / "iam"
    data.mkdir(parents=True, exist_ok=True)
    iam.mkdir(exist_ok=True)
    posix = ["posix"]
    if versioning:
        (workdir / "versions").mkdir(exist_ok=True)
        posix += ["--versioning-dir", str(workdir / "versions")]
    # no IAM cache: a deleted or changed account takes effect at once, not up to its TTL (120 s) later, as the
    # backend runs its own gateways (lifecycle.backends.s3)
    argv: list[str | Path] = [tool("versitygw"), "--port", listen, "--iam-dir", str(iam), "--quiet",
                              "--iam-cache-disable",
                              *posix, str(data)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "ROOT_ACCESS_KEY_ID": root_access,
           "ROOT_SECRET_ACCESS_KEY": root_secret}
    return (ManagedProcess("versitygw", wrap.nsenter(*argv) if wrap else argv, workdir / "versitygw.log", env=env,
                           cwd=workdir), data, iam)


def _answered(server: S3Server, root_access: str, root_secret: str, timeout: float) -> S3Server:
    """`server` once a ListBuckets signed as the root is answered 200 (stopped if it never is)."""
    auth = AWS4Auth(root_access, root_secret, REGION, "s3")

    def answered() -> bool | None:
        return httpx.get(server.endpoint + "/", auth=auth, timeout=2, trust_env=False).status_code == 200 or None

    try:
        wait_for("versitygw to answer a signed ListBuckets", answered, timeout, server.process)
        return server
    except BaseException:
        server.stop()
        raise


def start_s3(workdir: Path, root_access: str, root_secret: str, versioning: bool = False,
             timeout: float = 60.0, port: int | None = None) -> S3Server:
    """Start versitygw's posix backend on `workdir`/data with its internal IAM in `workdir`/iam and wait until a
    ListBuckets signed as the root is answered. With `versioning`, buckets may turn versioning on (old versions are
    kept in `workdir`/versions; without it, PutBucketVersioning is answered 501 VersioningNotConfigured). `port`:
    a gateway started again where it was (on a stopped one's workdir: the same buckets and accounts)."""
    port = port or free_port()
    proc, data, iam = _process(workdir, f"127.0.0.1:{port}", root_access, root_secret, versioning)
    return _answered(S3Server(port, proc, data, iam), root_access, root_secret, timeout)


def start_s3_for_node(workdir: Path, node: NodeTestBed, root_access: str, root_secret: str,
                      timeout: float = 60.0) -> S3Server:
    """versitygw as an object store outside the node bed's cluster that its pods reach: a process of this host (no
    pod, no object of the cluster: deleting every namespace leaves it) listening on the node's address in the bed's
    network namespace (`pods_endpoint`, http://10.250.0.10:PORT, through the pods' bridge), and on this host's
    loopback through the bed's agent (tests/testbed/netns_agent.py: a tunnel in the namespace, a forwarder here) at
    `endpoint`, where the test and the s3 backend's client call it. Its data is this host's directory `data`."""
    inner = free_port()  # free here; the bed's namespace listens on few ports (the API server's, the kubelet's, DNS)
    proc, data, iam = _process(workdir, f"{NODE_IP}:{inner}", root_access, root_secret, False, node)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    tunnel, rpc = workdir / "s3.sock", workdir / "s3-rpc.sock"
    agent = ManagedProcess("s3 agent", node.nsenter(sys.executable, "-m", "tests.testbed.netns_agent", "inside",
                                                    "--tunnel", tunnel, "--target", f"{NODE_IP}:{inner}",
                                                    "--rpc", rpc), workdir / "agent.log", env=env)
    helpers = [agent]
    try:
        wait_for("the s3 agent in the namespace", lambda: True if rpc.exists() else None, 30, agent)
        forwarder = ManagedProcess("s3 forwarder", [sys.executable, "-m", "tests.testbed.netns_agent", "outside",
                                                    "--socket", tunnel], workdir / "forwarder.log", env=env)
        helpers.insert(0, forwarder)
        port = int(wait_for("the s3 forwarder on 127.0.0.1",
                            lambda: (m.group(1) if (m := re.search(r"listening on 127\.0\.0\.1:(\d+)",
                                                                   forwarder.log_text())) else None),
                            30, forwarder))
    except BaseException:
        for helper in (*helpers, proc):
            helper.stop()
        raise
    server = S3Server(port, proc, data, iam, tuple(helpers), f"http://{NODE_IP}:{inner}")
    return _answered(server, root_access, root_secret, timeout)
