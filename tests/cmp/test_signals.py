"""Argo CD's deadline: SIGTERM to the plugin's process group stops the cue child too (nothing left running)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.renderer.helpers import MINIMAL, RUNAWAY, write_app


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def test_sigterm_to_the_group_stops_cue(tmp_path: Path) -> None:
    write_app(tmp_path, 'import "list"\n\n' + MINIMAL + RUNAWAY)
    env = {**os.environ, "ARGOCD_APP_NAME": "demo-dev", "APPRAFTER_CUE_TIMEOUT": "120",
           "APPRAFTER_CUE_MEMORY_MB": "8192"}
    # Argo CD starts plugin commands in their own process group and signals the group on its deadline.
    proc = subprocess.Popen([sys.executable, "-m", "apprafter", "cmp", "generate"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 30
    while len(group_members(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(group_members(proc.pid)) >= 2, "cue never started"
    os.killpg(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode != 0 and out == b""
    deadline = time.monotonic() + 10
    while group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_members(proc.pid) == []
