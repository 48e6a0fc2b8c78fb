"""The runtime is domain-free: it names no product anywhere, and what its metrics and loggers are called is the
program's choice (the operator passes `apprafter`, so docs/operator.md's names hold)."""

from __future__ import annotations

import re

from prometheus_client import REGISTRY

from apprafter.operator_settings import LEASE_NAME, LOGGER_ROOT, METRIC_PREFIX
from controller_runtime.metrics import metrics_for
from controller_runtime.telemetry import Telemetry
from tests.renderer.helpers import REPO


def test_the_runtime_names_no_product() -> None:
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for path in sorted((REPO / "controller_runtime").glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if re.search("apprafter", line, re.I)]
    assert found == []


def test_metrics_and_loggers_are_named_by_the_program() -> None:
    mine = Telemetry("named", "named.root")
    assert mine.metrics is metrics_for("named") is Telemetry("named", "other").metrics  # registered once
    mine.metrics.writes.labels("apply", "widgets").inc()
    assert REGISTRY.get_sample_value("named_kube_writes_total", {"verb": "apply", "resource": "widgets"}) == 1.0
    assert mine.logger("informer").name == "named.root.informer"


def test_the_operator_keeps_the_names_its_docs_list() -> None:
    operator = Telemetry(METRIC_PREFIX, LOGGER_ROOT)
    doc = (REPO / "docs" / "operator.md").read_text()
    listed = set(re.findall(r"`(apprafter_[a-z_]+?)(?:_total|_count|_bucket)?(?:\{[^}]*\})?`", doc))
    names = {m._name for m in vars(operator.metrics).values()}  # prometheus_client keeps the name without _total
    reconcilers = {"apprafter_drift_corrections", "apprafter_platform_check_seconds"}  # reconciler/'s own metrics
    assert listed - reconcilers <= names and len(listed - reconcilers) >= 10, sorted(listed - reconcilers - names)
    assert operator.logger("informer").name == "apprafter.informer"
    assert operator.logger("operator").name == "apprafter.operator"
    assert LEASE_NAME == "apprafter-operator" and f"Lease `{LEASE_NAME}`" in doc
