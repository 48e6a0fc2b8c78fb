"""What the PlatformStack controller reads outside the object: the Secrets with its keys and its registry login,
and one check of the chart repository (blocking I/O, run in a thread)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from controller_runtime.client import Kube
from controller_runtime.kinds import GroupVersionKind
from platform_stack.check_result import Baseline, Check, Finding
from platform_stack.docker_config import DockerConfig
from platform_stack.errors import StackError
from platform_stack.resource import NAMESPACE, StackSpec
from platform_stack.stack_secrets import PublicKeys, docker_config_from_secret, keys_from_secret
from platform_stack.upstream import Upstream, check, upstream_news
from toolchain.errors import AppRafterError

__all__ = ["SECRET", "in_thread", "look", "read_credentials", "read_keys"]

SECRET = GroupVersionKind("v1", "Secret")
T = TypeVar("T")


async def in_thread(call: Callable[[], T]) -> T:
    """Blocking I/O (registry requests, cosign) in a daemon thread: the event loop keeps beating and renewing the
    Lease, and SIGTERM never waits for a check to end (every request and cosign run is bounded anyway)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: tuple[bool, Any]) -> None:
        if not future.done():
            if outcome[0]:
                future.set_result(outcome[1])
            else:
                future.set_exception(outcome[1])

    def run() -> None:
        try:
            outcome: tuple[bool, Any] = (True, call())
        except BaseException as e:  # handed to the awaiting coroutine, which reports it
            outcome = (False, e)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the process is stopping
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=run, name="platformstack-check", daemon=True).start()
    return await future


def look(upstream: Upstream, spec: StackSpec, baseline: Baseline | None, keys: PublicKeys,
         configs: Sequence[DockerConfig], kube_version: str) -> Check:
    """The blocking part (run in a thread): the repository, the running version's repository if it moved, and a
    fork's upstream (its tags only: what it offers is reported, never applied)."""
    session = upstream.open(spec.repository, spec.insecure, configs)
    running = None
    if baseline is not None and baseline.repository != session.repository:
        running = upstream.open(baseline.repository, spec.insecure, configs)
    result = check(session, keys, channel=spec.channel, pin=spec.pin, auto_upgrade=spec.auto_upgrade,
                   tier=spec.values.get("tier"), overrides=spec.overrides, baseline=baseline,
                   kube_version=kube_version, running=running)
    if spec.upstream is None:
        return result
    return dataclasses.replace(result, upstream=upstream_news(upstream, spec.upstream, spec.insecure, configs,
                                                              spec.channel))


async def _secret(kube: Kube, name: str, field: str, reason: str) -> dict[str, Any] | Finding:
    found = await kube.get(SECRET, name, NAMESPACE)
    return found if found is not None else Finding(reason, f"Secret {NAMESPACE}/{name} ({field}) not found",
                                                   retryable=True)


async def read_keys(kube: Kube, spec: StackSpec) -> PublicKeys | Finding:
    """The cosign public keys of spec.verify.secretRef, or why there are none."""
    if spec.keys is None:
        return Finding("NotConfigured", "spec.verify is not set: nothing is applied without a verified digest "
                       "(set spec.verify.secretRef to a Secret holding the release's cosign public keys, *.pub)",
                       retryable=False)
    secret = await _secret(kube, spec.keys, "spec.verify.secretRef", "KeysUnavailable")
    if isinstance(secret, Finding):
        return secret
    try:
        return keys_from_secret(secret, f"{NAMESPACE}/{spec.keys}")
    except StackError as e:
        return Finding("KeysUnavailable", "; ".join(e.lines()), retryable=True)  # the Secret's fix is no spec change


async def read_credentials(kube: Kube, spec: StackSpec) -> list[DockerConfig] | Finding:
    """The registry login of spec.source.secretRef (none when unset), or why it cannot be read."""
    if spec.credentials is None:
        return []
    secret = await _secret(kube, spec.credentials, "spec.source.secretRef", "CredentialsUnavailable")
    if isinstance(secret, Finding):
        return secret
    try:
        return [docker_config_from_secret(secret, f"{NAMESPACE}/{spec.credentials}")]
    except AppRafterError as e:
        return Finding("CredentialsUnavailable", "; ".join(e.lines()), retryable=True)  # as for the keys
