"""A real single-node Kubernetes for the node tier: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, containerd, kubelet, kube-proxy and CoreDNS (the cluster DNS: tests/testbed/node_dns.py), all
inside a network namespace the bed creates (see /work/shared/design/facts-node.md for why each setting is there),
reachable from the host through a forwarder on 127.0.0.1. `start_node(dir)` returns a `NodeTestBed`; `stop()`
leaves the host as it was (tests/testbed/hoststate.py).
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.parallel import favour_the_long_pole
from tests.testbed import hostpath, hoststate, node_dns
from tests.testbed.crds import bed_crd_files
from tests.testbed.kube import ADMIN_USER, KubeTestBed, _rejected, ssl_context
from tests.testbed.pki import CA, ServingCert, service_account_keys
from tests.testbed.procs import BedError, ManagedProcess, system_tool, tool, wait_for
from toolchain.tools import ToolError, tools_dir

REPO = Path(__file__).resolve().parents[2]
NODE_NAME = "apprafter-node"
# Every address below lives only inside the bed's network namespace.
NODE_IP = "10.250.0.10"
POD_CIDR, POD_GATEWAY = "10.244.0.0/24", "10.244.0.1"
SERVICE_CIDR, KUBERNETES_SERVICE_IP = "10.96.0.0/24", "10.96.0.1"
API_PORT = 6443
NODE_DEVICE, BRIDGE = "nodeip0", "cni0"
# The bridge's own MAC, set when it is made: a bridge with none takes its lowest port's MAC and changes it as pods
# come and go, and a pod still sending to the MAC of a port just removed loses its replies until its ARP entry
# expires (seconds to a minute). The CNI bridge plugin pins its bridges' MACs too, but only with isGateway.
BRIDGE_MAC = "02:a7:00:00:00:01"
CONTAINERD_NAMESPACE = "k8s.io"
IMAGE_ID_LABEL = "dev.apprafter.image-id"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet",
              "kube-proxy", "coredns")


def pause_image() -> str:
    """The sandbox image tools/setup-node.sh commits: named by the hash of tools/pause's source."""
    source = (REPO / "tools/pause/main.go").read_bytes() + (REPO / "tools/pause/go.mod").read_bytes()
    return f"localhost/apprafter-pause:{hashlib.sha256(source).hexdigest()[:12]}"


