"""A watch that stops delivering without closing (every connection held open by a proxy, nothing forwarded, not
even the server's end of the watch): the operator notices at the watch's deadline (its --watch-timeout plus a
grace, controller_runtime.replies.watch_deadline), re-lists and reconciles what it missed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from controller_runtime.replies import watch_deadline
from tests.reconciler.helpers import apply, cr, edit, fresh_namespace, status, wait_phase
from tests.reconciler.operator_proc import Operator
from tests.testbed.kube import KubeTestBed
from tests.testbed.proxy import SilentProxy

pytestmark = [pytest.mark.testbed, pytest.mark.faults]

SIMPLE = edit(needs=None, env={"LOG_LEVEL": "info"})
WATCH_TIMEOUT = 4


@pytest.fixture
def proxy(bed: KubeTestBed) -> Iterator[SilentProxy]:
    server = urlsplit(bed.url)
    assert server.hostname and server.port
    silent = SilentProxy(server.hostname, server.port)
    try:
        yield silent
    finally:
        silent.stop()


def test_a_silent_watch_is_detected_and_re_listed(bed: KubeTestBed, proxy: SilentProxy, tmp_path: Path) -> None:
    config = yaml.safe_load(bed.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"  # the API server's cert: an IP
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    ns = fresh_namespace(bed, "stall")
    # no resync to fall back on (an hour), no lease to lose: only the watches can bring the change in
    op = Operator(bed, tmp_path, ("--no-leader-elect", "--namespace", ns, "--resync", "3600",
                                  "--watch-timeout", str(WATCH_TIMEOUT)), name="stalled", kubeconfig=kubeconfig)
    op.start()
    try:
        apply(bed, cr(ns, SIMPLE, name="a"))
        wait_phase(bed, ns, "Ready", "a")
        assert op.metric("apprafter_watch_restarts_total", cause="stalled") == 0
        assert proxy.freeze() > 0
        apply(bed, cr(ns, edit(SIMPLE, replicas=3), name="a"))
        apply(bed, cr(ns, SIMPLE, name="b"))
        # the deadline here is a few seconds; the wait's bound is generous for a loaded machine
        wait_phase(bed, ns, "Ready", "b", timeout=60)
        wait_phase(bed, ns, "Ready", "a", timeout=60)
        assert status(bed, ns, "a")["lastAppliedSpec"]["replicas"] == 3
        assert op.metric("apprafter_watch_restarts_total", cause="stalled") > 0, op.log()[-3000:]
        assert "watch stalled: re-listing" in op.log()
    finally:
        op.stop()


def test_the_stall_bound() -> None:
    # what docs/operator.md states: the server ends a watch at --watch-timeout; past a grace of a quarter of it
    # (1 to 10 s) a watch that is still open has stalled
    assert watch_deadline(120) == 130 and watch_deadline(WATCH_TIMEOUT) == WATCH_TIMEOUT + 1
