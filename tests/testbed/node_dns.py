"""Cluster DNS on the node: CoreDNS (COREDNS_VERSION, tools/setup.sh build_coredns) inside the bed's network
namespace on the node's address, its kubernetes plugin reading the bed's API server as `system:coredns` (a client
certificate and a ClusterRole that lists and watches what it serves), behind the Service `kube-dns` at the
service range's 10th address as on a kubeadm cluster. No `forward`: the namespace has no way out, so names outside
the cluster are REFUSED at once instead of timing out (docs/node-tier.md "Cluster DNS")."""

from __future__ import annotations

import dataclasses
import secrets
import socket
import struct
import time
from pathlib import Path
from typing import Any

import httpx

from tests.testbed.netns import in_netns
from tests.testbed.procs import BedError

CLUSTER_DOMAIN = "cluster.local"
DNS_SERVICE_IP = "10.96.0.10"  # kubeadm's choice: the 10th address of the service range
USER = "system:coredns"
NOERROR, NXDOMAIN, REFUSED = 0, 3, 5
A, AAAA = 1, 28


def corefile(node_ip: str, kubeconfig: Path) -> str:
    """The server answers the cluster's zones only (any other name is REFUSED by CoreDNS itself: no `forward`,
    nothing to forward to), bound to the node's address, where kube-dns's EndpointSlice points."""
    return f"""{CLUSTER_DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {{
    bind {node_ip}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
    }}
}}
"""


def objects(node_ip: str) -> list[dict[str, Any]]:
    """What the bed writes once the API server is ready: the ClusterRole kubeadm gives CoreDNS (read only, what it
    serves), its binding to the certificate's user, and kube-dns with an EndpointSlice naming the node's address
    (CoreDNS is a bed process, not a pod: the Service has no selector)."""
    labels = {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}
    ports = [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": USER},
         "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": USER},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": USER},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kube-dns", "namespace": "kube-system",
                                                            "labels": labels},
         "spec": {"clusterIP": DNS_SERVICE_IP,
                  "ports": [{**p, "targetPort": 53} for p in ports]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "kube-dns-node", "namespace": "kube-system",
                      "labels": {"kubernetes.io/service-name": "kube-dns",
                                 "endpointslice.kubernetes.io/managed-by": "testbed.apprafter.dev"}},
         "addressType": "IPv4", "endpoints": [{"addresses": [node_ip], "conditions": {"ready": True}}],
         "ports": ports},
    ]


def create(http: httpx.Client, url: str, node_ip: str) -> None:
    """POST `objects` (a conflict is one already there: a start retried by the same bed)."""
    for obj in [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}, *objects(node_ip)]:
        group, version = obj["apiVersion"].rpartition("/")[::2]
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        ns = obj["metadata"].get("namespace")
        plural = {"EndpointSlice": "endpointslices", "ClusterRole": "clusterroles",
                  "ClusterRoleBinding": "clusterrolebindings"}.get(obj["kind"], obj["kind"].lower() + "s")
        path = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
        resp = http.post(url + path, json=obj)
        if resp.status_code not in (201, 409):
            raise BedError(f"creating {obj['kind']} {obj['metadata']['name']} for cluster DNS: "
                           f"{resp.status_code} {resp.text[:500]}")


@dataclasses.dataclass(frozen=True)
class Answer:
    """A DNS response: its rcode, the A/AAAA addresses in it, how long it took."""

    rcode: int
    addresses: tuple[str, ...]
    seconds: float


def query(netns_path: str, name: str, *, server: str = DNS_SERVICE_IP, port: int = 53, qtype: int = A,
          timeout: float = 2.0) -> Answer | None:
    """One query over UDP from inside the namespace (the bed's own resolver: no library, one question); None when
    nothing answered within `timeout`."""
    sock: socket.socket = in_netns(netns_path, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    ident = secrets.randbelow(1 << 16)
    question = b"".join(bytes([len(label)]) + label.encode() for label in name.rstrip(".").split(".")) + b"\0"
    packet = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack("!HH", qtype, 1)
    started = time.monotonic()
    with sock:
        sock.settimeout(timeout)
        sock.connect((server, port))
        sock.send(packet)
        try:
            while True:
                data = sock.recv(4096)
                if len(data) >= 12 and struct.unpack("!H", data[:2])[0] == ident:
                    break
        except (TimeoutError, ConnectionRefusedError):
            return None
    return Answer(data[3] & 0x0F, _addresses(data), time.monotonic() - started)


def _addresses(data: bytes) -> tuple[str, ...]:
    """The A and AAAA records of a response's answer section."""
    count = struct.unpack("!H", data[6:8])[0]
    offset = _skip_name(data, 12) + 4  # the question
    found = []
    for _ in range(count):
        offset = _skip_name(data, offset)
        rtype, _class, _ttl, length = struct.unpack("!HHIH", data[offset:offset + 10])
        rdata = data[offset + 10:offset + 10 + length]
        if rtype == A:
            found.append(socket.inet_ntop(socket.AF_INET, rdata))
        elif rtype == AAAA:
            found.append(socket.inet_ntop(socket.AF_INET6, rdata))
        offset += 10 + length
    return tuple(found)


def _skip_name(data: bytes, offset: int) -> int:
    while (length := data[offset]) != 0:
        if length >= 0xC0:  # a compression pointer ends the name
            return offset + 2
        offset += 1 + length
    return offset + 1