class Response:
    """What a request made inside the namespace got back."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status_code, self.headers, self.content = status, dict(headers), body

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class RequestFailed(BedError):
    """A request made inside the namespace got no HTTP answer (refused, timed out, reset)."""


class Traffic:
    """A bounded stream of requests to one URL made inside the namespace, each on a new connection."""

    def __init__(self, rpc: httpx.Client, key: str) -> None:
        self._rpc, self._key = rpc, key
        self.result: dict[str, Any] | None = None

    def stop(self) -> dict[str, Any]:
        """Stop and count: {sent, ok, failed, outcomes: {status or error: n}, bodies: {body: n}, failures,
        retried, retries, slowest_seconds}; a request whose connection was never made is tried once more (it
        counts as failed only when that fails too) and listed in `retries`."""
        if self.result is None:
            resp = self._rpc.post("/traffic/stop", json={"id": self._key}, timeout=30)
            resp.raise_for_status()
            self.result = resp.json()
        return self.result


class ImageStore:
    """containerd's root (images and their unpacked layers), kept between beds in the tools cache's sibling
    `node-containerd/` so a warm start imports nothing; one bed at a time holds it (a lock), a second bed at the
    same time (the suite's two node units, tests/parallel.py) the next slot, `node-containerd-2/`, and a third gets
    a root of its own in its directory. A store whose last user died is wiped (its metadata lists dead pods).
    APPRAFTER_NODE_IMAGE_CACHE names another directory; empty: always a private root."""

    SLOTS = 2

    def __init__(self, root: Path, lock: Any = None) -> None:
        self.root, self._lock = root, lock

    @property
    def shared(self) -> bool:
        return self._lock is not None

    @staticmethod
    def open(private: Path) -> ImageStore:
        import fcntl

        setting = os.environ.get("APPRAFTER_NODE_IMAGE_CACHE")
        if setting == "":
            return ImageStore(private)
        first = Path(setting) if setting else tools_dir().parent / "node-containerd"
        first.parent.mkdir(parents=True, exist_ok=True)
        for slot in range(1, ImageStore.SLOTS + 1):
            path = first if slot == 1 else first.with_name(f"{first.name}-{slot}")
            lock = open(path.parent / f"{path.name}.lock", "w")  # noqa: SIM115 - held until release()
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            if (path / ".in-use").exists():
                shutil.rmtree(path)
            path.mkdir(exist_ok=True)
            (path / ".in-use").touch()
            return ImageStore(path, lock)
        return ImageStore(private)

    def release(self, clean: bool) -> None:
        """Give the store back; `clean` (no containers left in it) keeps it for the next bed."""
        if self._lock is not None:
            if clean:
                (self.root / ".in-use").unlink(missing_ok=True)
            self._lock.close()
            self._lock = None


class NodeTestBed(KubeTestBed):
    """A running single-node cluster. Besides KubeTestBed's API (url, token, kubeconfig, ca_path, client, http,
    apply/get/delete, service_account_token, kubeconfig_for, as_user, install_crds, ...): `import_image`,
    `wait`/`wait_condition`/`wait_gone`/`wait_list` (watches), `kubectl`, `logs`, `request`/`traffic` (HTTP from
    inside the namespace), `component_log`, and the addresses (`node_ip`, `netns`)."""

    def __init__(self, url: str, token: str, ca_path: Path, kubeconfig: Path, processes: list[ManagedProcess],
                 *, workdir: Path, netns: str, record: hoststate.BedRecord, recovered: list[str], ca: CA,
                 store: ImageStore, sandbox: str) -> None:
        super().__init__(url, token, ca_path, kubeconfig, processes)
        self.dir, self.netns, self.record = workdir, netns, record
        self.netns_path = f"/run/netns/{netns}"
        self.node_name, self.node_ip = NODE_NAME, NODE_IP
        self.recovered = recovered  # what the start undid of a run that died (hoststate.claim)
        self.released: list[str] = []  # what stop() undid
        self.rpc = httpx.Client(transport=httpx.HTTPTransport(uds=str(workdir / "rpc.sock")), base_url="http://agent",
                                timeout=60)
        self._images: dict[str, str] = {}  # podman image ID -> containerd name, imported this session
        self._stopped = False
        self.timings: dict[str, float] = {}
        self.ca = ca
        self.store, self.sandbox = store, sandbox
        # opens and records the host-path provisioner's volumes (tests/testbed/hostpath.py); started by start_node
        self.volumes = hostpath.VolumeWatcher(url, token, ca_path, workdir)

    # --- people -----------------------------------------------------------------------------------------

    def user_certificate(self, user: str, groups: Iterable[str] = ()) -> ServingCert:
        """A client certificate of the bed's CA for `user` in `groups`: any person, made when a test needs one
        (token users are fixed when the API server starts)."""
        listed = tuple(groups)
        stem = "user-" + hashlib.sha256(f"{user}\0{','.join(listed)}".encode()).hexdigest()[:12]
        return self.ca.issue(self.dir / "pki" / "users", stem, user, organizations=listed, client=True)

    def as_person(self, user: str, groups: Iterable[str] = ()) -> httpx.Client:
        """An httpx client authenticated as `user` (in `groups`) by a client certificate; RBAC is the test's."""
        cert = self.user_certificate(user, groups)
        context = ssl_context(self.ca_path)
        context.load_cert_chain(cert.cert_path, cert.key_path)
        return httpx.Client(base_url=self.url, verify=context, timeout=30)

    def person_kubeconfig(self, path: Path, user: str, groups: Iterable[str] = ()) -> Path:
        """A kubeconfig (through the host's forwarder) for `user` in `groups` with a client certificate."""
        return _kubeconfig(path, self.url, self.ca.pem, self.user_certificate(user, groups), user)

    def inner_kubeconfig(self, path: Path, user: str, groups: Iterable[str] = ()) -> Path:
        """A kubeconfig for a process run inside the namespace (`nsenter`): the API server's address there, `user`
        in `groups` with a client certificate."""
        return _kubeconfig(path, f"https://{NODE_IP}:{API_PORT}", self.ca.pem, self.user_certificate(user, groups),
                           user)

    # --- inside the namespace -------------------------------------------------------------------------

    def nsenter(self, *argv: str | os.PathLike[str]) -> list[str]:
        """argv run in the bed's network namespace (and the host's mount namespace, which kubelet and
        containerd share)."""
        return [system_tool("nsenter", "apt-get install util-linux"), f"--net={self.netns_path}", *map(str, argv)]

    def request(self, method: str, url: str, *, headers: Mapping[str, str] | None = None, body: bytes | None = None,
                ca: bytes | None = None, timeout: float = 10) -> Response:
        """One HTTP request made from inside the namespace (to a pod IP, a ClusterIP, the node). `ca` verifies
        TLS with that CA; without it TLS is not verified (as the kubelet probes). RequestFailed on no answer."""
        spec = {"method": method, "url": url, "headers": dict(headers or {}), "timeout": timeout,
                "body": base64.b64encode(body).decode() if body else None, "ca": ca.decode() if ca else None}
        answer = self.rpc.post("/request", json=spec, timeout=timeout + 30).json()
        if "error" in answer:
            raise RequestFailed(f"{method} {url} from inside the namespace: {answer['error']}")
        return Response(answer["status"], answer["headers"], base64.b64decode(answer["body"]))

    @contextlib.contextmanager
    def traffic(self, url: str, *, interval: float = 0.02, timeout: float = 2, connect_timeout: float = 5,
                ca: bytes | None = None, max_seconds: float = 300) -> Iterator[Traffic]:
        """Requests to `url` from inside the namespace, each on a new connection, every `interval` seconds,
        until the block ends (or max_seconds): `traffic.stop()` (or `.result` after the block) has the counts.
        `timeout` bounds each read and write, `connect_timeout` the connection (long enough for SYN retries)."""
        spec = {"url": url, "interval": interval, "timeout": timeout, "connect_timeout": connect_timeout,
                "ca": ca.decode() if ca else None, "max_seconds": max_seconds}
        resp = self.rpc.post("/traffic/start", json=spec)
        resp.raise_for_status()
        stream = Traffic(self.rpc, resp.json()["id"])
        try:
            yield stream
        finally:
            stream.stop()

    # --- images -----------------------------------------------------------------------------------------

    def import_image(self, ref: str) -> str:
        """Bring an image from podman's storage into the node's containerd (skipped when the same image ID is
        there); returns the name pods use (with imagePullPolicy Never or IfNotPresent)."""
        image_id = _podman_image_id(ref)
        name = ref if "/" in ref.split(":")[0] or ref.startswith("localhost/") else f"localhost/{ref}"
        if self._images.get(image_id) == name:
            return name
        started = time.monotonic()
        if _import(self.dir / "containerd" / "containerd.sock", ref, name, image_id):
            self.timings[f"import {ref}"] = time.monotonic() - started
        self._images[image_id] = name
        return name

    def pull_over_http(self, host: str) -> None:
        """containerd pulls from registry `host` (an address inside the node's namespace) over plain HTTP, as a
        cluster's nodes are told of their own network's registry (a hosts.toml under its config_path, read at each
        pull)."""
        directory = self.dir / "containerd" / "certs.d" / host
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hosts.toml").write_text(f'server = "http://{host}"\n\n[host."http://{host}"]\n'
                                              '  capabilities = ["pull", "resolve"]\n')

    def ctr(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """containerd's own client on the node's containerd (namespace k8s.io, where the kubelet's pods are)."""
        return _ctr(self.dir / "containerd" / "containerd.sock", *args, check=check)

    # --- watching ---------------------------------------------------------------------------------------

    def wait(self, api_version: str, kind: str, name: str, namespace: str | None,
             predicate: Callable[[dict[str, Any]], Any],
             *, timeout: float = 120, what: str = "") -> dict[str, Any]:
        """Watch one object until `predicate(obj)` is truthy; returns it. A timeout raises with the last state."""
        found = self._watch_until(api_version, kind, namespace, f"metadata.name={name}", None,
                                  lambda items: next((o for o in items.values() if predicate(o)), None),
                                  timeout, what or f"{kind} {name}")
        result: dict[str, Any] = found
        return result

    def wait_condition(self, api_version: str, kind: str, name: str, namespace: str | None, condition: str,
                       status: str = "True", *, timeout: float = 120) -> dict[str, Any]:
        """Watch until the object's status has condition `condition` with `status`."""
        return self.wait(api_version, kind, name, namespace, lambda o: has_condition(o, condition, status),
                         timeout=timeout, what=f"{kind} {name} {condition}={status}")

    def wait_gone(self, api_version: str, kind: str, name: str, namespace: str | None, *,
                  timeout: float = 120) -> None:
        """Watch until the object no longer exists."""
        self._watch_until(api_version, kind, namespace, f"metadata.name={name}", None,
                          lambda items: True if not items else None, timeout, f"{kind} {name} to be gone")

    def wait_list(self, api_version: str, kind: str, namespace: str | None,
                  predicate: Callable[[list[dict[str, Any]]], Any], *, labels: str | None = None,
                  timeout: float = 120, what: str = "") -> Any:
        """Watch a collection (optionally by label selector) until `predicate(items)` is truthy; returns its
        value."""
        return self._watch_until(api_version, kind, namespace, None, labels,
                                 lambda items: predicate(list(items.values())), timeout, what or f"{kind} list")

    def _watch_until(self, api_version: str, kind: str, namespace: str | None, fields: str | None,
                     labels: str | None, check: Callable[[dict[str, dict[str, Any]]], Any], timeout: float,
                     what: str) -> Any:
        info = self.resource_for(api_version, kind)
        path = info.path(None, namespace if info.namespaced else None)
        params = {k: v for k, v in (("fieldSelector", fields), ("labelSelector", labels)) if v}
        deadline = time.monotonic() + timeout
        items: dict[str, dict[str, Any]] = {}
        while True:  # list, then watch from its resourceVersion; a watch the server ends is started again
            resp = self.http.get(path, params=params)
            if resp.status_code >= 300:
                raise _rejected(resp, f"listing {kind}")
            listed = resp.json()
            items = {_key(o): o for o in listed.get("items", [])}
            version = listed["metadata"]["resourceVersion"]
            result = check(items)
            if result:
                return result
            while (left := deadline - time.monotonic()) > 0:
                watch = {**params, "watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true",
                         "timeoutSeconds": str(max(1, int(left)))}
                with self.http.stream("GET", path, params=watch, timeout=httpx.Timeout(left + 5)) as stream:
                    if stream.status_code >= 300:
                        stream.read()
                        raise _rejected(stream, f"watching {kind}")
                    for line in stream.iter_lines():
                        if not line:
                            continue
                        event = json.loads(line)
                        obj = event["object"]
                        if event["type"] == "ERROR":  # e.g. 410 Gone: list again
                            version = ""
                            break
                        version = obj["metadata"]["resourceVersion"]
                        if event["type"] == "BOOKMARK":
                            continue
                        if event["type"] == "DELETED":
                            items.pop(_key(obj), None)
                        else:
                            items[_key(obj)] = obj
                        result = check(items)
                        if result:
                            return result
                if not version:
                    break
            else:
                raise BedError(f"timed out after {timeout:.0f}s waiting for {what}; last seen: "
                               f"{json.dumps(list(items.values()), default=str)[-3000:]}\n{self.diagnostics()}")

    # --- kubectl, logs, diagnostics ---------------------------------------------------------------------

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120,
                input: str | None = None) -> subprocess.CompletedProcess[str]:
        """The pinned kubectl as the admin, through the host's forwarder (as a person runs it)."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.dir / "home"),
               "KUBECONFIG": str(self.kubeconfig)}
        proc = subprocess.run([str(tool("kubectl")), *args], capture_output=True, text=True, timeout=timeout,
                              check=False, env=env, input=input)
        if check and proc.returncode != 0:
            raise BedError(f"kubectl {' '.join(args)} exited {proc.returncode}: {proc.stderr[-3000:]}")
        return proc

    def logs(self, pod: str, namespace: str, container: str | None = None, *, previous: bool = False) -> str:
        """A container's log through the API server and the kubelet (as `kubectl logs`)."""
        params = {k: v for k, v in (("container", container), ("previous", "true" if previous else None)) if v}
        resp = self.http.get(f"/api/v1/namespaces/{namespace}/pods/{pod}/log", params=params)
        if resp.status_code >= 300:
            raise _rejected(resp, f"logs of pod {namespace}/{pod}")
        return resp.text

    def component_log(self, name: str) -> str:
        """The log of one of the node's servers (COMPONENTS)."""
        return next(p for p in self.processes if p.name == name).log_text()

    def events(self, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.http.get(f"/api/v1/namespaces/{namespace}/events").json()["items"]
        return items

    def diagnostics(self) -> str:
        """What helps when a wait times out: the pods, recent events, the kubelet's and kube-proxy's last lines."""
        lines = []
        with contextlib.suppress(Exception):
            pods = self.http.get("/api/v1/pods").json()["items"]
            for pod in pods:
                statuses = [(c["name"], c.get("state"), c.get("restartCount"))
                            for c in pod.get("status", {}).get("containerStatuses", [])]
                lines.append(f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']} "
                             f"{pod['status'].get('phase')} {statuses}")
            events = self.http.get("/api/v1/events").json()["items"][-15:]
            lines += [f"event {e['involvedObject']['kind']} {e['involvedObject']['name']}: {e['reason']} "
                      f"{e.get('message', '')[:200]}" for e in events]
        for proc in self.processes:
            if proc.name in ("kubelet", "kube-proxy"):
                lines.append(f"{proc.name}:\n{proc.tail(15)}")
        return "\n".join(lines)

    # --- namespaces -------------------------------------------------------------------------------------

    def ensure_namespace(self, name: str) -> None:
        """Create namespace `name` and wait for its `default` ServiceAccount (the controller-manager makes it;
        a pod without it is refused)."""
        with self._lock:
            if name in self._namespaces:
                return
        resp = self.http.post("/api/v1/namespaces",
                              json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        if resp.status_code not in (200, 201, 409):
            raise _rejected(resp, f"creating namespace {name}")
        self.wait("v1", "ServiceAccount", "default", name, lambda o: True, timeout=60,
                  what=f"ServiceAccount {name}/default")
        with self._lock:
            self._namespaces.add(name)

    def delete_namespace(self, name: str, *, timeout: float = 120) -> None:
        """Delete namespace `name` and wait until it is gone, its pods stopped with it (so nothing it ran, a crash
        loop or an OOM kill, goes on beside the next test)."""
        resp = self.http.delete(f"/api/v1/namespaces/{name}")
        if resp.status_code not in (200, 202, 404):
            raise _rejected(resp, f"deleting namespace {name}")
        self.wait_gone("v1", "Namespace", name, None, timeout=timeout)
        with self._lock:
            self._namespaces.discard(name)

    @contextlib.contextmanager
    def scratch_namespace(self, name: str) -> Iterator[str]:
        """Namespace `name` for the block, deleted (and waited gone) when it ends, also when it fails."""
        with self.scratch_namespaces([name]):
            yield name

    @contextlib.contextmanager
    def scratch_namespaces(self, names: Iterable[str]) -> Iterator[list[str]]:
        """Namespaces `names` for the block, all deleted at once when it ends (also when it fails), then waited
        gone: the namespace controller looks again at a namespace with running pods only after half their grace
        period (16 s by default), so one at a time would wait that long for each."""
        made: list[str] = []
        try:
            for name in names:
                self.ensure_namespace(name)
                made.append(name)
            yield made
        finally:
            self.delete_namespaces(made)

    def delete_namespaces(self, names: Iterable[str], *, timeout: float = 120) -> None:
        """Delete every namespace of `names` and wait until each is gone, their pods stopped first: our
        Applications deleted (before their Deployments, which a running operator would otherwise put back) and the
        workloads, then every pod waited gone (the apps here stop at SIGTERM), then the namespaces, which then have
        no pod left to wait for. Deleted with pods still running, a namespace is looked at again only after half their
        grace period (the namespace controller's estimate: 16 s by default), however soon the pods stop."""
        names = list(names)
        for name in names:
            for group, resource in (("apprafter.io/v1alpha1", "applications"), ("apps/v1", "deployments"),
                                    ("apps/v1", "statefulsets"), ("batch/v1", "jobs"), ("v1", "pods")):
                base = "/api/v1" if group == "v1" else f"/apis/{group}"
                resp = self.http.delete(f"{base}/namespaces/{name}/{resource}",
                                        params={"propagationPolicy": "Background"})
                if resp.status_code not in (200, 404):
                    raise _rejected(resp, f"deleting the {resource} of namespace {name}")
        for name in names:
            self.wait_list("v1", "Pod", name, lambda items: True if not [
                p for p in items if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")] else None,
                timeout=timeout, what=f"the pods of namespace {name} gone")
        for name in names:
            resp = self.http.delete(f"/api/v1/namespaces/{name}")
            if resp.status_code not in (200, 202, 404):
                raise _rejected(resp, f"deleting namespace {name}")
        for name in names:
            self.delete_namespace(name, timeout=timeout)

    # --- stop -------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every server, then sweep what they leave (pods, shims, mounts, cgroups, the namespace, the
        hostpath provisioner's volumes: tests/testbed/hostpath.py) and put the host's sysctls back when no other bed
        runs. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(Exception):
            self.rpc.close()
        self.volumes.stop()
        self.http.close()
        self.client.close()
        last = [p for p in self.processes if p.name in ("containerd", "forwarder")]
        for proc in reversed(self.processes):  # the servers, newest first (kube-proxy, kubelet, ..., etcd)
            if proc not in last:
                proc.stop()
        clean = False
        if self.store.shared:
            try:
                self._empty_containerd()
                clean = True
            except Exception as exc:  # the store is wiped by the next bed instead
                self.released.append(f"containerd's store not emptied: {exc}")
        for proc in reversed(last):
            proc.stop()
        self.released += hoststate.release(self.record)
        self.store.release(clean)
        if os.environ.get("APPRAFTER_KEEP_TESTBED") != "1":
            shutil.rmtree(self.dir, ignore_errors=True)


    def _empty_containerd(self) -> None:
        """Before containerd stops: its tasks and containers gone, and the images no test used this session."""
        tasks = self.ctr("tasks", "ls", "-q", check=True).stdout.split()
        if tasks:
            self.ctr("tasks", "delete", "--force", *tasks, check=True)
        containers = self.ctr("containers", "ls", "-q", check=True).stdout.split()
        if containers:
            self.ctr("containers", "delete", *containers, check=True)
        kept = {*self._images.values(), self.sandbox}
        refs = [line.split()[:3] for line in self.ctr("images", "ls", check=True).stdout.splitlines()[1:]]
        wanted = {digest for ref, _, digest in refs if ref in kept}
        unused = [ref for ref, _, digest in refs if digest not in wanted]
        if unused:
            self.ctr("images", "rm", *unused, check=True)


def has_condition(obj: Mapping[str, Any], condition: str, status: str = "True") -> bool:
    return any(c.get("type") == condition and c.get("status") == status
               for c in (obj.get("status") or {}).get("conditions") or [])


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(REPO / "tools" / "containers.conf")}


def _podman_image_id(ref: str) -> str:
    proc = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True,
                          timeout=60, check=False, env=_podman_env())
    if proc.returncode != 0:
        raise BedError(f"image {ref} is not in podman's storage: {proc.stderr.strip()[-500:]}")
    return proc.stdout.strip()


# --- start ------------------------------------------------------------------------------------------------


def _run(argv: Iterable[str | os.PathLike[str]], what: str) -> str:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise BedError(f"{what}: {' '.join(map(str, argv))} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


# The node's default StorageClass: kube-controller-manager's hostpath provisioner, named as k3s' class (the dev and
# solo tiers' integrated `disk` provider names `local-path`), which it stands in for: a node-local directory per
# volume, made once its pod is scheduled, deleted with its claim.
STORAGE_CLASS = "local-path"


def _create_storage_class(http: httpx.Client, url: str) -> None:
    """The default StorageClass of the node (a conflict is one already there: a start retried by the same bed).
    WaitForFirstConsumer, as k3s' local-path: a volume is made once its pod is scheduled; no expansion."""
    obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
           "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
           "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete",
           "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": False}
    resp = http.post(url + "/apis/storage.k8s.io/v1/storageclasses", json=obj)
    if resp.status_code not in (201, 409):
        raise BedError(f"creating StorageClass {STORAGE_CLASS}: {resp.status_code} {resp.text[:500]}")


def _kubeconfig(path: Path, url: str, ca_pem: bytes, cert: ServingCert | None, user: str,
                token: str | None = None) -> Path:
    """A kubeconfig with the bed's CA and a client certificate (or a token)."""
    credentials: dict[str, str] = {"token": token} if token else {
        "client-certificate-data": base64.b64encode(cert.cert_path.read_bytes()).decode() if cert else "",
        "client-key-data": base64.b64encode(cert.key_path.read_bytes()).decode() if cert else ""}
    cluster = {"server": url, "certificate-authority-data": base64.b64encode(ca_pem).decode()}
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "node",
              "clusters": [{"name": "node", "cluster": cluster}],
              "users": [{"name": user, "user": credentials}],
              "contexts": [{"name": "node", "context": {"cluster": "node", "user": user, "namespace": "default"}}]}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def _cgroup_hierarchies() -> list[Path]:
    """The cgroup hierarchies mounted under /sys/fs/cgroup (v1 controllers, name=systemd, the v2 unified)."""
    mounted = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
               if " - cgroup" in line]
    return sorted(Path(p) for p in mounted if p.startswith("/sys/fs/cgroup/"))


