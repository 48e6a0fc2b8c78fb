"""Private images on shared nodes: a container whose image lies under a registry host some SourceCredential covers
pulls it every time (imagePullPolicy: Always), so the kubelet asks the registry with the pod's own credentials and a
node's image cache never runs another team's private image in a pod without them (issue 34: a covered pod pulled it
onto the node, an uncovered namespace's pod then ran it from the cache). Whose namespace the credential serves does
not matter: the uncovered pod is the one that must pull. Public images keep the kubelet's default."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from lifecycle.credentials.coverage import coverage_of, covers_image
from lifecycle.credentials.spec import read

__all__ = ["private_hosts", "pull_always"]


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
