"""Package a chart directory as a byte-reproducible .tgz (the platform stack's tarball writer), for `make publish`.

    scripts/package_chart.py CHART_DIR OUT_DIR   ->  prints OUT_DIR/<name>-<version>.tgz

`helm package` stamps the current time into every entry; this writes sorted entries with SOURCE_DATE_EPOCH (else
the last commit's time) as their mtime, so the same chart gives the same bytes and the same OCI digest. Every
file of the directory is packaged (the chart has no .helmignore).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from platform_stack.chart import Chart
from platform_stack.tarball import source_date_epoch, tar_bytes, write_atomic


def package(directory: Path, out: Path) -> Path:
    files: dict[str, bytes] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise SystemExit(f"package_chart: {path}: only regular files and directories are packaged")
        if path.is_file():
            files[path.relative_to(directory).as_posix()] = path.read_bytes()
    meta = yaml.safe_load(files["Chart.yaml"])
    chart = Chart(str(meta["name"]), str(meta["version"]), files)
    target = out / f"{chart.name}-{chart.version}.tgz"
    write_atomic(target, tar_bytes(chart, source_date_epoch(directory)))
    return target


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: scripts/package_chart.py CHART_DIR OUT_DIR")
    print(package(Path(sys.argv[1]), Path(sys.argv[2])))
