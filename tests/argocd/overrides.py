"""Argo CD's own Lua runner for our resource customizations: `argocd admin settings resource-overrides`
(health, list-actions, run-action) with `--argocd-cm-path` on deploy/argocd/argocd-cm-patch.yaml, run by every
supported Argo CD version: each answer is the one all of them give (a version that answers otherwise fails the
test, naming both)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.testbed.argocd import ARGOCD_VERSIONS
from tests.testbed.procs import tool

REPO = Path(__file__).resolve().parents[2]
ARGOCD_CM = REPO / "deploy" / "argocd" / "argocd-cm-patch.yaml"
CAPTURE_DIFF = Path(__file__).with_name("capture_diff.py")


@dataclasses.dataclass(frozen=True)
class Health:
    status: str
    message: str


class ActionFailed(RuntimeError):
    """Argo CD refused to run the action; the message is Argo CD's (the Lua error included)."""


T = TypeVar("T")


def agreed(answer: Callable[[str], T]) -> T:
    """answer(version) for every supported Argo CD version, which must all be the same; that answer."""
    answers = {version: _outcome(answer, version) for version in ARGOCD_VERSIONS}
    first, *others = answers.items()
    for version, got in others:
        if got != first[1]:
            raise AssertionError(f"Argo CD {first[0]} answers {first[1]!r}, {version} answers {got!r}")
    result, refusal = first[1]
    if refusal is not None:
        raise ActionFailed(refusal)
    return result  # type: ignore[return-value]


def _outcome(answer: Callable[[str], T], version: str) -> tuple[T | None, str | None]:
    """(result, None), or (None, Argo CD's words) when it refused the action: what `agreed` compares."""
    try:
        return answer(version), None
    except ActionFailed as refused:
        return None, str(refused)


def _run(obj: Mapping[str, Any], version: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="argocd-overrides-") as tmp:
        path = Path(tmp) / "object.yaml"
        path.write_text(yaml.safe_dump(dict(obj), sort_keys=False))
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp,
               # The "diff" Argo CD runs after an action: hand both sides to us as JSON.
               "KUBECTL_EXTERNAL_DIFF": f"{sys.executable} {CAPTURE_DIFF}"}
        argv = [str(tool("argocd", version)), "admin", "settings", "resource-overrides", args[0], str(path), *args[1:],
                "--argocd-cm-path", str(ARGOCD_CM)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)


def _fatal(proc: subprocess.CompletedProcess[str]) -> str:
    """The message of Argo CD's fatal log line (its CLI reports errors that way), else the raw stderr."""
    for line in reversed(proc.stderr.splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("level") == "fatal":
            return str(entry.get("msg", ""))
    return proc.stderr.strip()


def health(obj: Mapping[str, Any]) -> Health:
    """The health Argo CD computes for `obj` with our health Lua."""
    return agreed(lambda version: _health(obj, version))


def _health(obj: Mapping[str, Any], version: str) -> Health:
    proc = _run(obj, version, "health")
    if proc.returncode != 0:
        raise AssertionError(f"argocd {version} health failed (exit {proc.returncode}): {_fatal(proc)}")
    fields = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    if "STATUS" not in fields:
        raise AssertionError(f"argocd {version} printed no health: {proc.stdout!r}")
    return Health(fields["STATUS"], fields.get("MESSAGE", ""))


def actions(obj: Mapping[str, Any]) -> dict[str, bool]:
    """The actions our discovery Lua offers for `obj`: name -> disabled."""
    return agreed(lambda version: _actions(obj, version))


def _actions(obj: Mapping[str, Any], version: str) -> dict[str, bool]:
    proc = _run(obj, version, "list-actions")
    if proc.returncode != 0:
        raise AssertionError(f"argocd {version} list-actions failed (exit {proc.returncode}): {_fatal(proc)}")
    rows = [line.split() for line in proc.stdout.splitlines()[1:] if line.strip()]
    return {name: disabled == "true" for name, disabled in rows}


def run_action(obj: Mapping[str, Any], action: str) -> dict[str, Any]:
    """The object our action Lua returns for `obj` (what argocd-server turns into a merge patch)."""
    return agreed(lambda version: _run_action(obj, action, version))


def _run_action(obj: Mapping[str, Any], action: str, version: str) -> dict[str, Any]:
    proc = _run(obj, version, "run-action", action)
    if proc.returncode != 0:
        raise ActionFailed(_fatal(proc))
    captured = json.loads(proc.stdout.strip().splitlines()[-1])
    if captured["live"] != json.loads(json.dumps(dict(obj))):
        raise AssertionError(f"Argo CD {version}'s live side is not the object given")
    result: dict[str, Any] = captured["result"]
    return result
