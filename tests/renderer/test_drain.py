"""A rollout drops no request: an exposed app's pods pause for the Gateway's propagation before SIGTERM, with a
grace period that still leaves the app its own 30 s, through the real cue and the real CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.renderer.helpers import MINIMAL, run_cli, write_app
from tests.testbed.kube import KubeTestBed


def rendered_deployment(tmp_path: Path, platform: str | None = None, base: str = "expose: port: 8080",
                        ) -> dict[str, Any]:
    """The Deployment `apprafter render --mode manifests` writes, with `platform` as the --platform file."""
    write_app(tmp_path, MINIMAL.replace("expose: port: 8080", base))
    args = ["render", ".", "--env", "dev", "--mode", "manifests"]
    if platform is not None:
        (tmp_path / "platform.yaml").write_text(platform)
        args += ["--platform", "platform.yaml"]
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = next(o for o in yaml.safe_load_all(result.stdout) if o["kind"] == "Deployment")
    return found


def drain_of(obj: dict[str, Any]) -> tuple[Any, Any]:
    """(the container's lifecycle, the pod's terminationGracePeriodSeconds); None where absent."""
    pod = obj["spec"]["template"]["spec"]
    return pod["containers"][0].get("lifecycle"), pod.get("terminationGracePeriodSeconds")


def pause(seconds: int) -> dict[str, Any]:
    return {"preStop": {"sleep": {"seconds": seconds}}}


def test_an_exposed_app_pauses_for_the_gateway_then_gets_its_own_30_s(tmp_path: Path) -> None:
    assert drain_of(rendered_deployment(tmp_path)) == (pause(5), 35)


def test_the_platform_file_sets_the_gateways_propagation(tmp_path: Path) -> None:
    obj = rendered_deployment(tmp_path, "gateway: {name: public, namespace: apprafter-gateway, drainSeconds: 12}\n")
    assert drain_of(obj) == (pause(12), 42)


def test_no_propagation_means_no_pause_and_kubernetes_grace(tmp_path: Path) -> None:
    assert drain_of(rendered_deployment(tmp_path, "gateway: {drainSeconds: 0}\n")) == (None, 30)


def test_a_worker_gets_neither_since_nothing_routes_to_it(tmp_path: Path) -> None:
    assert drain_of(rendered_deployment(tmp_path, "gateway: {drainSeconds: 12}\n", base="replicas: 1")) == (None, None)


@pytest.mark.testbed
def test_the_api_server_stores_the_pause_and_grace_as_written(kube: KubeTestBed, tmp_path: Path) -> None:
    """The sleep action needs no `sleep` in the image and is on by default since 1.30: the API server takes it, and
    what it stores reads back unchanged (the operator's no-op check holds)."""
    obj = rendered_deployment(tmp_path, "gateway: {drainSeconds: 12}\n")
    kube.apply(obj, namespace="drain-roundtrip")
    stored = kube.get("apps/v1", "Deployment", obj["metadata"]["name"], "drain-roundtrip")
    assert stored is not None
    assert drain_of(stored) == (pause(12), 42)
