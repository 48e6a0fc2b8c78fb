"""The one claim reconciler, the edge: binds each ResourceClaim to a ServiceProvider and has its backend provision it.

It reads the claim fresh and the cluster's ServiceProviders, asks lifecycle.binding which provider the claim is bound
to, and, when a registered backend (lifecycle.backends.registry) serves that provider, carries out the backend core's
steps (reconciler.claim_steps) and writes the claim's status once as the operator's status field manager:
status.provider and Bound, plus Ready, status.ready and status.connection. Another backend's claims get provider and
Bound alone. It owns what every backend shares: the finalizer lifecycle.retention.FINALIZER (set before anything is
provisioned; controller_runtime.finalizers), the connection Secret, the retries (the core's typed Waiting.retry), and
on deletion the retention verdict, the core's drop and the DataDropped / DataRetained / DataDropWaiting events; a
claim's restore request (reconciler.restore, lifecycle.restore) before its backend's steps, status.restore kept
through every pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compatibility.authority import PLAN_DROP_PREFIX
from compatibility.crd import MIGRATION_PLAN
from controller_runtime.client import ALL_NAMESPACES
from controller_runtime.errors import KubeError
from controller_runtime.finalizers import add_finalizer, has_finalizer, remove_finalizer
from controller_runtime.informer import Informer
from controller_runtime.kinds import GroupVersionKind, KindLike
from controller_runtime.manager import Runtime, Watch
from controller_runtime.objects import Key, itself, key_of
from controller_runtime.outcomes import Done, Outcome, Requeue
from controller_runtime.writes import write_status
from lifecycle import retention
from lifecycle.backends.common import CLAIM_ANNOTATION, PROVIDER_LABEL
from lifecycle.backends.contract import Backend, Ready, Site, Waiting
from lifecycle.backends.instance import SECRET
from lifecycle.backends.kept import KEPT_FOR_ANOTHER, KEPT_LABELS
from lifecycle.backends.registry import REGISTERED, Registration, registration
from lifecycle.binding import PROVISIONED, bind, status_of
from lifecycle.conditions import Condition
from lifecycle.generation_drop import PLAN_LABELS as DROP_PLAN_LABELS
from lifecycle.generation_drop import notes as drop_notes
from lifecycle.restore import PLAN_LABELS as RESTORE_PLAN_LABELS
from lifecycle.restore import notes as restore_notes
from lifecycle.rotation import concerned
from lifecycle.rotation import notes as rotation_notes
from lifecycle.rotation import status as rotation_status
from lifecycle.service_provider import SERVICE_PROVIDER, check
from reconciler import generation_drop, kept_data, restore
from reconciler.backends.registry import Client, client_for
from reconciler.claim_steps import Carried, carry_out
from reconciler.status import record
from renderer.crds import RESOURCE_CLAIM
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL
from toolchain.timestamps import time_now

__all__ = ["ClaimController"]

log = logging.getLogger("apprafter.claims")

CLUSTER = (ALL_NAMESPACES,)
POD = GroupVersionKind("v1", "Pod")
MANAGED = {MANAGED_BY_LABEL: MANAGED_BY}  # the apps' pods (the Application controller watches the same)


def _provisioned(claim: Mapping[str, Any], carried: Carried,
                 timestamp: str) -> tuple[list[Condition], dict[str, Any]]:
    """The backend's conditions and status fields for where the claim stands, its rotation's with them."""
    then = carried.then
    ready = isinstance(then, Ready)
    rotation = rotation_status(claim, carried.rotation, then.rotated if isinstance(then, Ready) else None, ready,
                               timestamp, then.refused if isinstance(then, Ready) else True)
    rotated = {"rotation": rotation} if rotation is not None else {}
    if isinstance(then, Ready):
        said = then.message + (f"; connection in Secret {carried.secret}" if carried.secret else "")
        connection = {**then.connection, **({"secretName": carried.secret} if carried.secret else {})}
        return ([Condition(PROVISIONED, "True", "Provisioned", said), *then.conditions],
                {"ready": True, "connection": connection, **rotated})
    return ([Condition(PROVISIONED, "False", then.reason, then.message), *then.conditions],
            {"ready": False, **then.fields, **rotated})


class ClaimController:
    """Binds every ResourceClaim of the watched namespaces to one ServiceProvider, and provisions it through the
    registered backend that serves it (docs/platform-services.md)."""

    name = "claims"
    primary: KindLike = RESOURCE_CLAIM
    namespaces: tuple[str, ...] = ()  # the operator's --namespace list

    def __init__(self, sites: Mapping[str, Site]) -> None:
        """`sites`: by backend, where its shared servers run and from which image (a registered backend without a
        site runs in the namespace its provider names, or is not provisioned: bound only)."""
        self.runtime: Runtime | None = None
        self.sites = dict(sites)
        self.clients: dict[str, Client | None] = {}

    def served(self) -> list[Registration]:
        return [r for r in REGISTERED if r.core.backend in self.sites]

    def watches(self) -> Sequence[Watch]:
        watches = [Watch(RESOURCE_CLAIM, {}, itself), Watch(SERVICE_PROVIDER, {}, self.claims_of, CLUSTER),
                   Watch(SECRET, KEPT_LABELS, self.claims_of_object, CLUSTER),  # a record deleted: claimed anew
                   Watch(POD, MANAGED, self.claims_of_pod),  # an old pod gone: its rotation may complete
                   Watch(MIGRATION_PLAN, RESTORE_PLAN_LABELS, self.claims_of_object),  # a restore's plan approved
                   Watch(MIGRATION_PLAN, DROP_PLAN_LABELS, self.claims_of_object)]  # a kept generation's drop's
        for served in self.served():
            site = self.sites[served.core.backend]
            watches.extend(Watch(w.kind, w.labels, self.claims_of_object, (site.namespace,) if w.site else ())
                           for w in served.watches)
        return watches

    def bind(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.clients = {r.core.backend: client_for(r.core.backend) for r in self.served()}

    def claims(self) -> Informer:
        assert self.runtime is not None
        return self.runtime.informer(RESOURCE_CLAIM)

    def pods(self) -> Informer:
        assert self.runtime is not None
        return self.runtime.informer(POD, MANAGED)

    def claims_of_pod(self, pod: Mapping[str, Any]) -> Iterable[Key]:
        """The claims whose rotation a pod's change may complete (lifecycle.rotation.concerned)."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        return concerned(self.claims().items(namespace), pod)

    def providers(self) -> Informer:
        assert self.runtime is not None
        return self.runtime.informer(SERVICE_PROVIDER, {}, CLUSTER)

    def claims_of(self, provider: Mapping[str, Any]) -> Iterable[Key]:
        """The claims a change of this provider may concern: those of its type, and those bound to it."""
        kind = (provider.get("spec") or {}).get("type")
        name = provider["metadata"]["name"]
        return sorted(key_of(c) for c in self.claims().items()
                      if (c.get("spec") or {}).get("type") == kind or (c.get("status") or {}).get("provider") == name)

    def claims_of_object(self, obj: Mapping[str, Any]) -> Iterable[Key]:
        """The claims a backend's object concerns: the one it names (annotation `<ns>/<claim>`, or a label naming a
        claim of its namespace), else those bound to the provider it serves."""
        meta = obj.get("metadata") or {}
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        named = str(annotations.get(CLAIM_ANNOTATION) or "")
        if "/" in named:
            namespace, name = named.split("/", 1)
            return [(namespace, name)]
        if labels.get(CLAIM_ANNOTATION):
            return [(str(meta.get("namespace") or ""), str(labels[CLAIM_ANNOTATION]))]
        provider = labels.get(PROVIDER_LABEL)
        return sorted(key_of(c) for c in self.claims().items() if (c.get("status") or {}).get("provider") == provider)

    def _served(self, claim: Mapping[str, Any], provider: Mapping[str, Any] | None) -> Registration | None:
        kind = str((claim.get("spec") or {}).get("type") or "")
        backend = (provider.get("spec") or {}).get("backend") if provider is not None else None
        found = registration(kind, str(backend) if provider is not None else None)
        return found if found is not None and found.core.backend in self.sites else None

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        assert self.runtime is not None
        kube = self.runtime.kube
        # Fresh: a binding is decided on the claim as it is, never on a cached one that has not seen it bound yet.
        claim = await kube.get(RESOURCE_CLAIM, name, namespace)
        if claim is None or (claim["metadata"].get("deletionTimestamp")
                             and not has_finalizer(claim, retention.FINALIZER)):
            self.claims().forget(namespace, name)
            return Done()
        if claim["metadata"].get("deletionTimestamp"):
            return await self.release(claim)
        binding = bind(claim, self.providers().items())
        provider = self.providers().get("", binding.provider) if binding.provider else None
        served = self._served(claim, provider) if binding.condition.status == "True" else None
        provisioned: tuple[list[Condition], dict[str, Any]] | None = None
        retry: Requeue | Done = Done()
        before = claim
        restored = (claim.get("status") or {}).get("restore")  # kept through every pass: the generation it is at
        if served is not None:
            assert provider is not None
            core = served.core
            config = core.configure(provider, self.sites[core.backend])
            if isinstance(config, list):
                carried = _invalid(provider, config)
            else:
                # before any data exists: its deletion waits for the backend
                claim = before = await add_finalizer(kube, self.claims(), claim, retention.FINALIZER)
                # a restore request first (lifecycle.restore): once it switches, the backend provisions the claim
                # at its new generation in this same pass
                done = await restore.carry(kube, claim, config)
                if done is not None:
                    claim, restored = done.claim, done.status
                # a kept generation's drop (lifecycle.generation_drop): never the generation provisioned below
                dropped = await generation_drop.carry(kube, claim, config)
                if dropped is not None:
                    restored = dropped.status
                    claim = {**claim, "status": {**(claim.get("status") or {}), "restore": dropped.status}}
                found = await carry_out(kube, core, self.clients.get(core.backend), claim, config,
                                        provider["metadata"]["name"], pods=self.pods().items(namespace))
                assert found is not None  # None only when dropping
                carried = found
                if done is not None:
                    retry = done.retry
                if dropped is not None and isinstance(dropped.retry, Requeue) and not isinstance(retry, Requeue):
                    retry = dropped.retry
            provisioned = _provisioned(claim, carried, time_now())
            retry = carried.then.retry if not isinstance(carried.then, Ready) else retry
        elif provider is not None and binding.condition.status == "True":
            refused = [f"{field}: {problem}" for field, problem in check(provider)]
            if refused:  # written before the webhook refused its backend: no core will ever serve it, said so
                provisioned = _provisioned(claim, _invalid(provider, refused), time_now())
        wanted = status_of(binding, claim, time_now(), provisioned)
        if isinstance(restored, Mapping):
            wanted["restore"] = dict(restored)
        written = await write_status(kube, self.claims(), before, wanted)
        for note in [*rotation_notes(written, (before.get("status") or {}).get("rotation"),
                                     (written.get("status") or {}).get("rotation")),
                     *restore_notes(written, (before.get("status") or {}).get("restore"),
                                    (written.get("status") or {}).get("restore")),
                     *drop_notes(written, (before.get("status") or {}).get("restore"),
                                 (written.get("status") or {}).get("restore"))]:
            await record(self.runtime.recorder, written, note)
        if written is not before:
            log.info("binding", extra={"controller": "claims", "namespace": namespace, "object": name,
                                       "provider": binding.provider or "", "reason": binding.condition.reason,
                                       **({"ready": provisioned[0][0].reason} if provisioned else {})})
        return retry

    async def release(self, claim: dict[str, Any]) -> Outcome:
        """A deleted claim that carries the finalizer: its data dropped by its backend when lifecycle.retention says
        it may go (retried while the backend cannot), else left where it is; then the finalizer removed."""
        assert self.runtime is not None
        meta = claim["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        mark = str((meta.get("annotations") or {}).get(retention.DROP_ANNOTATION) or "")
        plan = None
        if mark.startswith(PLAN_DROP_PREFIX):
            plan = await self.runtime.kube.get(MIGRATION_PLAN, mark[len(PLAN_DROP_PREFIX):], namespace)
        verdict = retention.verdict(claim, plan)
        where = {"controller": "claims", "namespace": namespace, "object": name}
        if verdict.drop:
            foreign = await self._foreign(claim)
            if foreign is not None:  # nothing of the data kept under its name was ever this claim's
                verdict = retention.Verdict(False, f"{verdict.why}, but {foreign}")
        if verdict.drop:
            waits = await self._drop(claim)
            if waits is not None:
                await self.runtime.recorder.event(claim, "DataDropWaiting", f"{verdict.why}; the data is not dropped "
                                                  f"yet: {waits}", meta["uid"] + waits, type_="Warning")
                log.warning("data drop waits", extra={**where, "reason": waits})
                return Requeue(waits)
            await self.runtime.recorder.event(claim, "DataDropped", f"the claim's data was dropped: {verdict.why}",
                                              meta["uid"], type_="Warning")
        else:
            await self.runtime.recorder.event(claim, "DataRetained", verdict.why, meta["uid"])
        log.info("released", extra={**where, "dropped": verdict.drop, "reason": verdict.why})
        try:
            await remove_finalizer(self.runtime.kube, None, claim, retention.FINALIZER)
        except KubeError as e:
            if e.code != 404:  # gone already: someone removed the finalizer meanwhile
                raise
        self.claims().forget(namespace, name)
        return Done()

    async def _foreign(self, claim: Mapping[str, Any]) -> str | None:
        """Why the data kept under the claim's name is another namespace's (None: it is not, or nothing says)."""
        assert self.runtime is not None
        found = self._resolved(claim)
        if isinstance(found, str):
            return None
        core, config, _ = found
        refused = await kept_data.refusal(self.runtime.kube, core, claim, config, record=False)
        return refused.message if refused is not None and refused.reason == KEPT_FOR_ANOTHER else None

    async def _drop(self, claim: Mapping[str, Any]) -> str | None:
        """Drop the claim's data through its backend's core, then its record; None once it is gone, else why not
        yet."""
        assert self.runtime is not None
        found = self._resolved(claim)
        if isinstance(found, str):
            return found
        core, config, bound = found
        carried = await carry_out(self.runtime.kube, core, self.clients.get(core.backend), claim, config, bound,
                                  dropping=True)
        if carried is None:
            await kept_data.forget(self.runtime.kube, core, claim, config)
            return None
        return carried.then.message if not isinstance(carried.then, Ready) else "the backend did not drop it"

    def _resolved(self, claim: Mapping[str, Any]) -> tuple[Backend, Any, str] | str:
        """A deleted claim's backend core, its provider's config and the provider's name; else why there is none."""
        bound = str((claim.get("status") or {}).get("provider") or "")
        provider = self.providers().get("", bound) if bound else None
        served = self._served(claim, provider)
        if served is None:
            return "no backend of the operator's serves it"
        core = served.core
        if provider is None:
            if core.drop_needs_provider:
                return (f"its ServiceProvider {bound or '(none)'} is gone: nothing says where its data is (create the "
                        "provider again)")
            provider = {"metadata": {"name": bound}, "spec": {"type": core.type, "backend": core.backend}}
        config = core.configure(provider, self.sites[core.backend])
        if isinstance(config, list):
            return f"ServiceProvider {bound}: " + "; ".join(config)
        return core, config, bound


def _invalid(provider: Mapping[str, Any], problems: list[str]) -> Carried:
    return Carried(Waiting("InvalidConfig", f"ServiceProvider {provider['metadata']['name']}: " + "; ".join(problems)))