def _make_cgroup_root(name: str) -> None:
    """kubelet's cgroupRoot must exist in every hierarchy; cpuset's needs its CPUs and memory nodes set."""
    for hierarchy in _cgroup_hierarchies():
        directory = hierarchy / name
        directory.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / knob).exists() and not (directory / knob).read_text().strip():
                (directory / knob).write_text((hierarchy / knob).read_text())


def start_node(workdir: Path, *, install_crds: bool = True, users: Mapping[str, Iterable[str]] | None = None,
               timeout: float = 180.0) -> NodeTestBed:
    """Start a single-node cluster in a network namespace of its own; see the module docstring."""
    binaries = {name: tool(name) for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                              "kubelet", "kube-proxy", "coredns")}
    remedy = "run `make setup` (tools/setup-node.sh installs it)"
    containerd, ip = system_tool("containerd", remedy), system_tool("ip", remedy)
    system_tool("iptables", remedy)  # kube-proxy's
    if not Path("/usr/lib/cni/bridge").exists():
        import pytest

        pytest.fail(f"test bed needs the CNI plugins in /usr/lib/cni: {remedy}", pytrace=False)
    try:
        crds = bed_crd_files() if install_crds else []
    except ToolError as exc:
        import pytest

        pytest.fail(f"test bed needs the CRDs: {exc}", pytrace=False)
    sandbox = pause_image()
    _podman_image_id(sandbox)  # fails with the remedy's cue when the set-up did not build it
    favour_the_long_pole()
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    suffix = secrets.token_hex(4)
    netns = cgroup = f"apprafter-node-{suffix}"
    record = hoststate.BedRecord.mine(workdir, netns, cgroup)
    recovered = hoststate.claim(record)
    procs: list[ManagedProcess] = []
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    nsenter = [system_tool("nsenter", "apt-get install util-linux"), f"--net=/run/netns/{netns}"]
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(workdir / "home"),
           "TMPDIR": str(workdir / "home")}
    (workdir / "home").mkdir(exist_ok=True)

    def server(name: str, argv: list[str | os.PathLike[str]],
               extra_env: Mapping[str, str] | None = None) -> ManagedProcess:
        proc = ManagedProcess(name, [*nsenter, *argv], logs / f"{name}.log", env={**env, **(extra_env or {})})
        procs.append(proc)
        return proc

    bed: NodeTestBed | None = None
    store: ImageStore | None = None
    try:
        # The namespace: lo, the node's address on an ifb device (this kernel has no dummy), the pods' bridge.
        _run([ip, "netns", "add", netns], "creating the network namespace")
        inside = [*nsenter]
        for argv in (["ip", "link", "set", "lo", "up"],
                     ["ip", "link", "add", NODE_DEVICE, "type", "ifb"],
                     ["ip", "addr", "add", f"{NODE_IP}/32", "dev", NODE_DEVICE],
                     ["ip", "link", "set", NODE_DEVICE, "up"],
                     ["ip", "link", "add", BRIDGE, "address", BRIDGE_MAC, "type", "bridge"],
                     ["ip", "addr", "add", f"{POD_GATEWAY}/24", "dev", BRIDGE],
                     ["ip", "link", "set", BRIDGE, "up"],
                     # A route for ClusterIPs, so that a connection from the namespace itself reaches kube-proxy's
                     # DNAT (the namespace has no default route: nothing it sends can leave it).
                     ["ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE, "src", POD_GATEWAY],
                     # Pod -> ClusterIP -> pod is forwarded by the namespace; bridged replies pass its iptables.
                     # A pod's address is resolved with 6 ARP probes a second apart, not the kernel's 3: on a
                     # machine at load 6+ one unanswered resolution in ~1,000 new connections failed a traffic
                     # test with a connect error after exactly 3 s (the namespace's own setting, not the host's).
                     ["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward && "
                                  "echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables && "
                                  f"echo 6 > /proc/sys/net/ipv4/neigh/{BRIDGE}/mcast_solicit"]):
            _run([*inside, *argv], "setting up the network namespace")
        _make_cgroup_root(cgroup)
        pki = workdir / "pki"
        ca = CA("apprafter-node-ca")
        ca_pem = ca.pem
        apiserver_cert = ca.issue(pki, "apiserver", "kube-apiserver", ips=("127.0.0.1", NODE_IP, KUBERNETES_SERVICE_IP),
                                  dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                             "kubernetes.default.svc.cluster.local"))
        kubelet_serving = ca.issue(pki, "kubelet-serving", NODE_NAME, ips=(NODE_IP,), dns_names=(NODE_NAME,))
        clients = {
            "admin": ca.issue(pki, "admin", ADMIN_USER, organizations=("system:masters",), client=True),
            "apiserver-kubelet-client": ca.issue(pki, "apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                                 organizations=("system:masters",), client=True),
            "kube-controller-manager": ca.issue(pki, "kube-controller-manager", "system:kube-controller-manager",
                                                client=True),
            "kube-scheduler": ca.issue(pki, "kube-scheduler", "system:kube-scheduler", client=True),
            "kubelet": ca.issue(pki, "kubelet", f"system:node:{NODE_NAME}", organizations=("system:nodes",),
                                client=True),
            "kube-proxy": ca.issue(pki, "kube-proxy", "system:kube-proxy", client=True),
            "coredns": ca.issue(pki, "coredns", node_dns.USER, client=True),
        }
        sa_key, sa_pub = service_account_keys(pki)
        token = secrets.token_hex(24)
        user_tokens = {name: secrets.token_hex(24) for name in users or {}}
        lines = [f'{token},{ADMIN_USER},{ADMIN_USER}-uid,"system:masters"']
        for name, groups in (users or {}).items():
            listed = ",".join(groups)
            lines.append(f"{user_tokens[name]},{name},{name}-uid" + (f',"{listed}"' if listed else ""))
        tokens = pki / "tokens.csv"
        tokens.write_text("\n".join(lines) + "\n")
        tokens.chmod(0o600)
        inner_url = f"https://{NODE_IP}:{API_PORT}"
        kubeconfigs = workdir / "kubeconfigs"
        kubeconfigs.mkdir()
        for name in ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns"):
            _kubeconfig(kubeconfigs / f"{name}.kubeconfig", inner_url, ca_pem, clients[name], name)

        # containerd needs its CNI config before it starts (its 1.6 watcher misses a file moved in later).
        cni = workdir / "cni"
        (cni / "net.d").mkdir(parents=True)
        (cni / "net.d" / "10-apprafter.conflist").write_text(json.dumps(_cni_config(cni / "ipam"), indent=1))
        ctrd = workdir / "containerd"
        ctrd.mkdir()
        store = ImageStore.open(ctrd / "root")
        (ctrd / "config.toml").write_text(_containerd_config(ctrd, store.root, workdir / "runc", cni / "net.d",
                                                             sandbox))
        containerd_proc = server("containerd", [containerd, "--config", ctrd / "config.toml"])
        server("etcd", [binaries["etcd"], "--name=node", f"--data-dir={workdir / 'etcd'}",
                        "--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
                        "--listen-peer-urls=http://127.0.0.1:2380",
                        "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                        "--initial-cluster=node=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level=warn"])
        agent = server("agent", [sys.executable, "-m", "tests.testbed.netns_agent", "inside",
                                 "--tunnel", workdir / "api.sock", "--target", f"{NODE_IP}:{API_PORT}",
                                 "--rpc", workdir / "rpc.sock"], {"PYTHONPATH": str(REPO)})
        apiserver = server("kube-apiserver", [
            binaries["kube-apiserver"], "--etcd-servers=http://127.0.0.1:2379",
            f"--bind-address={NODE_IP}", f"--advertise-address={NODE_IP}", f"--secure-port={API_PORT}",
            f"--cert-dir={pki}", f"--tls-cert-file={apiserver_cert.cert_path}",
            f"--tls-private-key-file={apiserver_cert.key_path}", f"--client-ca-file={apiserver_cert.ca_path}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            "--authorization-mode=Node,RBAC",
            # As a hardened cluster: who sets blockOwnerDeletion on a child needs `update` on the owner's finalizers.
            "--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement",
            f"--token-auth-file={tokens}",
            f"--kubelet-client-certificate={clients['apiserver-kubelet-client'].cert_path}",
            f"--kubelet-client-key={clients['apiserver-kubelet-client'].key_path}",
            f"--kubelet-certificate-authority={apiserver_cert.ca_path}",
            "--kubelet-preferred-address-types=InternalIP",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={sa_pub}", f"--service-account-signing-key-file={sa_key}",
            "--profiling=false", "--v=1"])
        wait_for("the agent in the namespace", lambda: True if (workdir / "rpc.sock").exists() else None, 30, agent)
        forwarder = ManagedProcess("forwarder", [sys.executable, "-m", "tests.testbed.netns_agent", "outside",
                                                 "--socket", workdir / "api.sock"],
                                   logs / "forwarder.log", env={**env, "PYTHONPATH": str(REPO)})
        procs.insert(0, forwarder)  # stopped last
        port = wait_for("the API forwarder on 127.0.0.1",
                        lambda: (m.group(1) if (m := re.search(r"listening on 127\.0\.0\.1:(\d+)",
                                                               forwarder.log_text())) else None), 30, forwarder)
        url = f"https://127.0.0.1:{port}"
        kubeconfig = _kubeconfig(workdir / "admin.kubeconfig", url, ca_pem, clients["admin"], ADMIN_USER)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            sandbox_import = pool.submit(_wait_and_import, containerd_proc, ctrd / "containerd.sock", sandbox)
            with httpx.Client(verify=ssl_context(apiserver_cert.ca_path), timeout=5,
                              headers={"Authorization": f"Bearer {token}"}) as probe:
                wait_for("kube-apiserver /readyz", lambda: probe.get(url + "/readyz").status_code == 200 or None,
                         timeout, apiserver, interval=0.2)
                api_ready = time.monotonic() - started
                # Cluster DNS first: its informers sync while the controllers and the kubelet start.
                node_dns.create(probe, url, NODE_IP)
                _create_storage_class(probe, url)
            (workdir / "Corefile").write_text(node_dns.corefile(NODE_IP, kubeconfigs / "coredns.kubeconfig"))
            server("coredns", [binaries["coredns"], "-conf", workdir / "Corefile"])
            common = [f"--authentication-kubeconfig={kubeconfigs / 'kube-controller-manager.kubeconfig'}",
                      f"--authorization-kubeconfig={kubeconfigs / 'kube-controller-manager.kubeconfig'}"]
            server("kube-controller-manager", [
                binaries["kube-controller-manager"],
                f"--kubeconfig={kubeconfigs / 'kube-controller-manager.kubeconfig'}", *common,
                "--use-service-account-credentials", f"--service-account-private-key-file={sa_key}",
                f"--root-ca-file={apiserver_cert.ca_path}", f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--cluster-cidr={POD_CIDR}", "--leader-elect=false", "--bind-address=127.0.0.1",
                # A real dynamic provisioner for one node (kubernetes.io/host-path, volumes under
                # /tmp/hostpath_pv/<uuid>, deleted with their PVC): STORAGE_CLASS, the default class.
                "--enable-hostpath-provisioner", "--v=1"])
            sched_kc = kubeconfigs / "kube-scheduler.kubeconfig"
            server("kube-scheduler", [binaries["kube-scheduler"], f"--kubeconfig={sched_kc}",
                                      f"--authentication-kubeconfig={sched_kc}",
                                      f"--authorization-kubeconfig={sched_kc}",
                                      "--leader-elect=false", "--bind-address=127.0.0.1", "--v=1"])
            sandbox_import.result()
            (workdir / "kubelet.yaml").write_text(yaml.safe_dump(
                _kubelet_config(workdir, ctrd / "containerd.sock", kubelet_serving, cgroup)))
            server("kubelet", [binaries["kubelet"], f"--config={workdir / 'kubelet.yaml'}",
                               f"--kubeconfig={kubeconfigs / 'kubelet.kubeconfig'}",
                               f"--root-dir={workdir / 'kubelet'}",
                               f"--node-ip={NODE_IP}", f"--hostname-override={NODE_NAME}", "--v=1"])
            (workdir / "kube-proxy.yaml").write_text(yaml.safe_dump(_kube_proxy_config(kubeconfigs)))
            server("kube-proxy", [binaries["kube-proxy"], f"--config={workdir / 'kube-proxy.yaml'}", "--v=1"])
        bed = NodeTestBed(url, token, apiserver_cert.ca_path, kubeconfig, procs, workdir=workdir, netns=netns,
                          record=record, recovered=recovered, ca=ca, store=store, sandbox=sandbox)
        bed.user_tokens = user_tokens
        bed.timings["api server ready"] = api_ready
        bed.volumes.start()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            crds_done = pool.submit(bed.install_crds, crds, timeout) if crds else None
            bed.wait_condition("v1", "Node", NODE_NAME, None, "Ready", timeout=timeout)
            bed.timings["node ready"] = time.monotonic() - started
            # kube-proxy's rules carry the `kubernetes` Service to the API server: what every pod uses.
            wait_for("the kubernetes Service through kube-proxy",
                     lambda: bed.request("GET", f"https://{KUBERNETES_SERVICE_IP}/readyz", ca=ca_pem,
                                         timeout=2).status_code == 200 or None,
                     timeout, next(p for p in procs if p.name == "kube-proxy"), interval=0.2)
            # And kube-dns through them to CoreDNS, answering from its synced informers: what every pod resolves with.
            wait_for("cluster DNS through the kube-dns Service", lambda: _dns_answers(bed), timeout,
                     next(p for p in procs if p.name == "coredns"), interval=0.1)
            bed.timings["dns ready"] = time.monotonic() - started
            bed.ensure_namespace("default")
            bed.wait("v1", "ConfigMap", "kube-root-ca.crt", "default", lambda o: True, timeout=timeout)
            if crds_done is not None:
                crds_done.result()
        bed.timings["ready"] = time.monotonic() - started
        return bed
    except BaseException as exc:
        tails = "\n".join(p.tail(10) for p in procs if p.name in COMPONENTS)
        if bed is not None:
            bed.stop()
        else:
            for proc in reversed(procs):
                proc.stop()
            hoststate.release(record)
            if store is not None:
                store.release(clean=False)
            if os.environ.get("APPRAFTER_KEEP_TESTBED") != "1":
                shutil.rmtree(workdir, ignore_errors=True)
        if isinstance(exc, BedError):
            raise BedError(f"{exc}\n{tails}") from exc
        raise


def _dns_answers(bed: NodeTestBed) -> bool | None:
    name = f"kubernetes.default.svc.{node_dns.CLUSTER_DOMAIN}"
    answer = node_dns.query(bed.netns_path, name, timeout=0.5)
    return True if answer is not None and answer.addresses == (KUBERNETES_SERVICE_IP,) else None


def _ctr(socket: Path, *args: str, check: bool = False, stdin: Any = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    argv = [system_tool("ctr", "run `make setup` (tools/setup-node.sh)"), "--address", str(socket),
            "--namespace", CONTAINERD_NAMESPACE, *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, stdin=stdin)
    if check and proc.returncode != 0:
        raise BedError(f"ctr {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def _import(socket: Path, ref: str, name: str, image_id: str) -> bool:
    """`podman save REF | ctr images import -` unless containerd has NAME labelled with podman's image ID;
    True when it imported."""
    if f"{IMAGE_ID_LABEL}={image_id}" in _ctr(socket, "images", "ls", f"name=={name}", check=True).stdout:
        return False
    save = subprocess.Popen(["podman", "save", ref], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_podman_env())
    imported = _ctr(socket, "images", "import", "-", stdin=save.stdout, timeout=600)
    assert save.stdout is not None
    save.stdout.close()
    save_err = save.communicate(timeout=600)[1].decode(errors="replace")
    if save.returncode != 0 or imported.returncode != 0:
        raise BedError(f"importing {ref} into containerd failed: podman save: {save_err[-1000:]}\n"
                       f"ctr import: {imported.stdout[-1000:]}{imported.stderr[-1000:]}")
    _ctr(socket, "images", "label", name, f"{IMAGE_ID_LABEL}={image_id}", check=True)
    return True


def _wait_and_import(containerd: ManagedProcess, socket: Path, image: str) -> None:
    """Wait for containerd's socket, then import the sandbox image."""
    wait_for("containerd's socket",
             lambda: True if socket.exists() and _ctr(socket, "version").returncode == 0 else None,
             60, containerd, interval=0.1)
    _import(socket, image, image, _podman_image_id(image))


def _cni_config(ipam_dir: Path) -> dict[str, Any]:
    """The pods' network: veths on the bridge the bed made (with its address already: isGateway false keeps
    the plugin from turning on forwarding), host-local addresses kept in the bed's directory."""
    return {"cniVersion": "1.0.0", "name": "apprafter-node", "plugins": [{
        "type": "bridge", "bridge": BRIDGE, "isGateway": False, "ipMasq": False, "hairpinMode": True,
        "ipam": {"type": "host-local", "dataDir": str(ipam_dir),
                 "ranges": [[{"subnet": POD_CIDR, "gateway": POD_GATEWAY}]],
                 "routes": [{"dst": "0.0.0.0/0", "gw": POD_GATEWAY}]}}]}


def _containerd_config(root: Path, images: Path, runc_root: Path, cni_conf: Path, sandbox: str) -> str:
    """containerd's own state and socket under the bed's directory, its root the image store; the settings
    facts-node.md explains."""
    return f"""version = 2
root = "{images}"
state = "{root / 'state'}"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{root / 'containerd.sock'}"

[ttrpc]
  address = "{root / 'containerd.ttrpc.sock'}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{root / 'opt'}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{root / 'certs.d'}"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{runc_root}"
        SystemdCgroup = false
"""


def _kubelet_config(workdir: Path, containerd_socket: Path, serving: ServingCert, cgroup: str) -> dict[str, Any]:
    """KubeletConfiguration: webhook authn/authz, cgroupfs under the bed's own cgroup root, no host iptables
    chains, no swap or cgroup v1 refusal, no eviction or image GC on a shared disk, every path in the bed."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": NODE_IP, "port": 10250, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1",
        "tlsCertFile": str(serving.cert_path), "tlsPrivateKeyFile": str(serving.key_path),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(serving.ca_path)}},
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{containerd_socket}",
        "cgroupDriver": "cgroupfs", "cgroupRoot": f"/{cgroup}",
        "failSwapOn": False, "failCgroupV1": False,
        "maxOpenFiles": min(1_000_000, _hard_nofile()),
        "makeIPTablesUtilChains": False,
        # Pods resolve through kube-dns (tests/testbed/node_dns.py); no host resolv.conf to inherit search domains
        # or nameservers from (the namespace has no way out).
        "clusterDNS": [node_dns.DNS_SERVICE_IP], "clusterDomain": node_dns.CLUSTER_DOMAIN, "resolvConf": "",
        "podLogsDir": str(workdir / "pod-logs"),
        "volumePluginDir": str(workdir / "volume-plugins"),
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "registerNode": True, "rotateCertificates": False, "serverTLSBootstrap": False,
        "shutdownGracePeriod": "0s", "nodeStatusReportFrequency": "10s",
    }


def _kube_proxy_config(kubeconfigs: Path) -> dict[str, Any]:
    """kube-proxy in iptables mode inside the namespace; it leaves the host-wide conntrack settings alone."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfigs / "kube-proxy.kubeconfig")},
        "mode": "iptables", "hostnameOverride": NODE_NAME, "bindAddress": NODE_IP, "clusterCIDR": POD_CIDR,
        "healthzBindAddress": "127.0.0.1:10256", "metricsBindAddress": "127.0.0.1:10249",
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "iptables": {"localhostNodePorts": False},
    }


def _hard_nofile() -> int:
    import resource

    return int(resource.getrlimit(resource.RLIMIT_NOFILE)[1])

