"""Health earned from the workload: each child's state read off its live status (kstatus' Current / InProgress /
Failed), the pods' container states, and what they add up to for the Application (its state, the reason and
message of its Ready condition, the replica counts, the URL and the running image digest). Messages name
objects, containers and reasons, never an env or Secret value."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from lifecycle.conditions import by_type, find_condition
from renderer.names import INSTANCE_LABEL, NAME_LABEL

__all__ = ["CURRENT", "FAILED", "IN_PROGRESS", "LISTENER_UNAVAILABLE", "POD_FAILURES", "POD_INDEX", "ChildState",
           "PodFailure", "Workload", "child_state", "deployment_state", "image_digest", "pod_failures", "pod_key",
           "pods_key", "pull_refusal", "replicas", "url", "workload"]

POD_INDEX = "application"  # the pods' cache index of pod_key: an Application's pods found directly
State = Literal["Current", "InProgress", "Failed"]
CURRENT: State = "Current"
IN_PROGRESS: State = "InProgress"
FAILED: State = "Failed"
LISTENER_UNAVAILABLE = "ListenerUnavailable"  # a hostname of the app left without a listener: the Gateways are full

# Container waiting reasons that mean the pod cannot run as declared (the kubelet's words); each is the reason
# the Application's Ready condition carries.
POD_FAILURES = ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName",
                "CreateContainerConfigError", "CreateContainerError", "OOMKilled")
_WAITING_FAILURES = frozenset(POD_FAILURES) - {"OOMKilled"}
_PULL_FAILURES = frozenset({"ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName"})
# The kubelet's CreateContainerConfigError messages that name only objects and keys (never a value).
_CONFIG_MESSAGE = re.compile(r'(?:secret|configmap) "[-.a-z0-9]{1,253}" not found'
                             r'|couldn\'t find key [-._A-Za-z0-9]{1,253} in (?:Secret|ConfigMap) [-.a-z0-9/]{1,507}')
# What the kubelet says while its own watch of a Secret or ConfigMap is not ready yet (its watch-based manager gives up
# after a second and retries the container at once): a passing state of a pod starting beside a Secret written a
# moment before it (every claim's connection Secret), not the app's failure (a cache that never syncs still fails
# the rollout at its progress deadline).
_CONFIG_NOT_YET = re.compile(r'failed to sync (?:secret|configmap) cache|object "[^"]{1,253}"/"[^"]{1,253}" not '
                             r'registered')
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# What a registry or the network answered a pull, as containerd words it (the first one found is named).
_PULL_ERROR = re.compile(r"\b(?:401 Unauthorized|403 Forbidden|pull access denied|authorization failed|"
                         r"failed to authorize|not found|network is unreachable|connection refused|no such host|"
                         r"i/o timeout)\b", re.IGNORECASE)


class ChildState(NamedTuple):
    """One child (or the pods) as kstatus would judge it."""

    state: State
    reason: str
    message: str


class PodFailure(NamedTuple):
    """A container that cannot run as declared: its pod, its name, the reason and what to say about it."""

    pod: str
    container: str
    reason: str
    detail: str

    def describe(self) -> str:
        return f"pod {self.pod}: container {self.container}: {self.reason} ({self.detail})"


class Workload(NamedTuple):
    """What the live children and pods say: the state, the Ready condition's reason and message, status fields."""

    state: State
    reason: str
    message: str
    replicas: dict[str, int] | None
    url: str | None
    image_digest: str | None


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = obj.get("status")
    found = status.get("conditions") if isinstance(status, Mapping) else None
    return by_type(found)


def _count(status: Mapping[str, Any], field: str) -> int:
    value = status.get(field)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0  # the API omits zeros


def _desired_replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1  # the API's default


def replicas(deployment: Mapping[str, Any] | None) -> dict[str, int] | None:
    """desired / updated / ready / available, from a live Deployment (None before it exists)."""
    if deployment is None:
        return None
    status = deployment.get("status") or {}
    return {"desired": _desired_replicas(deployment), "updated": _count(status, "updatedReplicas"),
            "ready": _count(status, "readyReplicas"), "available": _count(status, "availableReplicas")}


