"""deploy/charts/apprafter-operator rendered by the real helm, for the chart's tests and the admission tests."""

from __future__ import annotations

import json
import subprocess
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.platform_stack.conftest import helm, ok
from tests.renderer.helpers import REPO

CHART = REPO / "deploy" / "charts" / "apprafter-operator"
NAMESPACE = "apprafter-system"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
KUBE_VERSION = "1.34.0"  # the test bed's (tools/versions.env)


def values_args(values: Mapping[str, Any] | None, directory: Path) -> list[str]:
    """`-f values.json` for helm, when there are values."""
    if not values:
        return []
    path = directory / "values.json"
    path.write_text(json.dumps(values))
    return ["-f", str(path)]


def template(values: Mapping[str, Any] | None = None, *args: str, release: str = "apprafter-operator",
             namespace: str = NAMESPACE) -> subprocess.CompletedProcess[str]:
    """`helm template` of the chart: the CompletedProcess (for tests of refusals)."""
    with tempfile.TemporaryDirectory(prefix="apprafter-chart-") as tmp:
        return helm("template", release, str(CHART), "--namespace", namespace, "--kube-version", KUBE_VERSION,
                    *values_args(values, Path(tmp)), *args)


def render(values: Mapping[str, Any] | None = None, *args: str, release: str = "apprafter-operator",
           namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The chart's objects (templates only; CRDs with "--include-crds"); fails the test when helm fails."""
    out = ok(template(values, *args, release=release, namespace=namespace))
    return [d for d in yaml.safe_load_all(out) if d]


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None,
         namespace: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])
            and namespace in (None, o["metadata"].get("namespace"))]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None,
        namespace: str | None = None) -> dict[str, Any]:
    found = find(objects, kind, name, namespace)
    assert len(found) == 1, f"want one {kind} {name or ''}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def container(deployment: Mapping[str, Any]) -> dict[str, Any]:
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = c
    return result
