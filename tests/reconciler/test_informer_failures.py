"""An informer survives any failure of its list or watch, and the client says a failed connection as KubeError
whatever httpcore raised. The bug these pin: httpcore 1.0.9 lets anyio's EndOfStream escape unmapped when a TLS
peer closes while a request is written; the informer caught only KubeError, so its task died and its cache froze
(the operator then missed every change of that kind: tests/reconciler/test_faults_watch_cluster.py, the real-server
twin, failed one run in two or three). Without a server: the client's request and the informer's kube are stubs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import pytest
from lightkube import KubeConfig

from controller_runtime.client import ALL_NAMESPACES, Kube
from controller_runtime.errors import KubeError
from controller_runtime.events import Recorder
from controller_runtime.informer import Informer
from controller_runtime.kinds import GroupVersionKind, KindLike
from controller_runtime.manager import Manager, Runtime, Settings, Watch
from controller_runtime.outcomes import Done, Outcome
from controller_runtime.probes import Health
from controller_runtime.telemetry import Telemetry

POD = GroupVersionKind("v1", "Pod")


def pod(name: str, version: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "resourceVersion": str(version)}}


class FlakyKube:
    """Lists fail with what httpcore let through, then succeed; the watch delivers one change, then stays open. Its
    informers log and count under names of its own (as the operator's under `apprafter`)."""

    telemetry = Telemetry("flaky", "flaky")

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.lists = 0
        self.watching = asyncio.Event()

    async def list(self, kind: KindLike, namespace: str, labels: Mapping[str, str]) -> tuple[list[dict[str, Any]],
                                                                                               str]:
        self.lists += 1
        if self.failures:
            raise self.failures.pop(0)
        return [pod("web-1", 10)], "10"

    async def watch(self, kind: KindLike, version: str, namespace: str,
                    labels: Mapping[str, str]) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        yield "ADDED", pod("web-2", 11)
        self.watching.set()
        await asyncio.Event().wait()


def test_an_informer_lists_again_after_an_error_no_one_classified() -> None:
    async def scenario() -> tuple[list[str], int]:
        kube = FlakyKube([anyio.EndOfStream(), RuntimeError("a bug in a handler, say")])
        informer = Informer(kube, POD, max_delay=0.01)  # type: ignore[arg-type]  # the stub has what it uses
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(kube.watching.wait(), 10)
        assert not task.done()
        task.cancel()
        return sorted(o["metadata"]["name"] for o in informer.items()), kube.lists

    names, lists = asyncio.run(scenario())
    assert names == ["web-1", "web-2"] and lists == 3


def test_a_connection_that_ends_mid_request_is_a_kube_error_saying_the_server_cannot_be_reached() -> None:
    async def scenario() -> KubeError:
        kube = Kube(KubeConfig.from_dict({  # nothing is sent: the request below fails before it would be
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"}), "test")

        async def request() -> None:
            raise anyio.EndOfStream

        try:
            with pytest.raises(KubeError) as raised:
                await kube._call("LIST", "list pods", request())
        finally:
            await kube.close()
        return raised.value

    error = asyncio.run(scenario())
    assert error.code == 0 and error.retryable
    assert str(error) == "cannot reach the API server (list pods): TransportError: EndOfStream: "


class Idle:
    """A controller with nothing to do: only its informers matter here."""

    name = "idle"
    primary: KindLike = POD
    namespaces: tuple[str, ...] = ()

    def watches(self) -> list[Watch]:
        return []

    def bind(self, runtime: Runtime) -> None:
        pass

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        return Done()


def test_an_informer_that_ends_stops_the_manager_so_the_process_restarts_with_fresh_caches() -> None:
    async def scenario() -> int:
        kube = FlakyKube([])
        runtime = Runtime(kube, Settings(namespaces=(ALL_NAMESPACES,)), Recorder(kube, "test", "test"))  # type: ignore[arg-type]
        manager = Manager(runtime, [Idle()], Health())
        [informer] = runtime.informers.values()

        async def ends_after_sync() -> None:  # what no informer does any more; the manager must not trust that
            informer._replace(ALL_NAMESPACES, [])
            informer._mark_listed(ALL_NAMESPACES)
            await asyncio.sleep(0)

        informer.run = ends_after_sync  # type: ignore[method-assign]
        return await asyncio.wait_for(manager.run(asyncio.Event()), 10)

    assert asyncio.run(scenario()) == 2


def test_a_kind_the_server_does_not_serve_is_said_once_and_found_once_it_is(caplog: pytest.LogCaptureFixture) -> None:
    not_served = KubeError("the server does not serve ScaledObject.keda.sh/v1alpha1", 404, "NotFound")

    async def scenario() -> tuple[list[str], bool]:
        kube = FlakyKube([not_served, not_served, not_served])
        informer = Informer(kube, POD, max_delay=0.01)  # type: ignore[arg-type]
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(kube.watching.wait(), 10)  # its CRD installed: listed and watched
        synced_while_absent = informer.synced.is_set()
        task.cancel()
        return sorted(o["metadata"]["name"] for o in informer.items()), synced_while_absent and not informer.not_served

    with caplog.at_level("INFO", logger="flaky.informer"):
        names, synced = asyncio.run(scenario())
    assert names == ["web-1", "web-2"] and synced
    said = [r.getMessage() for r in caplog.records if r.name == "flaky.informer"]
    assert said == ["not served: looking for it again every few seconds"]