def deployment_state(obj: Mapping[str, Any]) -> ChildState:
    """kstatus' rules for a Deployment (cli-utils `deploymentConditions`), in words a person reads."""
    name = f"Deployment {obj.get('metadata', {}).get('name')}"
    status = obj.get("status") or {}
    generation = obj.get("metadata", {}).get("generation") or 0
    observed = status.get("observedGeneration") or 0
    if observed < generation:
        return ChildState(IN_PROGRESS, "Progressing", f"{name}: the Deployment controller has not seen generation "
                          f"{generation} yet")
    conditions = _conditions(obj)
    progressing = conditions.get("Progressing") or {}
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        deadline = (obj.get("spec") or {}).get("progressDeadlineSeconds")
        counts = replicas(obj) or {}
        return ChildState(FAILED, "ProgressDeadlineExceeded",
                          f"{name}: no progress for {deadline} s (ProgressDeadlineExceeded): "
                          f"{counts.get('updated', 0)}/{counts.get('desired', 0)} replicas updated, "
                          f"{counts.get('available', 0)} available; the previous pods keep serving")
    failure = conditions.get("ReplicaFailure") or {}
    if failure.get("status") == "True":
        return ChildState(FAILED, str(failure.get("reason") or "ReplicaFailure"),
                          f"{name}: {failure.get('message') or 'pods cannot be created'}")
    want = _desired_replicas(obj)
    total, updated = _count(status, "replicas"), _count(status, "updatedReplicas")
    ready, available = _count(status, "readyReplicas"), _count(status, "availableReplicas")
    if want > total:
        return ChildState(IN_PROGRESS, "Progressing", f"{name}: {total}/{want} replicas created")
    if want > updated:
        return ChildState(IN_PROGRESS, "Progressing", f"{name}: {updated}/{want} replicas updated")
    if total > want:
        old = total - want
        return ChildState(IN_PROGRESS, "Progressing", f"{name}: {old} old replica{'s' if old != 1 else ''} "
                          "terminating")
    if updated > available:
        return ChildState(IN_PROGRESS, "Progressing", f"{name}: {available}/{want} replicas available")
    if want > ready:
        return ChildState(IN_PROGRESS, "Progressing", f"{name}: {ready}/{want} replicas ready")
    if not (progressing.get("status") == "True" and progressing.get("reason") == "NewReplicaSetAvailable") \
            and "progressDeadlineSeconds" in (obj.get("spec") or {}):
        return ChildState(IN_PROGRESS, "Progressing", f"{name}: the rollout has not completed")
    if (conditions.get("Available") or {}).get("status") != "True":
        return ChildState(IN_PROGRESS, "Progressing", f"{name}: not available")
    return ChildState(CURRENT, "Available", f"{available}/{want} replicas available")


def _route_state(obj: Mapping[str, Any]) -> ChildState:
    """An HTTPRoute: current unless a Gateway controller reports it not accepted (or has not seen it yet)."""
    name = f"HTTPRoute {obj.get('metadata', {}).get('name')}"
    generation = obj.get("metadata", {}).get("generation") or 0
    named = {ref.get("name") for ref in (obj.get("spec") or {}).get("parentRefs") or []}
    for parent in (obj.get("status") or {}).get("parents") or []:
        gateway = (parent.get("parentRef") or {}).get("name")
        if named and gateway not in named:
            continue  # a Gateway the route no longer names (it moved to its hostname's: lifecycle.listeners)
        accepted = find_condition(parent.get("conditions"), "Accepted")
        if accepted and (accepted.get("observedGeneration") or generation) < generation:
            return ChildState(IN_PROGRESS, "Progressing", f"{name}: Gateway {gateway} has not seen generation "
                              f"{generation} yet")
        if accepted.get("status") == "False" and accepted.get("reason") == "NoMatchingParent":
            # The listener it names is not there yet: the operator adds a hostname's own listener once its
            # certificate was issued (lifecycle.listeners).
            section = (parent.get("parentRef") or {}).get("sectionName")
            return ChildState(IN_PROGRESS, "Progressing", f"{name}: Gateway {gateway} has no listener {section} "
                              "yet (the operator adds it once the app's certificate is issued)")
        if accepted.get("status") == "False":
            return ChildState(FAILED, "RouteNotAccepted", f"{name}: not accepted by Gateway {gateway} "
                              f"({accepted.get('reason')}: {accepted.get('message')})")
    return ChildState(CURRENT, "Current", f"{name} accepted")


