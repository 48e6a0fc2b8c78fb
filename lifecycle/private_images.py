"""Private images on shared nodes: a container whose image lies under a registry host some SourceCredential covers
pulls it every time (imagePullPolicy: Always), so the kubelet asks the registry with the pod's own credentials and a
node's image cache never runs another team's private image in a pod without them (issue 34: a covered pod pulled it
onto the node, an uncovered namespace's pod then ran it from the cache). Whose namespace the credential serves does
not matter: the uncovered pod is the one that must pull. Public images keep the kubelet's default.

The pull secrets serving the app's image are in its Deployment from the first apply (co-owned with the credential
controller's attachment: the list is keyed by name), and the Deployment waits until they exist: the first pod pulls
with them, and a followed tag's first look at the registry logs in with them (else the tag ran, then its digest)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lifecycle.credentials.checks import INVALID
from lifecycle.credentials.coverage import (
    applied_coverage,
    as_applied,
    coverage_of,
    covers_image,
    deployment_image,
    serves_now,
)
from lifecycle.credentials.outputs import FINALIZER, attached, pull_secret_name, pull_secrets_for
from lifecycle.credentials.reports import NOT_PRESENT, reported
from lifecycle.credentials.spec import Credential, read

__all__ = ["private_hosts", "pull_always", "pull_secrets_awaited", "with_pull_secrets"]


def private_hosts(credentials: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """Every registry host key (host[/path]) a SourceCredential's registry half covers, whichever namespaces it
    serves."""
    return tuple(sorted({key for c in credentials for key in coverage_of(read(c)).registry or ()}))


def pull_always(children: Iterable[Mapping[str, Any]], hosts: Iterable[str]) -> list[dict[str, Any]]:
    """`children` with imagePullPolicy Always on each Deployment container whose image is private (the rest as they
    are, copied only where changed)."""
    keys = tuple(hosts)
    out: list[dict[str, Any]] = []
    for child in children:
        pod = ((child.get("spec") or {}).get("template") or {}).get("spec") or {}
        private = [c for c in (*pod.get("initContainers", []), *pod.get("containers", []))
                   if isinstance(c.get("image"), str) and covers_image(keys, c["image"])]
        if child.get("kind") != "Deployment" or not keys or not private:
            out.append(dict(child))
            continue
        changed = copy.deepcopy(dict(child))
        spec = changed["spec"]["template"]["spec"]
        for container in (*spec.get("initContainers", []), *spec.get("containers", [])):
            if isinstance(container.get("image"), str) and covers_image(keys, container["image"]):
                container["imagePullPolicy"] = "Always"
        out.append(changed)
    return out


def with_pull_secrets(children: Iterable[Mapping[str, Any]], credentials: Iterable[Mapping[str, Any]]
                      ) -> list[dict[str, Any]]:
    """`children` with each Deployment listing the pull secrets the SourceCredentials give its app container's image
    in its namespace (lifecycle.credentials.outputs.pull_secrets_for: the same list the credential controller
    attaches), as listed_by_apps says they serve."""
    serving_now = listed_by_apps(credentials)
    out: list[dict[str, Any]] = []
    for child in children:
        names = pull_secrets_for(deployment_image(child), str(child["metadata"].get("namespace") or ""),
                                 serving_now) if child.get("kind") == "Deployment" else []
        if not names:
            out.append(dict(child))
            continue
        changed = copy.deepcopy(dict(child))
        changed["spec"]["template"]["spec"]["imagePullSecrets"] = [{"name": n} for n in names]
        out.append(changed)
    return out


def _judging(obj: Mapping[str, Any]) -> bool:
    """Whether the credential controller has yet to carry out what this SourceCredential's object asks: a generation
    its status has not observed, or a deletion its finalizer still holds."""
    meta, status = obj["metadata"], obj.get("status") or {}
    return status.get("observedGeneration") != meta.get("generation") or bool(
        meta.get("deletionTimestamp") and FINALIZER in (meta.get("finalizers") or []))


def listed_by_apps(credentials: Iterable[Mapping[str, Any]]) -> list[Credential]:
    """What an Application's own apply lists of each SourceCredential: what it serves now (serves_now), but never less
    than the credential controller keeps attached: while that controller has yet to judge a change or a deletion,
    what it last applied. The Deployment's list is keyed by name and an entry the app's apply alone owns goes when
    the apply drops it, so the app never takes a pull secret away before the controller that detaches it does
    (a narrowing or a deletion may wait for a plan)."""
    out = []
    for obj in credentials:
        applied = applied_coverage(obj.get("status"))
        if applied is not None and _judging(obj):
            out.append(as_applied(read(obj), applied))
        elif (now := serves_now(obj)) is not None:
            out.append(now)
    return out


def pull_secrets_awaited(children: Iterable[Mapping[str, Any]], credentials: Iterable[Mapping[str, Any]],
                         present: Callable[[str], bool]) -> list[str]:
    """The pull secrets the Deployments list (with_pull_secrets) that are not in the namespace yet, from credentials
    that will derive them: not those whose registry material is missing or was refused (their status says so, and
    the Application's SourceCredentialValid condition names them), nor those of a credential being deleted."""
    failing = {pull_secret_name(c["metadata"]["name"]) for c in credentials
               if c["metadata"].get("deletionTimestamp")
               or any(r.half == "registry" and r.state in (NOT_PRESENT, INVALID) for r in reported(c))}
    listed = {name for child in children if child.get("kind") == "Deployment" for name in attached(child)}
    return sorted(n for n in listed if n not in failing and not present(n))
