"""Writes a chart as a byte-reproducible .tgz: sorted USTAR entries, fixed mtime, root-owned, gzip mtime 0."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import tarfile
from pathlib import Path

from platform_stack.chart import Chart

# Used when neither SOURCE_DATE_EPOCH nor a git commit time is available: 2020-01-01T00:00:00Z.
FALLBACK_EPOCH = 1577836800


def source_date_epoch(source: Path) -> int:
    """SOURCE_DATE_EPOCH, else the commit time of HEAD of the source's git checkout, else FALLBACK_EPOCH."""
    env = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if env.isdigit():
        return int(env)
    try:
        proc = subprocess.run(["git", "-C", str(source), "log", "-1", "--format=%ct"], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return FALLBACK_EPOCH
    out = proc.stdout.strip()
    return int(out) if proc.returncode == 0 and out.isdigit() else FALLBACK_EPOCH


def tar_bytes(chart: Chart, mtime: int) -> bytes:
    """The gzip-compressed tar of `chart`, every entry under `<name>/`."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for rel in sorted(chart.files):
            data = chart.files[rel]
            info = tarfile.TarInfo(f"{chart.name}/{rel}")
            info.size = len(data)
            info.mtime = mtime
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.type = tarfile.REGTYPE
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temp file + fsync + rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
