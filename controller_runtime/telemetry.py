"""What the runtime's metrics and log lines are called: a metric prefix and a logger root the program passes in
(the runtime names no product; a program that passes nothing gets `controller_runtime`)."""

from __future__ import annotations

import logging
from typing import NamedTuple

from controller_runtime.metrics import Metrics, metrics_for

__all__ = ["DEFAULT", "DEFAULT_NAME", "Telemetry"]

DEFAULT_NAME = "controller_runtime"


class Telemetry(NamedTuple):
    """The names under which one program's runtime reports: `<metric_prefix>_reconcile_total`, the logger
    `<logger_root>.informer`, ..."""

    metric_prefix: str = DEFAULT_NAME
    logger_root: str = DEFAULT_NAME

    @property
    def metrics(self) -> Metrics:
        return metrics_for(self.metric_prefix)

    def logger(self, part: str) -> logging.Logger:
        """The logger of one part of the runtime (informer, lease, events, operator: the manager's loop)."""
        return logging.getLogger(f"{self.logger_root}.{part}")


DEFAULT = Telemetry()
