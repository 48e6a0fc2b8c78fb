"""The runtime's Prometheus metrics, named as controller-runtime names them, with the common `apprafter_` prefix."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = ["GROUP_LATENCY", "LEADER", "QUEUE_ADDS", "QUEUE_DEPTH", "QUEUE_LATENCY", "QUEUE_RETRIES",
           "RECONCILE_DURATION", "RECONCILE_ERRORS", "RECONCILE_TOTAL", "REQUESTS", "THROTTLED", "WATCH_RESTARTS",
           "WORK_DURATION", "WRITES"]

_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

RECONCILE_TOTAL = Counter("apprafter_reconcile", "Reconciles finished, by controller and result (success, "
                          "requeue, requeue_after, terminal, error)", ["controller", "result"])
RECONCILE_ERRORS = Counter("apprafter_reconcile_errors", "Reconciles that failed (requeued with backoff)",
                           ["controller"])
RECONCILE_DURATION = Histogram("apprafter_reconcile_duration_seconds", "Time per reconcile", ["controller"],
                               buckets=_SECONDS)
QUEUE_DEPTH = Gauge("apprafter_workqueue_depth", "Keys waiting for a worker", ["name"])
QUEUE_ADDS = Counter("apprafter_workqueue_adds", "Keys added to the work queue", ["name"])
QUEUE_RETRIES = Counter("apprafter_workqueue_retries", "Keys re-added after a failure (with backoff)", ["name"])
QUEUE_LATENCY = Histogram("apprafter_workqueue_queue_duration_seconds", "Time a key waited before a worker took it",
                          ["name"], buckets=_SECONDS)
GROUP_LATENCY = Histogram("apprafter_workqueue_namespace_queue_duration_seconds", "Time a key waited before a worker "
                          "took it, by the key's namespace (fair queueing keeps one namespace's flood out of "
                          "another's wait)", ["name", "namespace"], buckets=_SECONDS)
WORK_DURATION = Histogram("apprafter_workqueue_work_duration_seconds", "Time a worker spent on a key", ["name"],
                          buckets=_SECONDS)
WATCH_RESTARTS = Counter("apprafter_watch_restarts", "Watches restarted, by cause (resume: from the last "
                         "resourceVersion; relist: after 410 Gone or at start; stalled: a watch open past its "
                         "timeout with nothing received, dropped and re-listed; error: a list or watch failed in "
                         "a way the client did not classify, listed again)", ["resource", "cause"])
WRITES = Counter("apprafter_kube_writes", "Write requests sent to the API server", ["verb", "resource"])
REQUESTS = Counter("apprafter_kube_requests", "Requests sent to the API server, by method and status code (a "
                   "watch counts once, when it starts)", ["method", "code"])
THROTTLED = Counter("apprafter_kube_throttled_seconds", "Seconds requests waited (summed over them) because the API "
                    "server answered 429 with Retry-After (API Priority and Fairness)")
LEADER = Gauge("apprafter_leader", "1 while this replica holds the leader lease", ["identity"])
