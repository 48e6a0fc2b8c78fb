"""A workload's health: the probes its container gets, the rollout that waits for them and the drain that ends a
pod (one place for both the renderer and the classifier)."""

from __future__ import annotations

from collections.abc import Mapping

from renderer.context import PlatformContext
from toolchain.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any

__all__ = ["APP_SHUTDOWN_SECONDS", "PROBES", "PROBE_DEFAULTS", "PROGRESS_DEADLINE", "ROLLING_UPDATE", "Drain",
           "container_probes", "describe", "drain", "health_problems", "probes", "progress_deadline",
           "ready_allowance"]

PROBES = ("readiness", "liveness", "startup")
# Kubernetes' own defaults for a probe's timings, written out so the object says what runs.
PROBE_DEFAULTS: Mapping[str, int] = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1,
                                     "failureThreshold": 3}
TIMINGS = tuple(PROBE_DEFAULTS)
# Kubernetes' default too, written out so that the operator reads it off the Deployment instead of assuming it.
PROGRESS_DEADLINE = 600
# Never fewer ready pods than desired while rolling: a new pod must be Ready before an old one goes. The surge
# is Kubernetes' default (25%, rounded up: one extra pod for 1-4 replicas, so a single replica is covered too).
ROLLING_UPDATE: Mapping[str, Any] = {"maxSurge": "25%", "maxUnavailable": 0}
# The app's own shutdown after SIGTERM: Kubernetes' default terminationGracePeriodSeconds, which a preStop pause
# would otherwise eat into (the grace period counts from the pause's start).
APP_SHUTDOWN_SECONDS = 30
_K8S_FIELD = {"readiness": "readinessProbe", "liveness": "livenessProbe", "startup": "startupProbe"}


def probes(eff: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The probes of an effective spec, each with its port and timings resolved (`path` only for HTTP).

    `health: false` has none. An exposed app gets a TCP readiness probe on expose.port unless it declares its
    own; a worker gets only what it declares. A probe without a port takes expose.port (None without expose).
    """
    health = eff.get("health", {})
    if health is False:
        return {}
    expose = eff.get("expose")
    default_port = expose.get("port") if isinstance(expose, Mapping) else None
    declared = {name: health[name] for name in PROBES if name in health}
    if "readiness" not in declared and expose is not None:
        declared["readiness"] = {}
    out: dict[str, dict[str, Any]] = {}
    for name in PROBES:
        if name not in declared:
            continue
        given = declared[name]
        probe: dict[str, Any] = {"port": given.get("port", default_port)}
        if "path" in given:
            probe["path"] = given["path"]
        probe.update({key: given.get(key, PROBE_DEFAULTS[key]) for key in TIMINGS})
        out[name] = probe
    return out


def progress_deadline(eff: Mapping[str, Any]) -> int:
    health = eff.get("health")
    if isinstance(health, Mapping):
        return int(health.get("progressDeadlineSeconds", PROGRESS_DEADLINE))
    return PROGRESS_DEADLINE


def ready_allowance(resolved: Mapping[str, Mapping[str, Any]]) -> int:
    """Seconds the probes give a healthy container before it may first be Ready: the whole startup budget when
    there is a startup probe, else readiness's initial delay."""
    startup = resolved.get("startup")
    if startup is not None:
        return int(startup["initialDelaySeconds"] + startup["periodSeconds"] * startup["failureThreshold"])
    readiness = resolved.get("readiness")
    return int(readiness["initialDelaySeconds"]) if readiness is not None else 0


def describe(probe: Mapping[str, Any] | None) -> str | None:
    """A probe in a few words, for plans: `HTTP GET :8080/healthz` or `TCP :8080`."""
    if probe is None:
        return None
    if "path" in probe:
        return f"HTTP GET :{probe['port']}{probe['path']}"
    return f"TCP :{probe['port']}"


def container_probes(eff: Mapping[str, Any]) -> dict[str, Any]:
    """The container's readinessProbe / livenessProbe / startupProbe fields."""
    out: dict[str, Any] = {}
    for name, probe in probes(eff).items():
        action = ({"httpGet": {"path": probe["path"], "port": probe["port"]}} if "path" in probe
                  else {"tcpSocket": {"port": probe["port"]}})
        # The API server stores no zero initialDelaySeconds (omitempty): a written 0 would never read back.
        out[_K8S_FIELD[name]] = {**action, **{key: probe[key] for key in TIMINGS
                                              if probe[key] or key != "initialDelaySeconds"}}
    return out


def health_problems(eff: Mapping[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """(field below the workload, message) for what the schema cannot say about health."""
    out: list[tuple[tuple[str, ...], str]] = []
    resolved = probes(eff)
    for name, probe in resolved.items():
        if probe["port"] is None:
            out.append((("health", name), f"{name} has no port and the app has no expose.port to default to: set "
                        f"health.{name}.port"))
    if "liveness" in resolved and "readiness" not in resolved:
        out.append((("health", "liveness"), "liveness without readiness: a new pod counts as ready as soon as it "
                    "starts, so a rollout stops old pods before it answers; declare health.readiness too"))
    deadline = progress_deadline(eff)
    allowance = ready_allowance(resolved)
    if allowance >= deadline:
        source = ("startup: initialDelaySeconds + periodSeconds x failureThreshold" if "startup" in resolved
                  else "readiness.initialDelaySeconds")
        out.append((("health", "progressDeadlineSeconds"), f"progressDeadlineSeconds ({deadline}) must be longer "
                    f"than the {allowance} s the probes give a healthy pod to become ready ({source}), or every "
                    "slow start is reported as a failed rollout"))
    return out


class Drain(Record):
    """What a pod does when it is stopped: its container's fields and its pod spec's."""

    container: dict[str, Any]
    pod: dict[str, Any]


def drain(eff: Mapping[str, Any], context: PlatformContext) -> Drain:
    """An exposed app's pod keeps answering for the Gateway's propagation before SIGTERM, so no request reaches a
    stopped pod: a preStop sleep of context.gateway_drain_seconds (Kubernetes' sleep action, beta and on since 1.30,
    GA in 1.34: no `sleep` binary in the image) and a grace period of that pause plus APP_SHUTDOWN_SECONDS.

    Kubernetes drops a deleted pod from the EndpointSlices and sends SIGTERM at once; the Gateway hears of the
    removal later. A worker (no expose) gets neither: nothing routes to it.
    """
    if not eff.get("expose"):
        return Drain({}, {})
    pause = context.gateway_drain_seconds
    container = {"lifecycle": {"preStop": {"sleep": {"seconds": pause}}}} if pause else {}
    return Drain(container, {"terminationGracePeriodSeconds": pause + APP_SHUTDOWN_SECONDS})
