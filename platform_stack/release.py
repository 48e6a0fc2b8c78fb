"""`stack release`, the CI job: build, lint, template every tier, push, sign, verify; fails closed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from platform_stack import helm
from platform_stack.build import build
from platform_stack.errors import StackError
from platform_stack.oci import Reference, push, read_archive
from platform_stack.signing import sign, verify


@dataclass(frozen=True)
class ReleaseOutcome:
    """The plain .tgz for release pages, its sha256, and the signed, verified OCI reference."""

    tgz: Path
    sha256: str
    reference: Reference


def run_release(source: Path, tier: str, version: str | None, out: Path, to: str, key: Path, public_key: Path,
                password: str, plain_http: bool, log: Callable[[str], None]) -> ReleaseOutcome:
    """Each step must pass before the next runs; any failure raises and nothing later happens."""
    built = build(out, source, tier, version)
    log(f"built {built.tgz} sha256:{built.sha256}")
    meta = yaml.safe_load(built.chart.files["Chart.yaml"])
    kube = meta["annotations"]["apprafter.io/minimum-kubernetes-version"]
    helm.lint(built.tgz, kube)
    for chart_tier in meta["annotations"]["apprafter.io/tiers"].split(","):
        objs = helm.template(built.tgz, kube, {"tier": chart_tier})
        if not any(o.get("kind") == "Application" for o in objs):
            raise StackError(f"{built.tgz}:1:1: tier {chart_tier}: renders no Application")
    log(f"helm lint and template passed (Kubernetes {kube})")
    pushed = push(read_archive(built.tgz), to, plain_http)
    log(f"pushed {pushed.reference.oci()}" + ("" if pushed.created else " (already there, identical)"))
    sign(pushed.reference.by_digest(), key, password, plain_http)
    log("signed")
    verified, _ = verify(pushed.reference.oci(), public_key, plain_http)
    log("verified")
    return ReleaseOutcome(built.tgz, built.sha256, verified)
