"""What a node bed changes on the host and how it is put back, also after a run that died.

kubelet rewrites host-wide sysctls, and containerd's shims and the pods' processes outlive a killed pytest. A
state file (/run/apprafter-node/state.json; /run is cleared by a reboot, as are sysctls, mounts and processes)
records the sysctls as they were before the first live bed and every bed's traces: its directory, network
namespace and cgroup. A bed claims an entry before it starts and releases it after it stopped; a claim first
sweeps the entries of beds whose owner died, and the last bed out puts the sysctls back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.testbed import hostpath

STATE_DIR = Path(os.environ.get("APPRAFTER_NODE_STATE_DIR", "/run/apprafter-node"))
# What kubelet sets at start (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables), no flag avoids it.
KUBELET_SYSCTLS = ("vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
                   "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes")
# kubelet creates this directory (hard-coded) and links each container's log into it.
CONTAINER_LOG_LINKS = Path("/var/log/containers")
# containerd 1.6's shims put their sockets here whatever containerd's own state directory is.
SHIM_SOCKETS = Path("/run/containerd/s")
# `ip netns add` makes this directory a bind mount of itself the first time any namespace is added on a host (so that
# namespaces can be mounted under it), and never undoes it.
NETNS_DIR = Path("/run/netns")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# kube-controller-manager's hostpath provisioner (--enable-hostpath-provisioner) makes every volume under this
# hard-coded directory, whichever bed asked: a bed removes its own volumes as it stops; what a dead bed left is
# removed once no bed runs (entries made since the first bed came).
HOSTPATH_VOLUMES = hostpath.ROOT


def sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls(names: tuple[str, ...] = KUBELET_SYSCTLS) -> dict[str, str]:
    return {name: sysctl_path(name).read_text().strip() for name in names}


def write_sysctls(values: dict[str, str]) -> list[str]:
    """Write each sysctl that differs; returns `name: old -> new` for each one written."""
    changed = []
    for name, value in values.items():
        current = sysctl_path(name).read_text().strip()
        if current != value:
            sysctl_path(name).write_text(value + "\n")
            changed.append(f"{name}: {current} -> {value}")
    return changed


@dataclasses.dataclass(frozen=True)
class BedRecord:
    """One bed's traces on the host: its owner process, its directory, network namespace and cgroup name."""

    pid: int
    started: str  # the owner's start time (/proc/PID/stat), so a reused pid is not taken for the owner
    dir: str
    netns: str
    cgroup: str

    @staticmethod
    def mine(directory: Path, netns: str, cgroup: str) -> BedRecord:
        return BedRecord(os.getpid(), process_start(os.getpid()) or "", str(directory), netns, cgroup)

    def alive(self) -> bool:
        return process_start(self.pid) == self.started


def process_start(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]  # field 22, starttime


