"""The registry side of image updates (lifecycle.image_digest): for each followed container whose look is due, the
tag's digest asked of its registry with the pull secrets the app's pods get (the SourceCredentials' derived
dockerconfigjson Secrets in its namespace), one bounded request in a thread. Everything decided is the core's."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_runtime.client import Kube
from lifecycle import image_digest
from lifecycle.credentials.outputs import pull_secrets_for
from lifecycle.credentials.spec import read as read_credential
from platform_stack.docker_config import DockerConfig
from platform_stack.registry.client import connect
from platform_stack.registry.replies import RegistryFailure
from platform_stack.stack_secrets import docker_config_from_secret
from reconciler.stack_sources import SECRET, in_thread
from renderer.imageref import DOCKER_HUB, normalized
from toolchain.errors import AppRafterError
from toolchain.timestamps import time_now

__all__ = ["DEADLINE", "resolve"]

log = logging.getLogger("apprafter.application")

DEADLINE = 20.0  # seconds for one look (token request included); each request also has its connect/read timeouts
DOCKER_HUB_API = "registry-1.docker.io"  # where docker.io's registry API answers


async def resolve(kube: Kube, app: Mapping[str, Any], children: Sequence[Mapping[str, Any]],
                  credentials: Iterable[Mapping[str, Any]], registries: Sequence[str] = (),
                  insecure: Sequence[str] = ()) -> image_digest.Images:
    """The followed containers of `children` after asking the registry about those due (lifecycle.image_digest);
    `registries`: the hosts the platform lets the operator ask (none: every one); `insecure`: those it asks over
    plain HTTP (besides loopback)."""
    follows = image_digest.followed(children)
    entries = image_digest.previous(app.get("status"))
    now = time.time()
    due = [f for f in follows if image_digest.due(f, entries.get(f.container), now)]
    answers: dict[str, image_digest.Answer] = {}
    if due:
        namespace = app["metadata"]["namespace"]
        readable = [read_credential(c) for c in credentials]
        for follow in due:
            host = _host(follow.image)
            if not image_digest.allowed(host, registries):
                answers[follow.container] = image_digest.not_allowed(host)
                continue
            configs = await _pull_configs(kube, follow.image, namespace, readable)
            answers[follow.container] = await in_thread(functools.partial(ask, follow.image, configs, insecure))
            log.info("image looked up", extra={"controller": "application", "namespace": namespace,
                                               "object": app["metadata"]["name"], "image": follow.image,
                                               "answer": type(answers[follow.container]).__name__})
    return image_digest.resolve(follows, entries, answers, now, time_now())


async def _pull_configs(kube: Kube, image: str, namespace: str, credentials: Sequence[Any]) -> list[DockerConfig]:
    """The logins of the pull secrets the app's pods reference for `image` (a Secret not derived yet, or unreadable,
    is none: the registry is then asked anonymously, and says if it refuses)."""
    out = []
    for name in pull_secrets_for(image, namespace, credentials):
        secret = await kube.get(SECRET, name, namespace)
        if secret is None:
            continue
        try:
            out.append(docker_config_from_secret(secret, f"{namespace}/{name}"))
        except AppRafterError:
            continue
    return out


def _host(image: str) -> str:
    """The registry host the image names (`docker.io` for Docker Hub's short names)."""
    ref = normalized(image)
    return str(ref.domain) if ref is not None and ref.domain is not None else ""


def ask(image: str, configs: Sequence[DockerConfig], insecure: Sequence[str] = ()) -> image_digest.Answer:
    """One look at the registry (blocking), over plain HTTP where lifecycle.image_digest.plain_http says (loopback,
    or an `insecure` pattern), else HTTPS: the tag's digest, its absence, or why there is no answer (the
    registry's own words go to the log only: lifecycle.image_digest.answer)."""
    ref = normalized(image)
    assert ref is not None and ref.domain is not None
    host = DOCKER_HUB_API if ref.domain == DOCKER_HUB else ref.domain
    plain = image_digest.plain_http(ref.domain, insecure)  # the host as the image names it, as the flags do
    client = connect(host, plain, configs, helpers=False, deadline_s=DEADLINE)
    try:
        status, found = client.tag_digest(ref.path, ref.tag or "latest")
    except RegistryFailure as e:
        log.info("image look-up failed", extra={"controller": "application", "image": image, "error": str(e)})
        status, found = None, None
    finally:
        client.close()
    if status not in (200, 404):
        log.info("image look-up refused", extra={"controller": "application", "image": image, "status": status})
    return image_digest.answer(ref.domain, status, found, bool(configs))
