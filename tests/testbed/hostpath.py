"""Writable volumes from the node's host-path provisioner: kube-controller-manager's built-in one
(`--enable-hostpath-provisioner`, the bed's default StorageClass `hostpath`: tests/testbed/node.py) makes each
volume a directory `/tmp/hostpath_pv/<uuid>` (fixed in Kubernetes' source) root-owned with mode 0750, which a pod
running as another user (PostgreSQL as uid 26) cannot write, and fsGroup does not change for host-path volumes. The
bed's watcher opens each new volume's directory to every user (0777, as Rancher's local-path-provisioner's helper
pod makes its directories) as soon as its PersistentVolume appears. The bed removes the directories (node.py)."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.testbed.kube import ssl_context

ROOT = Path("/tmp/hostpath_pv")  # the provisioner's own base path (k8s.io/kubernetes pkg/volume/hostpath)


class VolumeWatcher:
    """Watches PersistentVolumes; each host-path one under ROOT is opened to every user."""

    def __init__(self, url: str, token: str, ca_path: Path) -> None:
        self.http = httpx.Client(base_url=url, verify=ssl_context(ca_path), timeout=httpx.Timeout(30, read=None),
                                 headers={"Authorization": f"Bearer {token}"})
        self.stopping = threading.Event()
        self.opened: set[str] = set()
        self.thread = threading.Thread(target=self._run, name="hostpath-volumes", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.http.close()  # ends the watch's blocking read

    def _run(self) -> None:
        version = ""
        while not self.stopping.is_set():
            try:
                if not version:
                    listed = self.http.get("/api/v1/persistentvolumes").json()
                    for volume in listed.get("items", []):
                        self._open(volume)
                    version = listed["metadata"]["resourceVersion"]
                params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true"}
                with self.http.stream("GET", "/api/v1/persistentvolumes", params=params) as stream:
                    for line in stream.iter_lines():
                        event = json.loads(line) if line else None
                        if not event:
                            continue
                        if event["type"] == "ERROR":  # 410 Gone: list again
                            version = ""
                            break
                        version = event["object"]["metadata"]["resourceVersion"]
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._open(event["object"])
            except (httpx.HTTPError, RuntimeError, KeyError, ValueError):
                if self.stopping.wait(0.5):  # a closed client at stop, or the API server restarting
                    return

    def _open(self, volume: dict[str, Any]) -> None:
        path = Path(((volume.get("spec") or {}).get("hostPath") or {}).get("path") or "/")
        if path.parent != ROOT or str(path) in self.opened:
            return
        with contextlib.suppress(FileNotFoundError):  # the provisioner makes it before it creates the PV
            path.chmod(0o777)
            self.opened.add(str(path))