def child_state(obj: Mapping[str, Any] | None) -> ChildState:
    """Any child: the Deployment and HTTPRoute by their own rules; others by kstatus' generic ones (a status
    observedGeneration behind, a Ready condition not True, Stalled, Reconciling); a kind nobody reports on is
    current once it exists."""
    if obj is None:
        return ChildState(IN_PROGRESS, "Progressing", "not created yet")
    kind, name = obj.get("kind"), obj.get("metadata", {}).get("name")
    if kind == "Deployment":
        return deployment_state(obj)
    if kind == "HTTPRoute":
        return _route_state(obj)
    status = obj.get("status") or {}
    generation = obj.get("metadata", {}).get("generation") or 0
    observed = status.get("observedGeneration")
    if isinstance(observed, int) and observed < generation:
        return ChildState(IN_PROGRESS, "Progressing", f"{kind} {name}: its controller has not seen generation "
                          f"{generation} yet")
    conditions = _conditions(obj)
    if (conditions.get("Stalled") or {}).get("status") == "True":
        stalled = conditions["Stalled"]
        return ChildState(FAILED, str(stalled.get("reason") or "Stalled"), f"{kind} {name}: {stalled.get('message')}")
    for kind_of_wait in ("Reconciling", "Ready"):
        found = conditions.get(kind_of_wait)
        if found and found.get("status") == ("True" if kind_of_wait == "Reconciling" else "False"):
            return ChildState(IN_PROGRESS, "Progressing", f"{kind} {name} not ready ({found.get('reason')}: "
                              f"{found.get('message')})")
    return ChildState(CURRENT, "Current", f"{kind} {name}")


