"""A registry inside the node's network namespace, serving the same docker-registry data as an AuthRegistry on the
host (which the tests push to) a second time: `serve_on_node`, a token-auth one the node's containerd pulls from on
the namespace's 127.0.0.1 (containerd's CRI speaks plain HTTP to a loopback registry; the registry and its token
realm both on the namespace's own loopback); `serve_at_node_ip`, an htpasswd one on the node's address, which pods
reach through the bridge (Argo CD's repo-server pulling charts, the operator verifying a stack). Nothing leaves the
namespace."""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import socket
import subprocess
import threading
from pathlib import Path

from tests.testbed.distribution import AuthRegistry
from tests.testbed.netns import in_netns
from tests.testbed.node import NodeTestBed
from tests.testbed.procs import BedError, ManagedProcess, tool, wait_for


def _free_port_inside(path: str, address: str = "127.0.0.1") -> int:
    def bind() -> int:
        with socket.socket() as s:
            s.bind((address, 0))
            return int(s.getsockname()[1])
    return in_netns(path, bind)


@dataclasses.dataclass
class NodeRegistry:
    """The registry as the node sees it: `host` (127.0.0.1:PORT in the namespace) names images pods pull."""

    host: str
    process: ManagedProcess
    token_server: http.server.ThreadingHTTPServer | None = None

    def stop(self) -> None:
        self.process.stop()
        if self.token_server is not None:
            self.token_server.shutdown()
            self.token_server.server_close()


def serve_on_node(registry: AuthRegistry, node: NodeTestBed, workdir: Path, timeout: float = 20.0) -> NodeRegistry:
    """Serve `registry`'s data and logins (token flavour) inside the node's namespace; returns once it challenges."""
    if registry.token_handler is None or registry.config is None:
        raise BedError("serve_on_node needs a token-flavour AuthRegistry")
    handler = registry.token_handler
    token_server = in_netns(node.netns_path, lambda: http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler))
    threading.Thread(target=token_server.serve_forever, name="node-token", daemon=True).start()
    port = _free_port_inside(node.netns_path)
    config = json.loads(registry.config.read_text())
    config["http"]["addr"] = f"127.0.0.1:{port}"
    config["auth"]["token"]["realm"] = f"http://127.0.0.1:{token_server.server_address[1]}/token"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yml").write_text(json.dumps(config))
    process = ManagedProcess("docker-registry-node", node.nsenter(tool("docker-registry"), "serve",
                                                                  workdir / "config.yml"), workdir / "registry.log")
    served = NodeRegistry(f"127.0.0.1:{port}", process, token_server)
    node.pull_over_http(served.host)  # said, not left to containerd's loopback default
    try:
        wait_for("the node's registry to challenge on /v2/",
                 lambda: node.request("GET", f"http://{served.host}/v2/").status_code == 401 or None, timeout, process)
        return served
    except BaseException:
        served.stop()
        raise


def serve_at_node_ip(registry: AuthRegistry, node: NodeTestBed, workdir: Path, timeout: float = 20.0) -> NodeRegistry:
    """Serve `registry`'s data and logins (htpasswd flavour) on the node's address inside its namespace, where pods
    reach it; returns once it challenges. The host side (`registry.url`) is where pushes go."""
    if registry.flavour != "htpasswd" or registry.config is None:
        raise BedError("serve_at_node_ip needs an htpasswd-flavour AuthRegistry")
    port = _free_port_inside(node.netns_path, node.node_ip)
    config = json.loads(registry.config.read_text())
    config["http"]["addr"] = f"{node.node_ip}:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yml").write_text(json.dumps(config))
    process = ManagedProcess("docker-registry-node-ip", node.nsenter(tool("docker-registry"), "serve",
                                                                     workdir / "config.yml"), workdir / "registry.log")
    served = NodeRegistry(f"{node.node_ip}:{port}", process)
    node.pull_over_http(served.host)  # the node's own network's registry, plain HTTP (pods pull the shop from it)
    try:
        wait_for("the node's registry to challenge on /v2/",
                 lambda: node.request("GET", f"http://{served.host}/v2/").status_code == 401 or None, timeout, process)
        return served
    except BaseException:
        served.stop()
        raise


def push(registry: AuthRegistry, source: str, target: str, workdir: Path) -> None:
    """`podman push` of a local image to the host's side of the registry with its push login (an authfile)."""
    auth = registry.docker_config(workdir / "push-auth") / "config.json"
    proc = subprocess.run(["podman", "push", "--quiet", "--tls-verify=false", "--authfile", str(auth), source,
                           f"{registry.url}/{target}"], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "CONTAINERS_CONF": str(Path(__file__).resolve().parents[2] / "tools" /
                                                                     "containers.conf")})
    if proc.returncode != 0:
        raise BedError(f"podman push {target}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
