"""Writes a chart as a byte-reproducible .tgz (sorted USTAR entries, fixed mtime, root-owned, gzip mtime 0), and
reads files back out of a chart .tgz within Helm's limits."""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import subprocess
import tarfile
import zlib
from pathlib import Path

from platform_stack.chart import Chart
from platform_stack.errors import StackError
from renderer import userfile

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


# What a chart archive may cost to read: Helm's own limits per file and in all (pkg/chart/loader), fewer entries.
MAX_ENTRY_BYTES = 5 << 20
MAX_TOTAL_BYTES = 100 << 20
MAX_ENTRIES = 10_000
MAX_ARCHIVE_BYTES = 20 << 20


@dataclasses.dataclass(frozen=True)
class ChartFiles:
    """What was read out of a chart .tgz: its top directory, the files asked for, the newest entry mtime."""

    top: str
    files: dict[str, bytes]
    mtime: int


def read_chart_files(path: Path, wanted: tuple[str, ...]) -> ChartFiles:
    """The `wanted` files (paths inside the chart's directory) of a chart .tgz, read as a stream with Helm's
    limits: an archive that inflates past them is refused before it is read whole."""
    where = f"{path}:1:1: chart"
    data = userfile.read_bytes(path, max_bytes=MAX_ARCHIVE_BYTES, what="the chart archive")  # never a FIFO
    try:
        found: dict[str, bytes] = {}
        tops: set[str] = set()
        total = mtime = 0
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz") as tar:
            for count, member in enumerate(tar, start=1):
                total += member.size
                if count > MAX_ENTRIES or member.size > MAX_ENTRY_BYTES or total > MAX_TOTAL_BYTES:
                    raise StackError(f"{where}: inflates past Helm's limits ({MAX_ENTRY_BYTES} bytes a file, "
                                     f"{MAX_TOTAL_BYTES} in all, {MAX_ENTRIES} entries): refused")
                top, _, rel = member.name.partition("/")
                tops.add(top)
                mtime = max(mtime, int(member.mtime))
                if rel in wanted and member.isreg():
                    handle = tar.extractfile(member)
                    if handle is not None:
                        found[rel] = handle.read()
    except (OSError, EOFError, tarfile.TarError, zlib.error) as exc:
        raise StackError(f"{where}: not a readable chart archive ({type(exc).__name__})") from None
    if len(tops) != 1:
        raise StackError(f"{where}: expected every entry under one <chart>/ directory")
    return ChartFiles(tops.pop(), found, mtime)
