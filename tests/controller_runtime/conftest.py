"""The runtime against the session's real API server: a client of its own (its metrics under a prefix of their own,
so a test counts exactly its writes), a test kind with a status subresource (the runtime knows no kind of ours), and
a fresh namespace per test."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client import REGISTRY

from controller_runtime.client import Kube
from controller_runtime.kinds import GroupVersionKind
from controller_runtime.kubeconfig import load_config
from controller_runtime.telemetry import Telemetry
from tests.testbed.kube import KubeTestBed

T = TypeVar("T")
PREFIX = "crtest"  # the metrics of these tests' clients: crtest_kube_writes_total, ...
TELEMETRY = Telemetry(PREFIX, "crtest")
CONFIG_MAP = GroupVersionKind("v1", "ConfigMap")
WIDGET = GroupVersionKind("runtime.test.example/v1", "Widget")
WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.runtime.test.example"},
    "spec": {"group": "runtime.test.example", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}


@pytest.fixture(scope="module")
def server(kube: KubeTestBed, tmp_path_factory: pytest.TempPathFactory) -> KubeTestBed:
    """The session's API server, serving the test kind Widget (spec and status, status a subresource)."""
    path: Path = tmp_path_factory.mktemp("crd") / "widget.yaml"
    path.write_text(json.dumps(WIDGET_CRD))  # JSON is YAML
    kube.install_crds([path])
    return kube


@pytest.fixture
def namespace(server: KubeTestBed) -> str:
    name = f"rt-{uuid.uuid4().hex[:8]}"
    server.ensure_namespace(name)
    return name


Scenario = Callable[[Kube], Awaitable[T]]


@pytest.fixture
def run(server: KubeTestBed) -> Iterator[Callable[[Scenario[Any]], Any]]:
    """run(scenario): `scenario(kube)` on a fresh client of the server (field manager `runtime-test`), closed after."""

    def call(scenario: Scenario[T]) -> T:
        async def go() -> T:
            kube = Kube(load_config(server.kubeconfig), "runtime-test", http2=False, telemetry=TELEMETRY)
            try:
                return await scenario(kube)
            finally:
                await kube.close()

        return asyncio.run(go())

    yield call


def writes(verb: str, resource: str) -> float:
    """How many `verb` writes of `resource` these tests' clients have sent so far."""
    return REGISTRY.get_sample_value(f"{PREFIX}_kube_writes_total", {"verb": verb, "resource": resource}) or 0.0
