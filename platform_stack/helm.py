"""Runs the real helm against a built chart: lint, and template into a list of objects."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml

from platform_stack.errors import StackError
from platform_stack.proc import run

HELM_TIMEOUT = 120.0


def _values_args(values: dict[str, Any] | None, workdir: Path) -> list[str]:
    if not values:
        return []
    path = workdir / "values.json"
    path.write_text(json.dumps(values, sort_keys=True))  # JSON is YAML; helm reads it as a values file
    return ["--values", str(path)]


def lint(chart: Path, kube_version: str, values: dict[str, Any] | None = None) -> str:
    """`helm lint --strict`; returns its output, raises StackError with helm's complaint on failure."""
    with tempfile.TemporaryDirectory(prefix="apprafter-helm-") as tmp:
        proc = run("helm", ["lint", "--strict", str(chart.resolve()), "--kube-version", kube_version,
                            *_values_args(values, Path(tmp))], timeout=HELM_TIMEOUT)
    output = (proc.stdout + proc.stderr).decode(errors="replace")
    if proc.returncode != 0:
        raise StackError(*_problems(chart, output))
    return output


def template(chart: Path, kube_version: str, values: dict[str, Any] | None = None,
             release: str = "platform-stack", namespace: str = "argocd") -> list[dict[str, Any]]:
    """`helm template` -> the rendered objects, in helm's order."""
    with tempfile.TemporaryDirectory(prefix="apprafter-helm-") as tmp:
        proc = run("helm", ["template", release, str(chart.resolve()), "--namespace", namespace,
                            "--kube-version", kube_version, *_values_args(values, Path(tmp))],
                   timeout=HELM_TIMEOUT)
    if proc.returncode != 0:
        raise StackError(*_problems(chart, proc.stderr.decode(errors="replace")))
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def _problems(chart: Path, output: str) -> list[str]:
    lines = [ln.strip() for ln in output.splitlines()
             if ln.strip() and ("Error" in ln or ln.strip().startswith(("- at", "[ERROR]")))]
    lines = [ln.removeprefix("Error: ") for ln in lines if not ln.startswith("Error: 1 chart(s)")]
    return [f"{chart}:1:1: helm: {ln}" for ln in dict.fromkeys(lines)] or [f"{chart}:1:1: helm: failed"]