@contextlib.contextmanager
def _locked_state() -> Iterator[dict[str, Any]]:
    """The state file's content, read and written back under an exclusive lock."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    path = STATE_DIR / "state.json"
    with open(STATE_DIR / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        yield state
        if state.get("beds") or state.get("sysctls") or state.get("mounted"):
            path.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
        else:
            path.unlink(missing_ok=True)


def claim(record: BedRecord) -> list[str]:
    """Register a bed about to start; first undo what dead beds left. Returns what was undone, one line each."""
    with _locked_state() as state:
        undone = _undo_dead(state)
        if not state.get("beds"):  # the host is as it was before the first bed: remember it so
            state["sysctls"] = read_sysctls()
            state["created"] = [str(p) for p in (CONTAINER_LOG_LINKS, SHIM_SOCKETS.parent, NETNS_DIR,
                                                 HOSTPATH_VOLUMES) if not p.exists()]
            state["since"] = time.time()
            state["mounted"] = [] if _mount_point(NETNS_DIR) else [str(NETNS_DIR)]
        state["beds"] = [*state.get("beds", []), dataclasses.asdict(record)]
    return undone


def recover() -> list[str]:
    """Undo what beds whose owner died left on the host (a crashed or killed run), registering nothing.
    Returns what was undone, one line each."""
    with _locked_state() as state:
        return _undo_dead(state)


def _undo_dead(state: dict[str, Any]) -> list[str]:
    """Sweep the dead beds out of `state`; with no live bed left, restore the host it recorded and clear it."""
    undone: list[str] = []
    beds = [BedRecord(**b) for b in state.get("beds", [])]
    for dead in [b for b in beds if not b.alive()]:
        undone += [f"bed {dead.dir} (pid {dead.pid} died): {line}" for line in sweep(dead)]
        beds.remove(dead)
        if os.environ.get("APPRAFTER_KEEP_TESTBED") != "1":
            shutil.rmtree(dead.dir, ignore_errors=True)
    if beds:
        state["beds"] = [dataclasses.asdict(b) for b in beds]
        return undone
    if state.get("sysctls"):
        undone += [f"sysctl {line}" for line in write_sysctls(state["sysctls"])]
    undone += _remove_created(state)
    state.clear()
    return undone


def release(record: BedRecord) -> list[str]:
    """Sweep a stopped bed's traces and forget it; the last bed out restores the sysctls. Returns what was undone."""
    undone = sweep(record)
    with _locked_state() as state:
        beds = [BedRecord(**b) for b in state.get("beds", []) if BedRecord(**b) != record]
        if not [b for b in beds if b.alive()]:
            for dead in beds:
                undone += sweep(dead)
            undone += [f"sysctl {line}" for line in write_sysctls(state.get("sysctls", {}))]
            undone += _remove_created(state)
            state.clear()
        else:
            state["beds"] = [dataclasses.asdict(b) for b in beds]
    return undone


def live_beds() -> list[BedRecord]:
    """Beds whose owner still runs, as the state file lists them."""
    path = STATE_DIR / "state.json"
    if not path.exists():
        return []
    return [b for b in (BedRecord(**d) for d in json.loads(path.read_text()).get("beds", [])) if b.alive()]


def _remove_created(state: dict[str, Any]) -> list[str]:
    """What the beds created on the host, if no longer in use: `ip netns`'s bind mount of /run/netns (no namespace
    left under it), kubelet's log links and the shims' socket directory (empty)."""
    undone = []
    since = state.get("since")
    if isinstance(since, (int, float)) and HOSTPATH_VOLUMES.is_dir():
        for volume in HOSTPATH_VOLUMES.iterdir():
            with contextlib.suppress(OSError):
                if volume.lstat().st_ctime >= since - 1:
                    shutil.rmtree(volume, ignore_errors=True)
                    undone.append(f"removed hostpath volume {volume}")
    for mounted in state.get("mounted", []):
        with contextlib.suppress(OSError):
            if _mount_point(Path(mounted)) and not os.listdir(mounted) and subprocess.run(
                    ["umount", mounted], capture_output=True, check=False).returncode == 0:
                undone.append(f"unmounted {mounted}")
    for created in state.get("created", []):
        path = Path(created)
        for directory in ([path / "s", path] if path == SHIM_SOCKETS.parent else [path]):
            with contextlib.suppress(OSError):
                directory.rmdir()
                undone.append(f"removed {directory}")
    return undone


# --- the sweep -----------------------------------------------------------------------------------------


def sweep(record: BedRecord) -> list[str]:
    """Remove every trace of a bed whose servers are stopped or dead: its pods' and shims' processes, its
    mounts, its cgroups, its network namespace, its shims' sockets and log links. Idempotent."""
    undone = []
    killed = _kill_processes(record)
    if killed:
        undone.append(f"killed {killed} process(es)")
    for mount in _mounts_under(Path(record.dir)):
        if subprocess.run(["umount", mount], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "--lazy", mount], capture_output=True, check=False)
        undone.append(f"unmounted {mount}")
    netns = Path("/run/netns") / record.netns
    if netns.exists():
        subprocess.run(["ip", "netns", "delete", record.netns], capture_output=True, check=False)
        undone.append(f"deleted network namespace {record.netns}")
    undone += [f"removed cgroup {d}" for d in _remove_cgroups(record.cgroup)]
    undone += [f"removed dead shim socket {s}" for s in _remove_dead_sockets()]
    if CONTAINER_LOG_LINKS.is_dir():
        for link in CONTAINER_LOG_LINKS.iterdir():
            if link.is_symlink() and os.readlink(link).startswith(record.dir + "/"):
                link.unlink()
                undone.append(f"removed {link}")
    undone += hostpath.sweep(Path(record.dir))  # after the pods using them are killed and unmounted
    return undone


