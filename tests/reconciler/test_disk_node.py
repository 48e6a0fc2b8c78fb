"""`needs: disk` on the node tier (issue 31 items 4 and 5): the storage-class backend's PersistentVolumeClaim is
provisioned for real by kube-controller-manager's hostpath provisioner (the node bed's default StorageClass,
WaitForFirstConsumer), the app's pod mounts it at /data and writes a file there; the Application deleted (the garbage
collector takes its claim, whose finalizer keeps the data) and created again, the file is still there; the need
removed and its data-migration plan approved, the volume and its directory are gone.

The app runs the local Debian base image (root, python3): the hostpath provisioner makes each volume's directory
root-owned with mode 0750, which the test image's non-root user could not write (docs/node-tier.md)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reconciler.helpers import API, add_provider, apply, cr, plans
from tests.reconciler.node_pods import ready
from tests.reconciler.operator_proc import FAST, Operator, operator_fixture
from tests.renderer.helpers import run_cli
from tests.testbed.node import STORAGE_CLASS, NodeTestBed
from tests.testbed.testapp import _run as run_tool

pytestmark = [pytest.mark.node, pytest.mark.testbed]

RUN = uuid.uuid4().hex[:8]
PROVIDER = f"disk-node-{RUN}"
REPO = Path(__file__).resolve().parents[2]
# The app: says whether /data/first was there when it started, writes it when not, and serves 200 on 8080; SIGTERM
# exits at once (PID 1 ignores it without a handler: every pod's stop would wait out its 30 s grace period).
SCRIPT = """
import http.server, os, signal, socketserver
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
path = "/data/first"
if os.path.exists(path):
    print("found: " + open(path).read(), flush=True)
else:
    os.makedirs("/data", exist_ok=True)
    open(path, "w").write(os.environ["MESSAGE"])
    print("wrote: " + os.environ["MESSAGE"], flush=True)
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
socketserver.TCPServer(("", 8080), Ok).serve_forever()
"""


@pytest.fixture(scope="module")
def base_image(node: NodeTestBed) -> str:
    """The local Debian base (tools/base-image.sh), in the node's containerd."""
    return node.import_image(run_tool([str(REPO / "tools" / "base-image.sh"), "--name"]))


@pytest.fixture(scope="module")
def provider(node: NodeTestBed, operator: Operator) -> Iterator[None]:
    """A storage-class provider on the node's default class (no storageClassName: the default)."""
    add_provider(node, PROVIDER, "disk", "storage-class", {"defaultSize": "64Mi", "accessMode": "ReadWriteOnce"},
                 labels={"bed": RUN})
    yield
    node.delete(API, "ServiceProvider", PROVIDER)


operator = operator_fixture("--no-leader-elect", "--no-platform-stack", *FAST, bed="node", crds=True, inside=True,
                            name="disk-node")


def app(image: str, message: str, disk: bool = True) -> dict[str, Any]:
    return {"image": image, "replicas": 1, "expose": {"port": 8080}, "command": ["python3", "-c", SCRIPT],
            "env": {"MESSAGE": message}, **({"needs": {"disk": {"selector": {"bed": RUN}}}} if disk else {})}


def app_log(node: NodeTestBed, namespace: str) -> str:
    pods = node.http.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
    running = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    assert len(running) == 1, [p["metadata"]["name"] for p in pods]
    return node.logs(running[0]["metadata"]["name"], namespace)


def test_an_apps_disk_is_provisioned_keeps_its_file_across_re_creation_and_goes_with_an_approved_plan(
        node: NodeTestBed, base_image: str, operator: Operator, provider: None) -> None:
    namespace = f"disk-node-{RUN}"
    token = uuid.uuid4().hex
    node.ensure_namespace(namespace)
    try:
        started = time.monotonic()
        apply(node, cr(namespace, app(base_image, token)))
        node.wait(API, "Application", "demo", namespace, ready, timeout=180, what="Application demo Ready")
        first = time.monotonic() - started
        pvc = node.get("v1", "PersistentVolumeClaim", "demo-disk", namespace) or {}
        assert pvc["status"]["phase"] == "Bound" and pvc["spec"]["storageClassName"] == STORAGE_CLASS
        pv = node.get("v1", "PersistentVolume", pvc["spec"]["volumeName"], None) or {}
        directory = Path(pv["spec"]["hostPath"]["path"])
        assert (directory / "first").read_text() == token  # the provisioner's directory, as the pod wrote it
        assert app_log(node, namespace).splitlines()[-1] == f"wrote: {token}"
        claim = node.get(API, "ResourceClaim", "demo-disk", namespace) or {}
        assert claim["status"]["connection"]["pvcName"] == "demo-disk"

        # the Application goes: the garbage collector takes its claim (retained: the finalizer goes, the data
        # stays), its Deployment and pod; the volume is no one's child
        node.delete(API, "Application", "demo", namespace)
        node.wait_gone(API, "ResourceClaim", "demo-disk", namespace, timeout=120)
        node.wait_list("v1", "Pod", namespace, lambda items: items == [] or None, timeout=120)
        assert (node.get("v1", "PersistentVolumeClaim", "demo-disk", namespace) or {})["metadata"]["uid"] == \
            pvc["metadata"]["uid"]
        started = time.monotonic()
        apply(node, cr(namespace, app(base_image, token)))
        node.wait(API, "Application", "demo", namespace, ready, timeout=180, what="Application demo Ready again")
        again = time.monotonic() - started
        assert app_log(node, namespace).splitlines()[-1] == f"found: {token}"

        # the need removed: held for a data-migration plan; approved: the claim, the PVC and the volume go
        apply(node, cr(namespace, app(base_image, token, disk=False)))
        node.wait(API, "Application", "demo", namespace,
                  lambda o: o if (o.get("status") or {}).get("phase") == "AwaitingMigrationApproval" else None,
                  timeout=60, what="the change held")
        [plan] = plans(node, namespace)
        result = run_cli("migration", "approve", plan["metadata"]["name"], "-n", namespace, "--kubeconfig",
                         str(node.kubeconfig))
        assert result.returncode == 0, result.stderr
        node.wait_gone("v1", "PersistentVolumeClaim", "demo-disk", namespace, timeout=180)
        node.wait_gone("v1", "PersistentVolume", pv["metadata"]["name"], None, timeout=120)
        assert not directory.exists()
        print(f"disk app Ready: {first:.1f} s; re-created Ready: {again:.1f} s")
    finally:
        node.delete_namespaces([namespace])  # while its operator runs: the claim's finalizer is its to take off
