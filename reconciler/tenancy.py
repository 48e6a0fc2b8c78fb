"""The edge of the tenancy rules (lifecycle.ownership, .secrets, .hostname_policy, .hostnames, .tenancy) for one
Application pass: reads the namespace's Applications, the metadata of the Secrets it names, what the cluster holds
under each child's name, the HostnamePolicies, the routes and the hostname records; calls the cores; writes only the
hostname records (create first: the API server decides who was first)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from controller_runtime.client import Kube
from controller_runtime.informer import Informer
from controller_runtime.kinds import GroupVersionKind, KindLike, gvk_of
from controller_runtime.writes import create_once, delete_exactly
from lifecycle import hostname_policy, hostnames, secrets, tenancy
from lifecycle.application import Desired, Refusal
from lifecycle.baseline import identity, record_name
from lifecycle.crd import BASELINE, HOSTNAME_POLICY, PUBLIC_HOSTNAME
from lifecycle.ownership import INSTANCE_INDEX, Verdict, conflicts, control, instance_holder, instance_of
from renderer.context import PlatformContext
from renderer.crds import APPLICATION
from renderer.manifests import HTTPROUTE

__all__ = ["Tenancy"]

SECRET = GroupVersionKind("v1", "Secret")


class Caches(Protocol):
    """What the Application controller offers the tenancy checks."""

    records_namespace: str
    context: PlatformContext

    def cache(self, kind: KindLike) -> Informer: ...

    def cluster(self, kind: KindLike) -> Informer: ...

    def records(self, kind: KindLike) -> Informer: ...


class Tenancy:
    """One pass's tenancy checks; `verdicts` says, per child (kind, name), how it may be applied."""

    def __init__(self, controller: Caches, kube: Kube, app: Mapping[str, Any]) -> None:
        self.controller = controller
        self.kube = kube
        self.app = app
        self.namespace = str(app["metadata"]["namespace"])
        self.verdicts: dict[tuple[str, str], Verdict] = {}

    async def refusal(self, desired: Desired) -> Refusal | None:
        """Why this pass may apply nothing, or None (then every child's verdict is known)."""
        holder = instance_holder(self.app, self.controller.cache(APPLICATION).indexed(INSTANCE_INDEX,
                                                                                     instance_of(self.app)))
        if holder is not None:
            return tenancy.name_conflict(self.app, holder)
        target = desired.decision.target
        found = {name: await self.kube.metadata(SECRET, name, self.namespace) for name in secrets.references(target)}
        why = secrets.refused(self.app["metadata"]["name"], self.namespace, target, found,
                              sealed=tuple((self.app.get("spec") or {}).get("sealedSecrets") or ()))
        if why:
            return tenancy.secret_not_granted(why)
        live = {(o["kind"], o["metadata"]["name"]): await self._live(o) for o in desired.objects}
        taken = conflicts(desired.objects, live, self.app)
        if taken:
            return tenancy.child_conflict(self.app, taken)
        self.verdicts = {key: control(obj, self.app).verdict for key, obj in live.items()}
        wanted = hostnames.hostnames(desired.children)
        policies = hostname_policy.read_all(self.controller.cluster(HOSTNAME_POLICY).items())
        meta = self.app["metadata"]
        refused = [why for host in wanted if (why := hostname_policy.refusal(
            host, meta["name"], self.app["spec"]["environment"], self.namespace, self.controller.context, policies))]
        if refused:
            return tenancy.hostname_not_allowed(refused)
        held = [(host, by) for host in wanted if (by := await self._claim(host))]
        if held:
            return tenancy.hostname_conflict(held)
        return None

    def force(self, obj: Mapping[str, Any]) -> bool:
        """Force the apply (take fields from other managers) only onto what this Application controls or was
        handed; a child that did not exist is created without force, so one made meanwhile is a conflict."""
        return self.verdicts.get((obj["kind"], obj["metadata"]["name"]), "ours") != "absent"

    async def _live(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """What the cluster holds under the child's name: the cache has ours (the managed-by label); anything else
        is read (an object someone else made has no label of ours)."""
        kind = gvk_of(obj)
        cached = self.controller.cache(kind).get(self.namespace, obj["metadata"]["name"])
        if cached is not None:
            return cached
        return await self.kube.get(kind, obj["metadata"]["name"], self.namespace)

    async def _claim(self, host: str) -> str:
        """"" when this deployment holds `host` (taking it first if nobody does), else who holds it."""
        records = self.controller.records(PUBLIC_HOSTNAME)
        ns = self.controller.records_namespace
        current = records.get(ns, host)
        if current is None:
            served = self._served_elsewhere(host)
            if served:
                return served
            current = await self._create(hostnames.record(host, self.app, ns), records)
            if current is None:
                return ""
        verdict = hostnames.holding(current, self.app, holder_exists=self._exists(hostnames.holder(current)),
                                    holder_remembered=await self._remembered(hostnames.holder(current)))
        if verdict.verdict == "mine":
            return ""
        if verdict.verdict == "taken":
            return verdict.by
        # stale: its holder has neither an Application nor a baseline; take it over, exactly that record
        served = self._served_elsewhere(host)
        if served:
            return served
        await delete_exactly(self.kube, records, current)
        first = await self._create(hostnames.record(host, self.app, ns), records)
        return "" if first is None else hostnames.holding(first, self.app, holder_exists=True,
                                                           holder_remembered=True).by

    def _served_elsewhere(self, host: str) -> str:
        routes = self.controller.cluster(HTTPROUTE).indexed(hostnames.FOREIGN_ROUTE_INDEX, host)
        return hostnames.served_by(host, routes)

    async def _create(self, obj: dict[str, Any], records: Informer) -> dict[str, Any] | None:
        """Create the record; None when it is ours now, else the record someone else created first."""
        made = await create_once(self.kube, records, obj)
        return None if made.written else made.obj

    def _exists(self, who: tuple[str, str, str]) -> bool:
        namespace, name, _ = who
        found = self.controller.cache(APPLICATION).get(namespace, name)
        return found is not None and identity(found) == who

    async def _remembered(self, who: tuple[str, str, str]) -> bool:
        name, ns = record_name(*who), self.controller.records_namespace
        return (self.controller.records(BASELINE).get(ns, name)
                or await self.kube.get(BASELINE, name, ns)) is not None

    async def release(self, desired: Desired) -> None:
        """Give back the hostnames this deployment holds that its applied render no longer has."""
        records = self.controller.records(PUBLIC_HOSTNAME)
        ns = self.controller.records_namespace
        mine = records.indexed(hostnames.HOLDER_INDEX, hostnames.records_key(self.app))
        for host in hostnames.released(mine, self.app, hostnames.hostnames(desired.children)):
            current = records.get(ns, host)
            if current is not None:
                await delete_exactly(self.kube, records, current)  # that record: one taken since stays
