"""Dynamic volumes on the node tier: kube-controller-manager's built-in host-path provisioner
(`--enable-hostpath-provisioner`, provisioner `kubernetes.io/host-path`), which makes each volume a directory
`/tmp/hostpath_pv/<uuid>` (a path fixed in Kubernetes' source), root-owned with mode 0750. A pod running as
another user (PostgreSQL as uid 26) could not write it, so the bed's watcher opens each new volume's directory
to every user (0777, as Rancher's local-path-provisioner's helper pod makes its directories) and writes its path
into the bed's directory, from where `sweep` removes it when the bed stops, or at the next start after a crash."""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.testbed.kube import ssl_context

PROVISIONER = "kubernetes.io/host-path"
ROOT = Path("/tmp/hostpath_pv")  # the provisioner's own base path (k8s.io/kubernetes pkg/volume/hostpath)
RECORD = "hostpath-volumes"  # in the bed's directory: one volume directory a line


class VolumeWatcher:
    """Watches PersistentVolumes; each host-path one the provisioner made is recorded and opened to every user."""

    def __init__(self, url: str, token: str, ca_path: Path, bed_dir: Path) -> None:
        self.record = bed_dir / RECORD
        self.http = httpx.Client(base_url=url, verify=ssl_context(ca_path), timeout=httpx.Timeout(30, read=None),
                                 headers={"Authorization": f"Bearer {token}"})
        self.stopping = threading.Event()
        self.seen: set[str] = set()
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
                        self._adopt(volume)
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
                            self._adopt(event["object"])
            except (httpx.HTTPError, RuntimeError, KeyError, ValueError):
                if self.stopping.wait(0.5):  # a closed client at stop, or the API server restarting
                    return

    def _adopt(self, volume: dict[str, Any]) -> None:
        path = Path(((volume.get("spec") or {}).get("hostPath") or {}).get("path") or "/")
        if path.parent != ROOT or str(path) in self.seen:
            return
        self.seen.add(str(path))
        with self.record.open("a") as out:  # first, so that a crash right after still finds it
            out.write(f"{path}\n")
        with contextlib.suppress(FileNotFoundError):  # the provisioner makes it before it creates the PV
            path.chmod(0o777)


def sweep(bed_dir: Path) -> list[str]:
    """Remove the volume directories a bed recorded (its PersistentVolumes are gone with its etcd)."""
    record = bed_dir / RECORD
    if not record.exists():
        return []
    removed = []
    for line in record.read_text().splitlines():
        path = Path(line.strip())
        if path.parent == ROOT and path.exists():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(f"removed volume {path}")
    record.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        ROOT.rmdir()  # only when no other bed's volume is left in it
    return removed
