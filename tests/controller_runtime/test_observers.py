"""The write observers (the extension point the fault tier's kill switch uses) against a real API server: told of
every write before it is sent and after its reply, of no read, and no longer once removed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller_runtime.client import Kube
from controller_runtime.errors import KubeError
from controller_runtime.observers import observe_writes
from tests.controller_runtime.conftest import CONFIG_MAP


class Seen:
    def __init__(self) -> None:
        self.said: list[tuple[str, str, str]] = []

    def before(self, what: str, resource: str) -> None:
        self.said.append(("before", what, resource))

    def after(self, what: str, resource: str) -> None:
        self.said.append(("after", what, resource))


def test_observers_see_each_write_around_its_request_and_no_read(run: Callable[..., Any], namespace: str) -> None:
    seen = Seen()

    async def scenario(kube: Kube) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seen", "namespace": namespace}}
        stop = observe_writes(seen)
        try:
            await kube.apply(body)
            await kube.get(CONFIG_MAP, "seen", namespace)
            await kube.list(CONFIG_MAP, namespace)
            with pytest.raises(KubeError):  # refused: told before, not after
                await kube.create(body)
        finally:
            stop()
        await kube.delete(CONFIG_MAP, "seen", namespace)  # after stop(): not seen

    run(scenario)
    assert seen.said == [("before", f"apply ConfigMap {namespace}/seen", "configmaps"),
                         ("after", f"apply ConfigMap {namespace}/seen", "configmaps"),
                         ("before", "create ConfigMap seen", "configmaps")]
