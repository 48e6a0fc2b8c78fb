"""The runtime's Prometheus metrics, named as controller-runtime names them, under a prefix the program chooses
(`<prefix>_reconcile_total`, ...): one set per prefix in the process's registry."""

from __future__ import annotations

import dataclasses
import functools

from prometheus_client import Counter, Gauge, Histogram

__all__ = ["Metrics", "metrics_for"]

_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


@dataclasses.dataclass(frozen=True)
class Metrics:
    """Every metric the runtime records."""

    reconcile_total: Counter
    reconcile_errors: Counter
    reconcile_duration: Histogram
    queue_depth: Gauge
    queue_adds: Counter
    queue_retries: Counter
    queue_latency: Histogram
    group_latency: Histogram
    work_duration: Histogram
    watch_restarts: Counter
    writes: Counter
    requests: Counter
    throttled: Counter
    leader: Gauge


@functools.cache  # the registry takes a name once: every client, queue and elector of a prefix shares its metrics
def metrics_for(prefix: str) -> Metrics:
    """The runtime's metrics named `<prefix>_...`, registered on first use."""
    return Metrics(
        reconcile_total=Counter(f"{prefix}_reconcile", "Reconciles finished, by controller and result (success, "
                                "requeue, requeue_after, terminal, error)", ["controller", "result"]),
        reconcile_errors=Counter(f"{prefix}_reconcile_errors", "Reconciles that failed (requeued with backoff)",
                                 ["controller"]),
        reconcile_duration=Histogram(f"{prefix}_reconcile_duration_seconds", "Time per reconcile", ["controller"],
                                     buckets=_SECONDS),
        queue_depth=Gauge(f"{prefix}_workqueue_depth", "Keys waiting for a worker", ["name"]),
        queue_adds=Counter(f"{prefix}_workqueue_adds", "Keys added to the work queue", ["name"]),
        queue_retries=Counter(f"{prefix}_workqueue_retries", "Keys re-added after a failure (with backoff)",
                              ["name"]),
        queue_latency=Histogram(f"{prefix}_workqueue_queue_duration_seconds",
                                "Time a key waited before a worker took it", ["name"], buckets=_SECONDS),
        group_latency=Histogram(f"{prefix}_workqueue_namespace_queue_duration_seconds", "Time a key waited before "
                                "a worker took it, by the key's namespace (fair queueing keeps one namespace's flood "
                                "out of another's wait)", ["name", "namespace"], buckets=_SECONDS),
        work_duration=Histogram(f"{prefix}_workqueue_work_duration_seconds", "Time a worker spent on a key",
                                ["name"], buckets=_SECONDS),
        watch_restarts=Counter(f"{prefix}_watch_restarts", "Watches restarted, by cause (resume: from the last "
                               "resourceVersion; relist: after 410 Gone or at start; stalled: a watch open past its "
                               "timeout with nothing received, dropped and re-listed; error: a list or watch failed "
                               "in a way the client did not classify, listed again)", ["resource", "cause"]),
        writes=Counter(f"{prefix}_kube_writes", "Write requests sent to the API server", ["verb", "resource"]),
        requests=Counter(f"{prefix}_kube_requests", "Requests sent to the API server, by method and status code (a "
                         "watch counts once, when it starts)", ["method", "code"]),
        throttled=Counter(f"{prefix}_kube_throttled_seconds", "Seconds requests waited (summed over them) because "
                          "the API server answered 429 with Retry-After (API Priority and Fairness)"),
        leader=Gauge(f"{prefix}_leader", "1 while this replica holds the leader lease", ["identity"]),
    )
