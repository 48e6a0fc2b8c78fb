"""Leader election on a coordination.k8s.io/v1 Lease, the way client-go does it.

Expiry is judged by when *we* last saw the lease change (our clock), not by renewTime (the holder's
clock), so clock skew between replicas cannot make two leaders. The leader gives up (and the process
exits) when it cannot renew within the renew deadline, which is shorter than the lease duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import time
from typing import Any

from controller_runtime.client import Kube
from controller_runtime.errors import KubeError
from controller_runtime.kinds import GroupVersionKind
from toolchain.timestamps import micro_time

__all__ = ["LEASE", "LeaderElector", "LeaseSettings", "default_identity"]

LEASE = GroupVersionKind("coordination.k8s.io/v1", "Lease")


def default_identity() -> str:
    """POD_NAME (set from the downward API), else hostname_pid."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


@dataclasses.dataclass
class LeaseSettings:
    """Spec §4.5: renew every 10 s, expire after 30 s; the renew deadline (20 s) stays below the expiry."""

    namespace: str
    name: str  # the program's (one Lease per program that elects a leader)
    identity: str = dataclasses.field(default_factory=default_identity)
    lease_duration: float = 30.0
    renew_deadline: float = 20.0
    retry_period: float = 10.0


class LeaderElector:
    """Acquire, renew and release one Lease."""

    def __init__(self, kube: Kube, settings: LeaseSettings) -> None:
        self.kube = kube
        self.settings = settings
        self.log = kube.telemetry.logger("lease")
        self.leader = kube.telemetry.metrics.leader
        self.leading = False
        self.standing_by = False  # another replica holds the lease (as opposed to: the API cannot be reached)
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.leader.labels(settings.identity).set(0)

    async def _try(self) -> bool:
        """One attempt to take or renew the lease; False when another replica holds a live one."""
        lease = await self.kube.get(LEASE, self.settings.name, self.settings.namespace)
        now = micro_time()
        spec: dict[str, Any] = {"holderIdentity": self.settings.identity,
                                "leaseDurationSeconds": max(1, round(self.settings.lease_duration)),
                                "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
        if lease is None:
            await self.kube.create({"apiVersion": LEASE.api_version, "kind": LEASE.kind, "spec": spec,
                                    "metadata": {"name": self.settings.name, "namespace": self.settings.namespace}})
            return True
        old = lease.get("spec") or {}
        record = (old.get("holderIdentity"), old.get("renewTime"), old.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        holder = old.get("holderIdentity")
        duration = float(old.get("leaseDurationSeconds") or self.settings.lease_duration)
        if holder and holder != self.settings.identity and time.monotonic() < self._observed_at + duration:
            return False
        transitions = int(old.get("leaseTransitions") or 0)
        if holder == self.settings.identity:
            spec["acquireTime"] = old.get("acquireTime") or now
            spec["leaseTransitions"] = transitions
        else:
            spec["leaseTransitions"] = transitions + 1
        updated = await self.kube.replace({**lease, "spec": spec})  # 409 if someone else wrote it meanwhile
        spec_now = updated.get("spec") or {}
        self._observed = (spec_now.get("holderIdentity"), spec_now.get("renewTime"), spec_now.get("leaseTransitions"))
        self._observed_at = time.monotonic()
        return True

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Stand by until this replica leads (True) or `stop` is set (False)."""
        announced = False
        while not stop.is_set():
            try:
                if await self._try():
                    self._lead(True)
                    return True
                self.standing_by = True
                if not announced:
                    self.log.info("standing by: another replica leads", extra={"lease": self.settings.name,
                                                                         "identity": self.settings.identity})
                    announced = True
            except KubeError as e:
                self.standing_by = False
                self.log.warning("lease not acquired", extra={"lease": self.settings.name, "error": str(e)})
            await _wait(stop, self.settings.retry_period)
        return False

    async def keep(self, stop: asyncio.Event) -> None:
        """Renew every retry period until `stop`; return early when leadership is lost (renew deadline passed)."""
        last = time.monotonic()
        while not stop.is_set():
            await _wait(stop, self.settings.retry_period if time.monotonic() - last < self.settings.retry_period else 0)
            if stop.is_set():
                return
            try:
                # a renewal that hangs (etcd gone, a silent connection) must not outlive the renew deadline: past
                # it the others may take the lease, and two replicas would lead
                left = max(0.1, self.settings.renew_deadline - (time.monotonic() - last))
                async with asyncio.timeout(left):
                    renewed = await self._try()
                if renewed:
                    last = time.monotonic()
                    continue
                self.log.error("lost the lease to another replica", extra={"lease": self.settings.name})
                self._lead(False)
                return
            except KubeError as e:
                self.log.warning("lease renewal failed", extra={"lease": self.settings.name, "error": str(e)})
            except TimeoutError:
                self.log.warning("lease renewal: no answer within the renew deadline",
                                 extra={"lease": self.settings.name})
            if time.monotonic() - last > self.settings.renew_deadline:
                self.log.error("could not renew the lease within the renew deadline: stepping down",
                          extra={"lease": self.settings.name, "renew_deadline": self.settings.renew_deadline})
                self._lead(False)
                return
            await _wait(stop, min(1.0, self.settings.retry_period))

    async def release(self) -> None:
        """On a clean stop: hand the lease back so a standby takes over at once instead of after expiry."""
        if not self.leading:
            return
        try:
            lease = await self.kube.get(LEASE, self.settings.name, self.settings.namespace)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.settings.identity:
                spec = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": micro_time()}
                await self.kube.replace({**lease, "spec": spec})
        except KubeError as e:
            self.log.warning("lease not released", extra={"lease": self.settings.name, "error": str(e)})
        self._lead(False)

    def _lead(self, leading: bool) -> None:
        self.leading = leading
        self.standing_by = False
        self.leader.labels(self.settings.identity).set(1 if leading else 0)
        if leading:
            self.log.info("leading", extra={"lease": self.settings.name, "identity": self.settings.identity})


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    if seconds <= 0:
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
