"""Point-in-time restore of a claim's pg database (issue 42 item 1): the request, its MigrationPlan, each step after
approval, status.restore and its Events. Pure.

A person of the app's team writes `apprafter.io/restore: <request>@<time>` on the claim (`apprafter db restore`; who
may: compatibility.authority.restore_writer). The operator opens a data-migration MigrationPlan for it (`plan_object`)
and does nothing else until a person approves that plan. Then, never in place: the tenant's next generation (role and
database `<namespace>.<claim>~N`, lifecycle.backends.pg_cluster.tenant_of) is made on the shared Cluster, a NEW Cluster
is recovered from the provider's object store up to the time (lifecycle.backends.pg_backup.recovery_cluster), a Job
copies the tenant's database alone from it into the new generation (pg_dump | pg_restore, as the two roles), the
recovered Cluster (every tenant's data at that time) is deleted, and status.restore.generation moves: the claim's
connection Secret (the same name) points at the new generation and the app's pods roll (`stamps`). The generation
before stays, listed in status.restore.kept, until the claim's data is dropped (every generation with it).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from compatibility.authority import APPLIED, APPROVED, PENDING, RESTORE_ANNOTATION, RESTORE_REQUEST
from compatibility.classes import DATA_MIGRATION
from controller_runtime.outcomes import Done, Requeue
from lifecycle.backends.common import CLAIM_ANNOTATION, PROVIDER_LABEL, connection_secret_of
from lifecycle.backends.contract import Apply, CreateOnce, Delete, Write
from lifecycle.backends.pg_backup import copy_job, recoverable, recovery_cluster, recovery_name
from lifecycle.backends.pg_cluster import (
    CLUSTER,
    CLUSTER_LABELS,
    SHARES,
    Shared,
    cluster_object,
    database_object,
    generation_of,
    kept,
    password_secret_object,
    readiness,
    reservation,
    role_entry,
    roles_of,
    tenant_of,
)
from lifecycle.claim_plans import claim_plan
from lifecycle.conditions import find_condition
from lifecycle.notes import Note
from lifecycle.rotation import RESTORE_PREFIX as TEMPLATE_PREFIX
from renderer.names import MANAGED_BY, MANAGED_BY_LABEL

__all__ = ["PLAN_LABELS", "RESTORE_ANNOTATION", "TEMPLATE_PREFIX", "Request", "Seen", "Step", "in_flight", "job_name",
           "notes", "outside", "parse_time", "plan_name", "plan_object", "recovered_name", "requested", "restoring",
           "stamp", "step", "superseded", "target_of"]

PLAN_LABELS: Mapping[str, str] = {MANAGED_BY_LABEL: MANAGED_BY, "apprafter.io/scope": "restore"}
RULE = "AR-DM004"  # the restore's change in its MigrationPlan (docs/platform-services.md)
WAIT_SECONDS = 10.0  # how soon a step that waits on CloudNativePG or the Job looks again (their writes wake it sooner)


class Request(NamedTuple):
    """A restore request: its id (a new one asks again) and the time to restore to (UTC, to the second)."""

    id: str
    target: datetime.datetime

    @property
    def at(self) -> str:
        return stamp(self.target)


class Seen(NamedTuple):
    """What the edge read for a step: the shared Cluster, the request's plan, the recovered Cluster, the copy Job,
    the new generation's password Secret and Database, a fresh password for it, the time, and the provider's
    Clusters (the recovered Clusters of other claims' restores among them: `slot_holder`)."""

    cluster: dict[str, Any] | None
    plan: dict[str, Any] | None
    recovery: dict[str, Any] | None
    job: dict[str, Any] | None
    secret: dict[str, Any] | None
    database: dict[str, Any] | None
    fresh: str
    now: datetime.datetime
    clusters: tuple[dict[str, Any], ...] = ()


class Step(NamedTuple):
    """The writes of a step, status.restore after it, whether to read and decide again at once (`again`), what to
    do meanwhile (Requeue: look again later; Done: a watched change wakes it), and the phase to move the plan to."""

    writes: tuple[Write, ...]
    status: dict[str, Any]
    again: bool = False
    retry: Requeue | Done = Done()
    plan_phase: str | None = None


def stamp(moment: datetime.datetime) -> str:
    """A time as the request writes it: UTC, RFC 3339, a fraction of a second only when there is one."""
    moment = moment.astimezone(datetime.UTC)
    fraction = f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else ""
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


RELATIVE = re.compile(r"now(?:-(?:(?P<d>[0-9]+)d)?(?:(?P<h>[0-9]+)h)?(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?)?")


def target_of(text: str, now: datetime.datetime) -> datetime.datetime | None:
    """The time `apprafter db restore --to` names: RFC 3339 (`2026-05-09T07:30:00Z`, an offset, a fraction of a
    second) or `now` less days, hours, minutes, seconds (`now-90m`, `now-1h30m`, `now-2d`); None: neither."""
    found = RELATIVE.fullmatch(text.strip())
    if found and (text.strip() == "now" or any(found.groupdict().values())):
        parts = {key: int(value or 0) for key, value in found.groupdict().items()}
        return now.astimezone(datetime.UTC) - datetime.timedelta(days=parts["d"], hours=parts["h"],
                                                                   minutes=parts["m"], seconds=parts["s"])
    return parse_time(text)


def parse_time(text: str) -> datetime.datetime | None:
    """An RFC 3339 time (`Z` or an offset) as UTC, None when it is not one."""
    try:
        found = datetime.datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        return None
    return found.astimezone(datetime.UTC) if found.tzinfo else None


def requested(claim: Mapping[str, Any]) -> Request | None:
    """The claim's restore request: its annotation, when it has a request's form (the webhook refuses any other)."""
    value = ((claim.get("metadata") or {}).get("annotations") or {}).get(RESTORE_ANNOTATION)
    found = RESTORE_REQUEST.fullmatch(value) if isinstance(value, str) else None
    target = parse_time(found["to"]) if found else None
    return Request(found["id"], target) if found and target else None


def outside(target: datetime.datetime, cluster: Mapping[str, Any] | None, now: datetime.datetime) -> str | None:
    """Why `target` cannot be restored to from the Cluster (None: it can): no backups, nothing restorable yet, or a
    time outside the window from its first recoverable point to its latest (now, while WAL is archived)."""
    found = recoverable(cluster or {}, now)
    if not ((cluster or {}).get("spec") or {}).get("backup"):
        return "no backups are configured for it (its ServiceProvider names no backup destination)"
    first, latest = parse_time(found.first or ""), parse_time(found.latest or "")
    if first is None or latest is None:
        return f"nothing can be restored yet: {found.problem or 'no recoverable point'}"
    if not first <= target <= latest:
        return f"{stamp(target)} is outside what can be restored: from {found.first} to {found.latest}"
    return None


def _digest(claim: Mapping[str, Any], request: Request, chars: int) -> str:
    meta = claim.get("metadata") or {}
    return hashlib.sha256(f"{meta.get('uid')}/{request.id}@{request.at}".encode()).hexdigest()[:chars]


def plan_name(claim: Mapping[str, Any], request: Request) -> str:
    """The request's MigrationPlan: `<claim>-restore-<hash10>` (one per request)."""
    return f"{str(claim['metadata']['name'])[:200]}-restore-{_digest(claim, request, 10)}"


def job_name(claim: Mapping[str, Any], request: Request) -> str:
    """The request's copy Job in the Cluster's namespace (a label value too: at most 63 characters)."""
    return f"restore-{_digest(claim, request, 16)}"


def recovered_name(config: Shared, claim: Mapping[str, Any], request: Request) -> str:
    """The request's recovered Cluster: the shared Cluster's name, the request's hash, the time (at most 50)."""
    return recovery_name(f"{config.name[:24].rstrip('-')}-{_digest(claim, request, 6)}", request.target)


def plan_object(claim: Mapping[str, Any], config: Shared, request: Request, generation: int) -> dict[str, Any]:
    """The data-migration MigrationPlan a person approves for the request, owned by the claim (it goes with it):
    what will happen, step by step, in its spec (which never changes)."""
    meta = claim["metadata"]
    old, new = tenant_of(claim, generation), tenant_of(claim, generation + 1)
    need = f"needs.{(claim.get('spec') or {}).get('type')}"
    secret = connection_secret_of(claim)
    recovered = recovered_name(config, claim, request)
    change = {"rule": RULE, "type": "restore", "field": need, "classification": DATA_MIGRATION,
              "reason": f"the database is restored as it was at {request.at} into a new one; the app switches to it",
              "from": f"generation {generation}: database {old.name}",
              "to": f"generation {generation + 1}: database {new.name}, as database {old.name} was at {request.at}"}
    content = json.dumps([meta.get("uid"), request.id, request.at, generation], sort_keys=True)
    steps = [f"recover a new Cluster {config.namespace}/{recovered} from the object store up to {request.at} (it "
             f"holds every database of Cluster {config.name} then; deleted once copied)",
             f"make role and database {new.name} on Cluster {config.namespace}/{config.name} and copy database "
             f"{old.name} of the recovered Cluster into it (pg_dump | pg_restore: that database alone)",
             f"switch Secret {meta['namespace']}/{secret} to {new.name} and roll the app's pods (writes made since "
             f"{request.at} are not in it)",
             f"keep database {old.name} as it is now, until the claim's data is dropped"]
    trigger = {"type": "restore", "field": need, "to": request.at}
    return claim_plan(claim, plan_name(claim, request), PLAN_LABELS, trigger, change, steps, content,
                      lambda i: i > 1)


def restoring(claim: Mapping[str, Any], request: Request) -> int:
    """The generation the request makes: the one status.restore recorded for it, else the one after the claim's."""
    before = (claim.get("status") or {}).get("restore") or {}
    number = before.get("restoring")
    if before.get("requested") == request.id and isinstance(number, int) and not isinstance(number, bool):
        return number
    return generation_of(claim) + 1


def _phase(status: dict[str, Any], phase: str, message: str) -> dict[str, Any]:
    return {**status, "phase": phase, "message": message}


def step(claim: Mapping[str, Any], config: Shared, request: Request, seen: Seen) -> Step:
    """The next step of the claim's latest restore request (`requested`), from what the edge read."""
    before = dict((claim.get("status") or {}).get("restore") or {})
    live = generation_of(claim)
    if before.get("completed") == request.id:
        return Step((), before)
    number = restoring(claim, request)
    if before.get("requested") == request.id and before.get("phase") == "Failed":
        return Step((), before)
    old, new = tenant_of(claim, live), tenant_of(claim, number)
    plan_of = plan_name(claim, request)
    status = {**{k: before[k] for k in ("completed", "completedAt", "kept", "drop") if k in before},
              "requested": request.id, "target": request.at, "plan": plan_of, "generation": live, "restoring": number}
    where = f"Cluster {config.namespace}/{config.name}"
    phase = str((seen.plan or {}).get("status", {}).get("phase") or "")
    if phase not in (APPROVED, APPLIED):
        if config.backups is None:
            return Step((), _phase(status, "Failed", f"{where} cannot be restored: its ServiceProvider "
                                   f"{config.provider} names no backup destination"))
        why = outside(request.target, seen.cluster, seen.now)
        if why is not None:
            return Step((), _phase(status, "Failed", f"{where}: {why}"))
        if phase not in ("", PENDING):
            return Step((), _phase(status, "Failed", f"MigrationPlan {plan_of} is {phase}: nothing was restored"))
        said = (f"MigrationPlan {plan_of} awaits approval (`apprafter migration approve {plan_of} -n "
                f"{claim['metadata']['namespace']}`): nothing happens before it")
        opened = () if seen.plan is not None else (Apply(plan_object(claim, config, request, live)),)
        return Step(opened, _phase(status, "AwaitingApproval", said), plan_phase=PENDING if phase == "" else None)
    assert config.backups is not None  # checked before approval; the provider's config never loses it unseen
    cluster = seen.cluster
    recovered = recovered_name(config, claim, request)
    holder = slot_holder(claim, seen.clusters) if seen.recovery is None and seen.job is None else None
    if holder is not None:  # a recovered Cluster is a whole copy of every tenant's data: one per provider at a time
        said = (f"waiting for the provider's one restore at a time: Cluster {config.namespace}/{holder[0]} recovers "
                f"for {holder[1]}; this one starts once it is gone")
        return Step((), _phase(status, "Queued", said), retry=Requeue(said, WAIT_SECONDS))
    if seen.secret is None:
        return Step((CreateOnce(password_secret_object(config, new, seen.fresh)),),
                    _phase(status, "Restoring", f"making role {new.name}"), again=True)
    roles = roles_of(cluster)
    if new.name not in roles:
        share = reservation(new, roles, kept(config, cluster)[1])
        if not share.fits:  # the old generation's share stays held: both must fit the Cluster's volume
            said = (f"the new generation's share ({SHARES[new.size]}) does not fit {where}'s volume beside its other "
                    "roles' shares (the claim's current one included): an administrator grows spec.config.storage."
                    f"size of ServiceProvider {config.provider}, or drops retained data")
            return Step((), _phase(status, "Restoring", said))
        roles[new.name] = role_entry(new)
        return Step((Apply(cluster_object(config, roles, cluster)),),
                    _phase(status, "Restoring", f"role {new.name} added to {where}"), again=True)
    writes: list[Write] = []
    if seen.recovery is None:
        source = cluster_object(config, roles, None)
        labels = {**CLUSTER_LABELS, PROVIDER_LABEL: config.provider}
        recovery = recovery_cluster(source, config.backups, recovered, request.target)
        recovery["metadata"]["labels"] = {**recovery["metadata"]["labels"], **labels}
        recovery["metadata"]["annotations"] = recovery_annotations(claim)
        writes.append(Apply(recovery))
    waits = readiness(config, new, cluster, seen.secret, seen.database)
    if seen.database is None and waits is not None and waits.reason == "DatabaseNotReady":
        writes.append(Apply(database_object(config, new)))
    ready = (find_condition(((seen.recovery or {}).get("status") or {}).get("conditions"), "Ready") or {})
    if waits is not None or ready.get("status") != "True":
        said = waits.message if waits is not None else (
            f"Cluster {config.namespace}/{recovered} recovers up to {request.at} from the object store "
            f"({((seen.recovery or {}).get('status') or {}).get('phase') or 'being created'})")
        return Step(tuple(writes), _phase(status, "Restoring", said), retry=Requeue(said, WAIT_SECONDS))
    job = seen.job
    if job is None:
        labels = {**CLUSTER_LABELS, PROVIDER_LABEL: config.provider}
        made = copy_job(job_name(claim, request), config.namespace, config.image, labels,
                        (f"{recovered}-rw.{config.namespace}.svc", old.name, old.object_name),
                        (config.host, new.name, new.object_name))
        made["metadata"]["annotations"] = recovery_annotations(claim)
        return Step((Apply(made),), _phase(status, "Copying", f"Job {config.namespace}/{made['metadata']['name']} "
                                           f"copies database {old.name} as it was at {request.at} into {new.name}"),
                    retry=Requeue("copying", WAIT_SECONDS))
    conditions = (job.get("status") or {}).get("conditions")
    failed = find_condition(conditions, "Failed") or {}
    if failed.get("status") == "True":
        said = failed.get("message") or failed.get("reason") or "failed"
        return Step((Delete(CLUSTER, config.namespace, recovered),), _phase(
            status, "Failed", f"Job {config.namespace}/{job_name(claim, request)} could not copy database "
            f"{old.name}: {said}; the app stays on {old.name} (its log: kubectl -n {config.namespace} logs "
            f"job/{job_name(claim, request)})"))
    if (find_condition(conditions, "Complete") or {}).get("status") != "True":
        return Step((), _phase(status, "Copying", f"Job {config.namespace}/{job_name(claim, request)} copies "
                               f"database {old.name} as it was at {request.at} into {new.name}"),
                    retry=Requeue("copying", WAIT_SECONDS))
    left = sorted({*before.get("kept", []), old.name})
    done = {**status, "generation": number, "completed": request.id, "completedAt": stamp(seen.now.replace(
        microsecond=0)), "kept": left}
    return Step((Delete(CLUSTER, config.namespace, recovered),), _phase(
        done, "Restored", f"database {new.name} holds database {old.name} as it was at {request.at}; Secret "
        f"{claim['metadata']['namespace']}/{connection_secret_of(claim)} points at it and the app's pods roll onto "
        f"it; kept: {', '.join(left)} (dropped with the claim's data)"), plan_phase=APPLIED)


def slot_holder(claim: Mapping[str, Any], clusters: Iterable[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The recovered Cluster (its name, and the claim it recovers for) of another claim's restore among a provider's
    Clusters: while there is one, no other restore of the provider starts (None: the slot is free)."""
    ours = recovery_annotations(claim)[CLAIM_ANNOTATION]
    for found in sorted(clusters, key=lambda c: str((c.get("metadata") or {}).get("name"))):
        meta = found.get("metadata") or {}
        owner = (meta.get("annotations") or {}).get(CLAIM_ANNOTATION)
        if owner and owner != ours and not meta.get("deletionTimestamp"):
            return str(meta["name"]), str(owner)
    return None


def recovery_annotations(claim: Mapping[str, Any]) -> dict[str, str]:
    """The claim an object of its restore is for (its changes wake that claim)."""
    return {CLAIM_ANNOTATION: f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"}


def superseded(plans: Iterable[Mapping[str, Any]], claim: Mapping[str, Any], current: str) -> list[str]:
    """The claim's restore plans an earlier request opened that are still in play (pending, or approved and not
    carried out): a new request supersedes them, so approving one of them never restores anything."""
    meta = claim.get("metadata") or {}
    return sorted(str(p["metadata"]["name"]) for p in plans
                  if (p.get("metadata") or {}).get("namespace") == meta.get("namespace")
                  and ((p.get("metadata") or {}).get("labels") or {}).get(CLAIM_ANNOTATION) == meta.get("name")
                  and p["metadata"]["name"] != current
                  and str((p.get("status") or {}).get("phase") or "") in ("", PENDING, APPROVED))


def in_flight(claim: Mapping[str, Any]) -> bool:
    """Whether the claim has a restore request not completed nor failed yet."""
    request, now = requested(claim), (claim.get("status") or {}).get("restore") or {}
    return request is not None and not (now.get("requested") == request.id
                                        and (now.get("completed") == request.id or now.get("phase") == "Failed"))


def notes(claim: Mapping[str, Any], before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Note]:
    """The Events a status.restore change asks for, each once per request: RestoreRequested (its plan opened),
    RestoreQueued (approved, waiting for the provider's one restore at a time), Restoring (under way), Restored,
    RestoreFailed."""
    before, after = before or {}, after or {}
    asked = after.get("requested")
    if not asked:
        return []
    uid = (claim.get("metadata") or {}).get("uid")
    was = before.get("phase") if before.get("requested") == asked else None
    now = after.get("phase")
    reasons = {"AwaitingApproval": "RestoreRequested", "Queued": "RestoreQueued", "Restoring": "Restoring",
               "Restored": "Restored", "Failed": "RestoreFailed"}
    if now == was or now not in reasons or (now == "Restoring" and was == "Copying"):
        return []
    return [Note(reasons[str(now)], f"restore {asked} to {after.get('target')}: {after.get('message')}",
                 f"{uid}/{asked}/{now}", "Warning" if now == "Failed" else "Normal")]