def _bed_processes(record: BedRecord) -> list[int]:
    """Processes of the bed: in its cgroup (pods), in its network namespace, or naming its directory (shims)."""
    netns_id = _inode(Path("/run/netns") / record.netns)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            in_netns = netns_id is not None and _inode(entry / "ns" / "net") == netns_id
        except OSError:
            continue
        if f":/{record.cgroup}/" in cgroups or f":/{record.cgroup}\n" in cgroups or in_netns \
                or record.dir + "/" in cmdline:
            found.append(int(entry.name))
    return found


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _kill_processes(record: BedRecord, timeout: float = 20.0) -> int:
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while (pids := _bed_processes(record)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.05)
    return len(killed)


def _mount_point(path: Path) -> bool:
    """Whether `path` is a mount point (os.path.ismount misses a bind mount of a directory onto itself, which is
    what `ip netns` makes of /run/netns on the same filesystem)."""
    return str(path) in _mounts_under(path)


def _mounts_under(directory: Path) -> list[str]:
    """Mount points at or below `directory`, deepest first (mountinfo escapes spaces as \\040)."""
    prefix = str(directory)
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return sorted(set(points), key=lambda p: (-p.count("/"), p))


def _remove_cgroups(name: str) -> list[str]:
    removed = []
    for hierarchy in sorted(CGROUP_ROOT.iterdir()) if CGROUP_ROOT.is_dir() else []:
        top = hierarchy / name
        if not top.is_dir():
            continue
        for directory in sorted((d for d in top.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
            with contextlib.suppress(OSError):
                directory.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()
            removed.append(str(top))
    return removed


def _remove_dead_sockets() -> list[str]:
    """Shim sockets nobody listens on any more (a killed shim leaves its socket behind)."""
    removed = []
    for path in sorted(SHIM_SOCKETS.iterdir()) if SHIM_SOCKETS.is_dir() else []:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(path))
                continue
            except ConnectionRefusedError:
                pass
            except OSError:
                continue
        path.unlink(missing_ok=True)
        removed.append(str(path))
    return removed


# --- what tests compare --------------------------------------------------------------------------------


def snapshot() -> dict[str, Any]:
    """What a bed may change on the host, for a before/after comparison: sysctls (kubelet's and forwarding),
    network namespaces, mount points, iptables rules, interfaces, top-level cgroups and the paths kubelet and
    the shims write to."""
    names = (*KUBELET_SYSCTLS, "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding",
             "net.bridge.bridge-nf-call-iptables")
    rules = {}
    for save in ("iptables-save", "ip6tables-save"):
        out = subprocess.run([save], capture_output=True, text=True, check=True).stdout
        rules[save] = [line for line in out.splitlines() if not line.startswith("#")]
    return {
        "sysctls": read_sysctls(names),
        "netns": sorted(p.name for p in Path("/run/netns").iterdir()) if Path("/run/netns").is_dir() else [],
        # podman's and buildah's own mounts come and go with whatever else builds images on this machine.
        "mounts": sorted(point for line in Path("/proc/self/mountinfo").read_text().splitlines()
                         if not (point := line.split()[4]).startswith(("/var/lib/containers/", "/run/containers/"))),
        "iptables": rules,
        "links": subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                                check=True).stdout.count("\n"),
        "cgroups": sorted(str(d.relative_to(CGROUP_ROOT)) for h in CGROUP_ROOT.iterdir() if h.is_dir()
                          for d in h.iterdir() if d.is_dir()),
        "paths": {str(p): sorted(os.listdir(p)) if p.is_dir() else None
                  for p in (CONTAINER_LOG_LINKS, SHIM_SOCKETS, HOSTPATH_VOLUMES)},
    }
