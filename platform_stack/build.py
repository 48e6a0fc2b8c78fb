"""`stack build`: CUE source -> chart directory + reproducible .tgz, reporting the path and sha256."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from platform_stack.chart import Chart, latest_version, render_chart
from platform_stack.errors import StackError
from platform_stack.governance import resource_gaps
from platform_stack.source import ALL, SOURCE_DIR, evaluate
from platform_stack.tarball import source_date_epoch, tar_bytes, write_atomic


@dataclass(frozen=True)
class BuildResult:
    """Where the build went and what it is."""

    chart: Chart
    tgz: Path
    chart_dir: Path
    sha256: str
    mtime: int


def build_chart(source: Path = SOURCE_DIR, tier: str = ALL, version: str | None = None) -> tuple[Chart, int]:
    """Evaluate the source and render the chart in memory (no files written)."""
    evaluated = evaluate(source, tier)
    gaps = resource_gaps(evaluated)
    if gaps:  # spec §4.5: no platform pod runs BestEffort
        raise StackError(*(f"{source / 'components' / (name + '.cue')}:1:1: {gap}" for name, gap in gaps))
    chosen = version or latest_version(evaluated["compatibility"], source)
    chart = render_chart(evaluated, chosen, tier, source=source)
    return chart, source_date_epoch(source)


def build(out: Path, source: Path = SOURCE_DIR, tier: str = ALL, version: str | None = None) -> BuildResult:
    """Build and write `<out>/<name>/` and `<out>/<name>-<version>.tgz`."""
    chart, mtime = build_chart(source, tier, version)
    data = tar_bytes(chart, mtime)
    tgz = out / f"{chart.name}-{chart.version}.tgz"
    write_atomic(tgz, data)
    chart_dir = out / chart.name
    staging = Path(tempfile.mkdtemp(prefix=f".{chart.name}.", dir=out))
    for rel, content in chart.files.items():
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    if chart_dir.exists():
        shutil.rmtree(chart_dir)
    staging.rename(chart_dir)
    return BuildResult(chart=chart, tgz=tgz, chart_dir=chart_dir, sha256=hashlib.sha256(data).hexdigest(),
                       mtime=mtime)