def _terminated(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The container's last termination: the one it is in now, else the one before the running attempt."""
    now = (status.get("state") or {}).get("terminated")
    return now if now else (status.get("lastState") or {}).get("terminated")


def pull_refusal(reason: str, message: str, pull_secrets: Sequence[str], scoped_out: bool = False) -> str:
    """Why an image cannot be pulled, in words a person acts on: what the registry answered (one of a few fixed
    phrases read off the kubelet's message, never the message itself) and which pull secrets the pod has, or, with
    none, whether SourceCredentials cover the image but not this namespace (`scoped_out`); while the kubelet backs
    off its message says nothing, and the pod's events keep the last error."""
    found = _PULL_ERROR.search(message) if reason == "ErrImagePull" else None
    said = found.group(0).lower() if found else ""
    if "not found" in said:
        return "cannot be pulled: not found in the registry"
    if said and not ("401" in said or "403" in said or "auth" in said or "denied" in said):
        return f"cannot be pulled: the registry is not reachable from the node ({said})"
    words = (f"cannot be pulled: the registry refused access ({found.group(0)})" if found
             else "cannot be pulled" + (" (the kubelet is backing off; the pod's events have its last error)"
                                        if reason == "ImagePullBackOff" else ""))
    if pull_secrets:
        return f"{words}; the pod pulls with {', '.join(sorted(pull_secrets))}"
    if scoped_out:
        return (f"{words}; the pod has no pull secret (a SourceCredential covers the image's registry, but not this "
                "namespace: its spec.registry.namespaces does not list it)")
    return f"{words}; the pod has no pull secret (a SourceCredential whose registry hosts cover the image gives one)"


def _container_failure(pod: str, status: Mapping[str, Any], pull_secrets: Sequence[str] = (),
                       scoped_out: bool = False) -> PodFailure | None:
    container = str(status.get("name"))
    waiting = (status.get("state") or {}).get("waiting") or {}
    reason = waiting.get("reason")
    restarts = status.get("restartCount") or 0
    terminated = _terminated(status)
    if terminated and terminated.get("reason") == "OOMKilled" and not status.get("ready"):
        return PodFailure(pod, container, "OOMKilled", f"killed at its memory limit, {restarts} restarts: raise "
                          "resources.limits.memory or use less")
    if reason in _PULL_FAILURES:
        why = ("not on the node, and imagePullPolicy is Never" if reason == "ErrImageNeverPull"
               else pull_refusal(str(reason), str(waiting.get("message") or ""), pull_secrets, scoped_out)
               if reason != "InvalidImageName" else "not a valid reference")
        return PodFailure(pod, container, str(reason), f"image {status.get('image')} {why}")
    if reason in ("CreateContainerConfigError", "CreateContainerError"):
        if _CONFIG_NOT_YET.search(str(waiting.get("message") or "")):
            return None
        said = _CONFIG_MESSAGE.search(str(waiting.get("message") or ""))
        return PodFailure(pod, container, str(reason), said.group(0) if said else
                          "the container cannot be created as declared (an env reference to a missing Secret or key?)")
    if reason in _WAITING_FAILURES or (terminated and not status.get("ready") and restarts):
        code = terminated.get("exitCode") if terminated else None
        exited = f"exit code {code}" if code is not None else "exited"
        return PodFailure(pod, container, "CrashLoopBackOff", f"{exited}, {restarts} restarts")
    return None


def pod_failures(pods: Iterable[Mapping[str, Any]], scoped_out: bool = False) -> list[PodFailure]:
    """Containers (init containers first) that cannot run as declared, over running pods, sorted by pod name
    (`scoped_out`: SourceCredentials cover the image, but not the pods' namespace; lifecycle.credentials.checks)."""
    out = []
    for pod in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name"))):
        meta, status = pod.get("metadata", {}), pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        secrets = [str(ref.get("name")) for ref in (pod.get("spec") or {}).get("imagePullSecrets") or []
                   if isinstance(ref, Mapping)]
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            found = _container_failure(str(meta.get("name")), container, secrets, scoped_out)
            if found:
                out.append(found)
                break
    return out


def _unscheduled(pods: Iterable[Mapping[str, Any]]) -> str | None:
    """The scheduler's word on the first pod it cannot place."""
    for pod in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name"))):
        scheduled = _conditions(pod).get("PodScheduled") or {}
        if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            return f"pod {pod['metadata']['name']}: Unschedulable ({scheduled.get('message')})"
    return None


def image_digest(pods: Iterable[Mapping[str, Any]], image: str | None) -> str | None:
    """The digest the ready pods run `image` from (the kubelet's imageID), once they report one; None when they
    disagree (a tag that moved between two pulls) or none reports it. A container is matched by the image its pod
    declares, not by the name the kubelet reports: containerd reports one of the image's tags, whichever, when
    several name the same image."""
    seen = set()
    for pod in pods:
        declared = {c.get("name"): c.get("image") for c in (pod.get("spec") or {}).get("containers") or []}
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            running = declared.get(status.get("name")) or status.get("image")
            if not status.get("ready") or not running or (image is not None and not _same_image(running, image)):
                continue
            found = _DIGEST.search(str(status.get("imageID") or ""))
            if found:
                seen.add(found.group(0))
    return seen.pop() if len(seen) == 1 else None


def _same_image(reported: str, declared: str) -> bool:
    """The kubelet reports `docker.io/library/x:1` for `x:1`: compare without the registry it added."""
    def bare(ref: str) -> str:
        return ref.removeprefix("docker.io/library/").removeprefix("docker.io/")
    return bare(reported) == bare(declared)


def url(children: Iterable[Mapping[str, Any]]) -> str | None:
    """The public URL of an exposed app: its HTTPRoute's hostname, https when it has a Certificate."""
    objs = list(children)
    route = next((o for o in objs if o.get("kind") == "HTTPRoute"), None)
    hostnames = (route or {}).get("spec", {}).get("hostnames") or []
    if not hostnames:
        return None
    scheme = "https" if any(o.get("kind") == "Certificate" for o in objs) else "http"
    return f"{scheme}://{hostnames[0]}/"


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(obj.get("kind")), str(obj.get("metadata", {}).get("name"))


def pod_key(pod: Mapping[str, Any]) -> str | None:
    """`namespace/app/instance` of a pod the renderer's labels tie to an Application (None: no such labels)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    if NAME_LABEL not in labels or INSTANCE_LABEL not in labels:
        return None
    return f"{meta.get('namespace')}/{labels[NAME_LABEL]}/{labels[INSTANCE_LABEL]}"


def pods_key(app: Mapping[str, Any]) -> str:
    """The pod_key of this Application's pods (its instance label is `<app>-<environment>`)."""
    meta = app["metadata"]
    return f"{meta['namespace']}/{meta['name']}/{meta['name']}-{(app.get('spec') or {}).get('environment')}"


def workload(children: Sequence[Mapping[str, Any]], live: Mapping[tuple[str, str], Mapping[str, Any]],
             pods: Sequence[Mapping[str, Any]], scoped_out: bool = False,
             unlistened: Mapping[str, str] | None = None) -> Workload:
    """The desired children (ResourceClaims apart), their live objects by (kind, name) and the app's pods: Failed
    when a child failed or a container cannot run (the first by pod name, and how many more; `scoped_out` as for
    pod_failures) or a hostname of the app has no listener (`unlistened`: by hostname, `gateway-full` or
    `namespace-full`, lifecycle.listeners' marks),
    InProgress while a child is not current, else Current."""
    states = [(obj, child_state(live.get(_key(obj)))) for obj in children]
    deployment = next((live.get(_key(o)) for o in children if o.get("kind") == "Deployment"), None)
    image = None
    for container in ((deployment or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []):
        image = container.get("image")
        break
    fields = (replicas(deployment), url(children), image_digest(pods, image))
    failures = pod_failures(pods, scoped_out)
    failed = [s for _, s in states if s.state == FAILED]
    if failures:
        more = len(failures) - 1
        extra = f" (and {more} more pod{'s' if more != 1 else ''})" if more else ""
        return Workload(FAILED, failures[0].reason, failures[0].describe() + extra, *fields)
    if unlistened:
        host, mark = next(iter(sorted(unlistened.items())))
        why = ("its namespace holds its share of the public Gateways' listeners (the oldest hostnames keep theirs): "
               "another of its apps gives one up, or the platform team raises the share" if mark == "namespace-full"
               else "every public Gateway is full (64 listeners each, as many Gateways as the operator may make; "
               "the oldest hostnames keep theirs): the platform team makes room or allows more Gateways")
        others = f" (and {len(unlistened) - 1} more)" if len(unlistened) > 1 else ""
        return Workload(FAILED, LISTENER_UNAVAILABLE, f"hostname {host}{others} has no listener: {why}; it comes once "
                        "there is room", *fields)
    if failed:
        return Workload(FAILED, failed[0].reason, failed[0].message, *fields)
    waiting = [(obj, s) for obj, s in states if s.state == IN_PROGRESS]
    if waiting:
        obj, state = waiting[0]
        message = state.message if live.get(_key(obj)) is not None else f"{obj['kind']} {obj['metadata']['name']}: " \
                                                                         f"{state.message}"
        pending = _unscheduled(pods) if obj.get("kind") == "Deployment" else None
        return Workload(IN_PROGRESS, state.reason, f"{message}; {pending}" if pending else message, *fields)
    available = next((s.message for obj, s in states if obj.get("kind") == "Deployment"), "")
    return Workload(CURRENT, "Available", available, *fields)
