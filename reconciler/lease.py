"""Leader election on a coordination.k8s.io/v1 Lease, the way client-go does it.

Expiry is judged by when *we* last saw the lease change (our clock), not by renewTime (the holder's
clock), so clock skew between replicas cannot make two leaders. The leader gives up (and the process
exits) when it cannot renew within the renew deadline, which is shorter than the lease duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import os
import socket
import time
from typing import Any

from prometheus_client import Gauge

from reconciler.kube import LEASE_KIND, Kube, KubeError

log = logging.getLogger("apprafter.lease")
LEADER = Gauge("apprafter_leader", "1 while this replica holds the leader lease", ["identity"])


def default_identity() -> str:
    """POD_NAME (set from the downward API), else hostname_pid."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


def _micro_time() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass
class LeaseSettings:
    """Spec §4.5: renew every 10 s, expire after 30 s; the renew deadline (20 s) stays below the expiry."""

    namespace: str
    name: str = "apprafter-operator"
    identity: str = dataclasses.field(default_factory=default_identity)
    lease_duration: float = 30.0
    renew_deadline: float = 20.0
    retry_period: float = 10.0


class LeaderElector:
    """Acquire, renew and release one Lease."""

    def __init__(self, kube: Kube, settings: LeaseSettings) -> None:
        self.kube = kube
        self.s = settings
        self.leading = False
        self.standing_by = False  # another replica holds the lease (as opposed to: the API cannot be reached)
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        LEADER.labels(settings.identity).set(0)

    async def _try(self) -> bool:
        """One attempt to take or renew the lease; False when another replica holds a live one."""
        lease = await self.kube.get(LEASE_KIND, self.s.name, self.s.namespace)
        now = _micro_time()
        spec: dict[str, Any] = {"holderIdentity": self.s.identity,
                                "leaseDurationSeconds": max(1, round(self.s.lease_duration)),
                                "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
        if lease is None:
            await self.kube.create({"apiVersion": LEASE_KIND.api_version, "kind": "Lease",
                                    "metadata": {"name": self.s.name, "namespace": self.s.namespace}, "spec": spec})
            return True
        old = lease.get("spec") or {}
        record = (old.get("holderIdentity"), old.get("renewTime"), old.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        holder = old.get("holderIdentity")
        duration = float(old.get("leaseDurationSeconds") or self.s.lease_duration)
        if holder and holder != self.s.identity and time.monotonic() < self._observed_at + duration:
            return False
        transitions = int(old.get("leaseTransitions") or 0)
        if holder == self.s.identity:
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
                    log.info("standing by: another replica leads", extra={"lease": self.s.name,
                                                                         "identity": self.s.identity})
                    announced = True
            except KubeError as e:
                self.standing_by = False
                log.warning("lease not acquired", extra={"lease": self.s.name, "error": str(e)})
            await _wait(stop, self.s.retry_period)
        return False

    async def keep(self, stop: asyncio.Event) -> None:
        """Renew every retry period until `stop`; return early when leadership is lost (renew deadline passed)."""
        last = time.monotonic()
        while not stop.is_set():
            await _wait(stop, self.s.retry_period if time.monotonic() - last < self.s.retry_period else 0)
            if stop.is_set():
                return
            try:
                if await self._try():
                    last = time.monotonic()
                    continue
                log.error("lost the lease to another replica", extra={"lease": self.s.name})
                self._lead(False)
                return
            except KubeError as e:
                log.warning("lease renewal failed", extra={"lease": self.s.name, "error": str(e)})
            if time.monotonic() - last > self.s.renew_deadline:
                log.error("could not renew the lease within the renew deadline: stepping down",
                          extra={"lease": self.s.name, "renew_deadline": self.s.renew_deadline})
                self._lead(False)
                return
            await _wait(stop, min(1.0, self.s.retry_period))

    async def release(self) -> None:
        """On a clean stop: hand the lease back so a standby takes over at once instead of after expiry."""
        if not self.leading:
            return
        try:
            lease = await self.kube.get(LEASE_KIND, self.s.name, self.s.namespace)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.s.identity:
                spec = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": _micro_time()}
                await self.kube.replace({**lease, "spec": spec})
        except KubeError as e:
            log.warning("lease not released", extra={"lease": self.s.name, "error": str(e)})
        self._lead(False)

    def _lead(self, leading: bool) -> None:
        self.leading = leading
        self.standing_by = False
        LEADER.labels(self.s.identity).set(1 if leading else 0)
        if leading:
            log.info("leading", extra={"lease": self.s.name, "identity": self.s.identity})


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    if seconds <= 0:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
