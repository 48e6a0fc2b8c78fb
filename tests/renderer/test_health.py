"""`health`: the probes and rollout a Deployment gets, and the rules the schema cannot say, through the real cue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from renderer.load import load
from renderer.render import render_loaded
from tests.renderer.helpers import MINIMAL, run_cli, write_app
from tests.testbed.kube import KubeTestBed

F = "apprafter/Application.cue"
# initialDelaySeconds 0 is left out: the API server stores no zero there, so a written one never reads back.
TCP_8080 = {"tcpSocket": {"port": 8080}, "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3}


def deployment(tmp_path: Path, base: str, env: str = "dev", envs: str | None = None) -> dict[str, Any]:
    text = MINIMAL.replace("expose: port: 8080", base)
    if envs is not None:
        text = text.replace("dev: {}\n\t\tprod: replicas: 2", envs)
    write_app(tmp_path, text)
    objs = render_loaded(load(tmp_path), env, "manifests", "ns1").objects
    found: dict[str, Any] = next(o for o in objs if o["kind"] == "Deployment")
    return found


def container(obj: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = obj["spec"]["template"]["spec"]["containers"][0]
    return found


def probes_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in container(obj).items() if k.endswith("Probe")}


def test_an_exposed_app_gets_tcp_readiness_and_a_rollout_that_keeps_serving(tmp_path: Path) -> None:
    obj = deployment(tmp_path, "expose: port: 8080")
    assert probes_of(obj) == {"readinessProbe": TCP_8080}
    assert obj["spec"]["strategy"] == {"type": "RollingUpdate",
                                       "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}
    assert obj["spec"]["progressDeadlineSeconds"] == 600


def test_declared_probes_merge_per_environment(tmp_path: Path) -> None:
    base = ('expose: port: 8080\n\t\thealth: {readiness: {path: "/healthz", periodSeconds: 5}, '
            'liveness: {path: "/livez", port: 9000}, startup: {failureThreshold: 30}}')
    envs = "dev: {}\n\t\tprod: {replicas: 2, health: {readiness: periodSeconds: 20, progressDeadlineSeconds: 900}}"
    dev = deployment(tmp_path, base, "dev", envs)
    assert sorted(probes_of(dev)) == ["livenessProbe", "readinessProbe", "startupProbe"]
    assert container(dev)["readinessProbe"] == {"httpGet": {"path": "/healthz", "port": 8080},
                                                "periodSeconds": 5, "timeoutSeconds": 1,
                                                "failureThreshold": 3}
    assert container(dev)["livenessProbe"]["httpGet"] == {"path": "/livez", "port": 9000}
    assert container(dev)["startupProbe"] == {**TCP_8080, "failureThreshold": 30}
    prod = deployment(tmp_path, base, "prod", envs)
    assert container(prod)["readinessProbe"]["periodSeconds"] == 20
    assert container(prod)["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 8080}  # inherited
    assert prod["spec"]["progressDeadlineSeconds"] == 900 and dev["spec"]["progressDeadlineSeconds"] == 600


def test_health_false_opts_out_in_one_environment(tmp_path: Path) -> None:
    envs = "dev: {health: false}\n\t\tprod: replicas: 2"
    assert probes_of(deployment(tmp_path, "expose: port: 8080", "dev", envs)) == {}
    assert probes_of(deployment(tmp_path, "expose: port: 8080", "prod", envs)) == {"readinessProbe": TCP_8080}


def test_a_worker_gets_no_probe_unless_it_asks(tmp_path: Path) -> None:
    assert probes_of(deployment(tmp_path, "replicas: 1")) == {}
    asked = deployment(tmp_path, "health: readiness: {port: 9000, path: \"/ready\"}")
    assert probes_of(asked) == {"readinessProbe": {"httpGet": {"path": "/ready", "port": 9000},
                                                   "periodSeconds": 10,
                                                   "timeoutSeconds": 1, "failureThreshold": 3}}


@pytest.mark.testbed
def test_the_api_server_stores_the_probes_and_rollout_as_rendered(kube: KubeTestBed, tmp_path: Path) -> None:
    """What is rendered reads back unchanged, so the operator's no-op check (every rendered field in the live
    object) holds: a zero initialDelaySeconds, which the API server never stores, is not rendered."""
    base = ('expose: port: 8080\n\t\thealth: {readiness: {path: "/healthz", initialDelaySeconds: 0}, '
            'liveness: {initialDelaySeconds: 5}, startup: {failureThreshold: 6}, progressDeadlineSeconds: 120}')
    obj = deployment(tmp_path, base)
    [stored] = kube.dry_run_apply(obj, namespace="health-roundtrip")
    for field, want in probes_of(obj).items():  # the server adds its defaults (httpGet.scheme, successThreshold)
        got = container(stored)[field]
        assert {k: ({kk: got[k][kk] for kk in v} if isinstance(v, dict) else got[k]) for k, v in want.items()} == want
    assert container(stored)["livenessProbe"]["initialDelaySeconds"] == 5
    assert {k: stored["spec"][k] for k in ("strategy", "progressDeadlineSeconds")} == {
        k: obj["spec"][k] for k in ("strategy", "progressDeadlineSeconds")}


def errors_of(tmp_path: Path, base: str, envs: str | None = None) -> list[str]:
    text = MINIMAL.replace("expose: port: 8080", base)
    if envs is not None:
        text = text.replace("dev: {}\n\t\tprod: replicas: 2", envs)
    write_app(tmp_path, text)
    result = run_cli("validate", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    return result.stderr.splitlines()


def test_a_probe_with_no_port_to_default_to(tmp_path: Path) -> None:
    assert errors_of(tmp_path, 'health: readiness: path: "/ready"') == [
        f"{F}:7:11: spec.base.health.readiness: readiness has no port and the app has no expose.port to default "
        "to: set health.readiness.port"]  # the same problem in both environments, reported once


def test_liveness_without_readiness(tmp_path: Path) -> None:
    assert errors_of(tmp_path, "replicas: 1", "dev: {}\n\t\tprod: health: liveness: port: 9000") == [
        f"{F}:11:17: spec.environments.prod.health.liveness: liveness without readiness: a new pod counts as ready "
        "as soon as it starts, so a rollout stops old pods before it answers; declare health.readiness too"]


def test_a_deadline_shorter_than_the_startup_allowance(tmp_path: Path) -> None:
    base = "expose: port: 8080\n\t\thealth: {startup: {periodSeconds: 10, failureThreshold: 30}, " \
           "progressDeadlineSeconds: 300}"
    assert errors_of(tmp_path, base, "dev: {}\n\t\tprod: {}") == [
        f"{F}:8:64: spec.base.health.progressDeadlineSeconds: progressDeadlineSeconds (300) must be longer than "
        "the 300 s the probes give a healthy pod to become ready (startup: initialDelaySeconds + periodSeconds x "
        "failureThreshold), or every slow start is reported as a failed rollout"]


def test_schema_bounds_and_forms_are_named_at_the_field(tmp_path: Path) -> None:
    base = 'expose: port: 8080\n\t\thealth: readiness: {path: "healthz", periodSeconds: 0}'
    assert errors_of(tmp_path, base, "dev: health: true\n\t\tprod: {}") == [
        f'{F}:8:29: spec.base.health.readiness.path: invalid value "healthz" (out of bound =~"^/[!-~]*$")',
        f"{F}:11:16: spec.environments.dev.health: true is not allowed: want one of false, a struct",
    ]  # cue names one error of a struct branch at a time: the next run shows the next
    assert errors_of(tmp_path, "expose: port: 8080\n\t\thealth: readiness: periodSeconds: 0") == [
        f"{F}:8:37: spec.base.health.readiness.periodSeconds: invalid value 0 (out of bound >=1)"]
    assert errors_of(tmp_path, "expose: port: 8080", "dev: {}\n\t\tprod: health: readines: {}") == [
        f"{F}:11:17: spec.environments.prod.health.readines: field not allowed"]
