"""Where `go install` puts a binary (GOBIN, else the first GOPATH's bin/), and the line that says it is off PATH.

`go install cuelang.org/go/cmd/cue@...` leaves cue in `$(go env GOPATH)/bin`, which a fresh Go install does not put
on PATH: the commonest reason cue is "not found" right after installing it. Asked only when a tool is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["go_bin", "off_path"]

GO_TIMEOUT = 20


def go_bin(environ: dict[str, str] | None = None) -> Path | None:
    """The directory `go install` writes to: `go env GOBIN GOPATH` when go is on PATH, else the variables and Go's
    default ($HOME/go/bin); None when no directory can be named."""
    env = dict(os.environ) if environ is None else environ
    gobin, gopath = env.get("GOBIN", ""), env.get("GOPATH", "")
    go = shutil.which("go", path=env.get("PATH"))
    if go:
        try:
            out = subprocess.run([go, "env", "GOBIN", "GOPATH"], capture_output=True, text=True, timeout=GO_TIMEOUT,
                                 check=False, env=env, stdin=subprocess.DEVNULL)
            if out.returncode == 0:
                gobin, gopath = ([*out.stdout.splitlines(), "", ""])[:2]
        except (OSError, subprocess.TimeoutExpired):
            pass
    if gobin:
        return Path(gobin)
    first = gopath.split(os.pathsep)[0] if gopath else ""
    if first:
        return Path(first) / "bin"
    home = env.get("HOME")
    return Path(home) / "go" / "bin" if home else None


def off_path(name: str, environ: dict[str, str] | None = None) -> Path | None:
    """The binary `name` that `go install` left in a directory not on PATH; None when there is none (or it is on
    PATH after all)."""
    env = dict(os.environ) if environ is None else environ
    where = go_bin(env)
    if where is None or not (where / name).is_file():
        return None
    on_path = {os.path.realpath(p) for p in env.get("PATH", "").split(os.pathsep) if p}
    return None if os.path.realpath(where) in on_path else where / name
