"""Cluster DNS on the node (tests/testbed/node_dns.py): pods get kube-dns in their resolv.conf, resolve Services by
name as on any cluster, connect by name; a name outside the cluster fails at once and nothing leaves the
namespace."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.testbed import node_dns
from tests.testbed.node import KUBERNETES_SERVICE_IP, NodeTestBed, RequestFailed
from tests.testbed.procs import wait_for
from tests.testbed.test_node import pod

pytestmark = [pytest.mark.node, pytest.mark.testbed]

HOME, OTHER = "dns-home", "dns-other"

# Run in the pod by its own python3: resolv.conf, each name through getaddrinfo (glibc, the pod's resolver) with
# how long it took, and a GET by name.
PROBE = """
import json, socket, sys, time, urllib.request
names, urls = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {"resolv.conf": open("/etc/resolv.conf").read(), "names": {}, "urls": {}}
for name in names:
    started = time.monotonic()
    try:
        found = sorted({a[4][0] for a in socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)})
    except socket.gaierror as exc:
        found = "gaierror: " + str(exc)
    out["names"][name] = {"answer": found, "seconds": time.monotonic() - started}
for url in urls:
    out["urls"][url] = urllib.request.urlopen(url, timeout=5).read().decode()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def services(node: NodeTestBed, test_app: str) -> Iterator[dict[str, str]]:
    """A pod of the test image behind a Service `web` in each of two namespaces, each answering its namespace's
    name; the ClusterIPs by namespace, once each answers through its ClusterIP (kube-proxy's rules are in)."""
    ips = {}
    for namespace in (HOME, OTHER):
        node.ensure_namespace(namespace)
        # Not named `web`: a pod's /etc/hosts names the pod itself, which would shadow the Service's name.
        web = pod("app", namespace, test_app, message=f"from {namespace}")
        web["metadata"]["labels"] = {"app": "web"}
        node.apply(web)
        node.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": namespace},
                    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}})
    for namespace in (HOME, OTHER):
        node.wait_condition("v1", "Pod", "app", namespace, "Ready")
        ips[namespace] = node.get("v1", "Service", "web", namespace)["spec"]["clusterIP"]  # type: ignore[index]

    def answers(ip: str) -> Any:
        with contextlib.suppress(RequestFailed):  # refused until kube-proxy's rules for it are in
            return node.request("GET", f"http://{ip}/", timeout=2).status_code == 200 or None
        return None

    for ip in ips.values():
        wait_for(f"the Service at {ip} answering", lambda ip=ip: answers(ip), 60, interval=0.05)  # type: ignore[misc]
    yield ips
    for namespace in (HOME, OTHER):  # not waited for: the namespace controller finishes while other tests run
        node.http.delete(f"/api/v1/namespaces/{namespace}")


def probe(node: NodeTestBed, names: list[str], urls: list[str] = []) -> dict[str, Any]:  # noqa: B006 - read only
    """PROBE run in HOME's pod through `kubectl exec`."""
    proc = node.kubectl("exec", "-n", HOME, "app", "--", "python3", "-c", PROBE, json.dumps(names), json.dumps(urls))
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_a_pod_resolves_services_by_name_and_connects_by_name(node: NodeTestBed,
                                                              services: dict[str, str]) -> None:
    names = ["kubernetes.default.svc.cluster.local", "kubernetes.default", "web", f"web.{OTHER}.svc",
             f"web.{OTHER}.svc.cluster.local", "kube-dns.kube-system.svc"]
    seen = probe(node, names, ["http://web/", f"http://web.{OTHER}.svc/"])
    lines = seen["resolv.conf"].splitlines()
    assert f"nameserver {node_dns.DNS_SERVICE_IP}" in lines, seen["resolv.conf"]
    assert f"search {HOME}.svc.cluster.local svc.cluster.local cluster.local" in lines, seen["resolv.conf"]
    assert "options ndots:5" in lines, seen["resolv.conf"]
    answers = {name: seen["names"][name]["answer"] for name in names}
    assert answers == {
        "kubernetes.default.svc.cluster.local": [KUBERNETES_SERVICE_IP], "kubernetes.default": [KUBERNETES_SERVICE_IP],
        "web": [services[HOME]], f"web.{OTHER}.svc": [services[OTHER]],
        f"web.{OTHER}.svc.cluster.local": [services[OTHER]], "kube-dns.kube-system.svc": [node_dns.DNS_SERVICE_IP],
    }, seen
    assert seen["urls"] == {"http://web/": f"from {HOME}\n", f"http://web.{OTHER}.svc/": f"from {OTHER}\n"}


def test_a_name_outside_the_cluster_fails_at_once_and_nothing_leaves_the_namespace(
        node: NodeTestBed, services: dict[str, str]) -> None:
    outside = ["example.com", "github.com", "no-such-service", f"missing.{HOME}.svc.cluster.local"]
    seen = probe(node, outside)
    for name in outside:
        result = seen["names"][name]
        assert str(result["answer"]).startswith("gaierror"), (name, result)
        # Answered by CoreDNS itself, not a resolver's timeout (5 s per try): there is nothing to forward to.
        assert result["seconds"] < 2, (name, result)
    # The answers CoreDNS gives, asked directly from the namespace: REFUSED for a zone it does not serve (no
    # `forward`), NXDOMAIN for a missing name in the cluster's zone.
    refused = node_dns.query(node.netns_path, "example.com")
    missing = node_dns.query(node.netns_path, f"missing.{HOME}.svc.cluster.local")
    assert refused is not None and refused.rcode == node_dns.REFUSED and not refused.addresses, refused
    assert missing is not None and missing.rcode == node_dns.NXDOMAIN and not missing.addresses, missing
    # The namespace has no route out: no query can leave it, whatever asks.
    route = subprocess.run(node.nsenter("ip", "route", "get", "8.8.8.8"), capture_output=True, text=True,
                           timeout=30, check=False)
    assert route.returncode != 0 and "unreachable" in route.stderr.lower(), (route.stdout, route.stderr)
