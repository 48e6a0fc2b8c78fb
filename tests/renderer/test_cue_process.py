"""What the cue process gets (renderer.cue starts it without subprocess): its data limit (soft and hard), stdin at
EOF, stdout and stderr read in full, no other open descriptor of ours, default SIGPIPE and SIGXFSZ, the given cwd,
the scrubbed environment; a binary that cannot run is a one-line ToolFailure."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from renderer.cue import run_cue
from renderer.errors import ToolFailure
from toolchain.pins import pins

# Stands in for cue only to report what it was given (`cue version` answers as the pin, so resolve accepts it).
PROBE = """#!/bin/sh
if [ "$1" = version ]; then echo "cue version {pin}"; exit 0; fi
echo "data $(ulimit -S -d) $(ulimit -H -d)"
echo "cwd $(pwd)"
echo "fds $(ls /proc/$$/fd | sort -n | tr '\\n' ' ')"
grep -E '^SigIgn' /proc/$$/status
echo "stdin $(cat | wc -c)"
echo "env $(env | cut -d= -f1 | sort | tr '\\n' ' ')"
echo "to stderr" >&2
exit 1
"""


def test_cue_runs_bounded_alone_and_where_it_is_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = tmp_path / "cue"
    probe.write_text(PROBE.format(pin=pins()["CUE_VERSION"]))
    probe.chmod(0o755)
    monkeypatch.setenv("APPRAFTER_CUE", str(probe))
    monkeypatch.setenv("ARGOCD_AUTH_TOKEN", "not for cue")
    work = tmp_path / "work"
    work.mkdir()
    opened = os.open(os.devnull, os.O_RDONLY)
    leaked = os.dup2(opened, 150)  # inheritable: a descriptor someone let through, which cue must not get
    try:
        result = run_cue(["export"], work, memory_mb=64)
    finally:
        os.close(leaked)
        os.close(opened)
    said = dict(line.split(" ", 1) if " " in line else line.split("\t", 1)
                for line in result.stdout.replace("SigIgn:\t", "SigIgn ").splitlines())
    assert result.returncode == 1 and result.stderr == "to stderr\n"
    assert said["data"] == "65536 65536"  # KiB: 64 MiB, soft and hard
    assert said["cwd"] == str(work)
    assert {"0", "1", "2"} <= set(said["fds"].split()) and "150" not in said["fds"].split()  # the rest: the shell's
    # every signal Python can name back to its default (glibc's own, 32 and 33, are the C library's: an ignored one
    # is inherited from whatever started the test, as subprocess passed it on too)
    valid = sum(1 << (int(number) - 1) for number in signal.valid_signals())
    assert int(said["SigIgn"], 16) & valid == 0
    assert said["stdin"] == "0"
    assert "ARGOCD_AUTH_TOKEN" not in said["env"].split() and "CUE_REGISTRY" in said["env"].split()


def test_a_cue_that_cannot_run_is_a_tool_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = tmp_path / "cue"
    probe.write_text(PROBE.format(pin=pins()["CUE_VERSION"]))
    probe.chmod(0o755)
    monkeypatch.setenv("APPRAFTER_CUE", str(probe))
    with pytest.raises(ToolFailure, match=r"^cannot run cue at .*: No such file or directory: "):
        run_cue(["export"], tmp_path / "gone")
