"""Who may write what (spec §3.8 S-2): automation writes status and plans, humans approve.

The MigrationPlan phase machine lives here once: the admission webhook checks a status write against it
(with the writer's identity), and the CRD carries CEL rules generated from the same table, so the API
server holds the transitions by itself when the webhook is down.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from renderer.crds import SchemaPatch, cel

PENDING, APPROVED, REJECTED, APPLIED, SUPERSEDED = "pending-approval", "approved", "rejected", "applied", "superseded"
PHASES = (PENDING, APPROVED, REJECTED, APPLIED, SUPERSEDED)
# phase -> the phases it may be reached from (None: the plan has no phase yet). Staying put is always allowed.
REACHABLE_FROM: dict[str, frozenset[str | None]] = {
    PENDING: frozenset({None, PENDING}),
    APPROVED: frozenset({PENDING, APPROVED}),
    REJECTED: frozenset({PENDING, REJECTED}),
    APPLIED: frozenset({APPROVED, APPLIED}),
    SUPERSEDED: frozenset({None, PENDING, APPROVED, SUPERSEDED}),
}
# A person decides these; the operator never may (whoever can write a manifest cannot approve its change).
HUMAN_PHASES = frozenset({APPROVED, REJECTED})
# Only platform-scope plans can be rejected: an application change is undone by a git revert.
PLATFORM_ONLY = frozenset({REJECTED})
# Written by the mutating webhook from the approver's identity, once; nobody edits them afterwards.
STAMP_FIELDS = ("approvedBy", "approvedAt")
SPEC_IMMUTABLE = ("is immutable: the operator writes a plan once; a different change gets a new plan "
                  "(approval is bound to spec.trigger.approvedSpecHash)")


def _phase(status: Mapping[str, Any] | None) -> str | None:
    value = (status or {}).get("phase")
    return value if isinstance(value, str) else None


def _sources(phase: str) -> str:
    """The phases `phase` may be reached from, in words."""
    names = sorted(p for p in REACHABLE_FROM[phase] if p and p != phase)
    return " or ".join([*names, *(["none (a new plan)"] if None in REACHABLE_FROM[phase] else [])])


def person_may_set(phase: str | None, target: str, scope: str | None) -> str | None:
    """Why a person may not move a plan from `phase` to `target` now (None when they may, or it already is there):
    the same table the webhook and the CRD's CEL rules hold, so `apprafter migration approve|reject` refuses
    before the cluster would."""
    verb = {APPROVED: "approve", REJECTED: "reject"}.get(target, f"set {target} on")
    if target not in HUMAN_PHASES:
        return f"a person may set {' or '.join(sorted(HUMAN_PHASES))} only; {target!r} is the operator's"
    if target in PLATFORM_ONLY and scope != "platform":
        if scope == "credential":
            return ("a credential-scope plan has no reject: put the coverage back; the operator then supersedes the "
                    "plan and what the credential derived stays as it is")
        return ("an application-scope plan has no reject: revert the change in git; the operator then supersedes "
                "the plan and the application is Ready again")
    if phase == target or phase in REACHABLE_FROM[target]:
        return None
    sources = " or ".join(sorted(p for p in REACHABLE_FROM[target] if p and p != target))
    return f"cannot {verb} a plan in phase {phase or '<none>'}: only a {sources} plan can be {target}"


def status_writer(kind: str, user: str, operator_user: str) -> str | None:
    """Why `user` may not write the status of a `kind` object (None when it may): the operator's alone."""
    if user == operator_user:
        return None
    return (f"only the operator ({operator_user}) may write {kind} status; {user!r} may not "
            "(the status is the gate's baseline, spec §3.8)")


def claim_status_writer(user: str, providers: tuple[str, ...]) -> str | None:
    """Why `user` may not write a ResourceClaim's status (None when it may): the providers' alone, as an
    Application's is the operator's (a claim marked ready is what lets its Application deploy, spec §3.3)."""
    if user in providers:
        return None
    return (f"only the claim's provider ({', '.join(providers)}) may write ResourceClaim status; {user!r} may not "
            "(a claim marked ready lets its Application deploy with the connection Secret the provider wrote)")


GROUP_PREFIX = "group:"  # a provider writer that is a group, not a username


def provider_writer(user: str, groups: tuple[str, ...], writers: tuple[str, ...]) -> str | None:
    """Why `user` (in `groups`) may not write a ServiceProvider (None when it may): a provider decides where the data
    of every claim it binds lives, so only the platform's writers do (usernames, `group:NAME` for a group); none
    named: whoever RBAC lets (cluster-scoped: a tenant's RoleBinding never reaches it)."""
    users = {writer for writer in writers if not writer.startswith(GROUP_PREFIX)}
    if not writers or user in users or any(f"{GROUP_PREFIX}{group}" in writers for group in groups):
        return None
    return (f"only the platform's provider writers ({', '.join(writers)}) may write ServiceProviders; {user!r} may "
            "not (a provider decides where the data of every claim it binds lives)")


# A ResourceClaim's request that its backend drop the claim's data when it is deleted (lifecycle.retention): written
# by the operator as `MigrationPlan/<name>` just before it prunes a claim under that approved data-migration plan, or
# by a cluster administrator as `admin` (the documented admin act). Nobody else may add, change or remove it.
DROP_ANNOTATION = "apprafter.io/drop-data"
ADMIN_DROP = "admin"
PLAN_DROP_PREFIX = "MigrationPlan/"
ADMIN_GROUP = "system:masters"  # a cluster administrator: the group the API server's superuser certificates carry


def drop_data_writer(old: str | None, new: str | None, user: str, groups: tuple[str, ...],
                     operator_user: str) -> str | None:
    """Why `user` may not change a claim's DROP_ANNOTATION from `old` to `new` (None when it may, or it is
    unchanged): `MigrationPlan/<name>` is the operator's (it prunes under the approved plan), `admin` and its
    removal a cluster administrator's (group system:masters)."""
    if old == new:
        return None
    if user == operator_user and (new or "").startswith(PLAN_DROP_PREFIX) and not old:
        return None
    if ADMIN_GROUP in groups and new in (ADMIN_DROP, None):
        return None
    return (f"{DROP_ANNOTATION} drops the claim's backend data when it is deleted: only the operator "
            f"({operator_user}) writes {PLAN_DROP_PREFIX}<plan> (under an approved data-migration plan), and only a "
            f"cluster administrator ({ADMIN_GROUP}) writes {ADMIN_DROP!r} or removes it; {user!r} may not")


# A ResourceClaim's request for new credentials (lifecycle.rotation): a new value, written by a person of the app's
# team (`apprafter db rotate`), has the operator make a new password, roll the app's pods onto it and refuse the old.
ROTATE_ANNOTATION = "apprafter.io/rotate"
ROTATE_REQUEST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,62}")
ROTATED_TYPES = ("pg", "redis")  # the need types whose backend rotates a claim's password (lifecycle.rotation: how)


def rotate_writer(old: str | None, new: str | None, kind: str, user: str, operator_user: str) -> str | None:
    """Why `user` may not change the ROTATE_ANNOTATION of a claim of type `kind` from `old` to `new` (None when they
    may, or it is unchanged or withdrawn): whoever RBAC lets write the claim in its namespace, the app's team (a
    rotation touches that claim's credentials alone: no data, nothing of another namespace's), with a value of the
    request's form, on a claim whose password rotates; never the operator (a rotation is a person's act, on record
    as their write)."""
    if old == new or new is None:
        return None
    if user == operator_user:
        return (f"{ROTATE_ANNOTATION} asks for new credentials: a person of the app's team writes it (`apprafter db "
                f"rotate`), never the operator ({operator_user})")
    if not ROTATE_REQUEST.fullmatch(new):
        return (f"{new[:70]!r} is not a rotation request: 1 to 63 letters, digits, '.', '_', ':' or '-', the first a "
                "letter or digit (`apprafter db rotate` writes one)")
    if kind not in ROTATED_TYPES:
        return (f"a claim of type {kind or '(none)'} has no password the operator rotates (it rotates those of "
                f"{', '.join(ROTATED_TYPES)})")
    return None


# A ResourceClaim's request for a point-in-time restore (lifecycle.restore): `<request>@<UTC time, RFC 3339>`,
# written by a person of the app's team (`apprafter db restore`); the operator opens a data-migration MigrationPlan for
# it and restores into a new database only once a person approves that plan.
RESTORE_ANNOTATION = "apprafter.io/restore"
RESTORE_REQUEST = re.compile(r"(?P<id>[A-Za-z0-9][A-Za-z0-9._:-]{0,62})@(?P<to>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:"
                             r"[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z)")
RESTORED_TYPES = ("pg",)  # the need types whose backend restores to a point in time (lifecycle.restore: how)


def restore_writer(old: str | None, new: str | None, kind: str, user: str, operator_user: str) -> str | None:
    """Why `user` may not change the RESTORE_ANNOTATION of a claim of type `kind` from `old` to `new` (None when they
    may, or it is unchanged or withdrawn): whoever RBAC lets write the claim in its namespace (the app's team: the
    request only opens a plan, the restore waits for a person's approval of it, and it reaches that claim's data
    alone), with a value of the request's form, on a claim whose backend restores; never the operator."""
    if old == new or new is None:
        return None
    if user == operator_user:
        return (f"{RESTORE_ANNOTATION} asks for a restore: a person of the app's team writes it (`apprafter db "
                f"restore`), never the operator ({operator_user})")
    if not RESTORE_REQUEST.fullmatch(new):
        return (f"{new[:90]!r} is not a restore request: <request>@<time> (the request 1 to 63 letters, digits, '.', "
                "'_', ':' or '-'; the time UTC, 2026-05-09T07:30:00Z or 2026-05-09T07:30:00.25Z; `apprafter db "
                "restore` writes one)")
    if kind not in RESTORED_TYPES:
        return (f"a claim of type {kind or '(none)'} has no point-in-time restore (restored: "
                f"{', '.join(RESTORED_TYPES)})")
    return None


# A ResourceClaim's request to drop one generation its restores kept (lifecycle.generation_drop): `<request>@<N>`,
# written by a person of the app's team (`apprafter db drop-generation`); the operator opens a data-migration
# MigrationPlan for it and drops that generation's database and role only once a person approves that plan.
DROP_GENERATION_ANNOTATION = "apprafter.io/drop-generation"
DROP_GENERATION_REQUEST = re.compile(r"(?P<id>[A-Za-z0-9][A-Za-z0-9._:-]{0,62})@(?P<generation>[1-9][0-9]{0,5})")


def drop_generation_writer(old: str | None, new: str | None, kind: str, user: str,
                           operator_user: str) -> str | None:
    """Why `user` may not change the DROP_GENERATION_ANNOTATION of a claim of type `kind` from `old` to `new` (None
    when they may, or it is unchanged or withdrawn): as restore_writer (the request only opens a plan, and reaches
    that claim's data alone); which generation may go is lifecycle.generation_drop.refusal's."""
    if old == new or new is None:
        return None
    if user == operator_user:
        return (f"{DROP_GENERATION_ANNOTATION} asks for a kept generation to be dropped: a person of the app's team "
                f"writes it (`apprafter db drop-generation`), never the operator ({operator_user})")
    if not DROP_GENERATION_REQUEST.fullmatch(new):
        return (f"{new[:90]!r} is not a request to drop a generation: <request>@<generation> (the request 1 to 63 "
                "letters, digits, '.', '_', ':' or '-'; the generation a number from 1; `apprafter db drop-generation` "
                "writes one)")
    if kind not in RESTORED_TYPES:
        return (f"a claim of type {kind or '(none)'} has no generations (restored: {', '.join(RESTORED_TYPES)})")
    return None


def record_writer(kind: str, user: str, operator_user: str) -> str | None:
    """Why `user` may not write an operator's record (ApplicationBaseline, PublicHostname; None when it may): they
    are the operator's memory, written by it alone (a person forgets a baseline by deleting it, RBAC's to allow)."""
    if user == operator_user:
        return None
    return (f"only the operator ({operator_user}) writes {kind}s; {user!r} may not (the gate's baselines and the "
            "holders of public hostnames are the operator's records)")


def plan_create(user: str, operator_user: str) -> str | None:
    """Why `user` may not create a MigrationPlan (None when it may): the operator writes plans."""
    if user == operator_user:
        return None
    return (f"only the operator ({operator_user}) creates MigrationPlans; {user!r} may not "
            "(a plan is the operator's record of a gated change)")


def plan_spec_change(old_spec: Any, new_spec: Any) -> str | None:
    """Why a plan's spec may not change this way (None when unchanged)."""
    return None if old_spec == new_spec else SPEC_IMMUTABLE


def plan_phase_change(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, scope: str | None,
                      user: str, operator_user: str) -> list[tuple[str, str]]:
    """Every (status field, reason) that makes this status write by `user` unacceptable.

    The phase moves only along REACHABLE_FROM; approved/rejected are set by a person, every other phase
    by the operator; rejected only on platform scope; the approval stamp is written once, by the
    mutating webhook, for the user who approved; other status fields belong to the operator.
    """
    problems: list[tuple[str, str]] = []
    before, after = _phase(old), _phase(new)
    old, new = old or {}, new or {}
    is_operator = user == operator_user
    if before is not None and after is None:
        problems.append(("status.phase", f"cannot be removed (it is {before!r})"))
    if after is not None and after != before:
        if before not in REACHABLE_FROM.get(after, frozenset()):
            problems.append(("status.phase", f"may become {after!r} only from {_sources(after)}, not from "
                             f"{before or 'none'!r}"))
        if after in HUMAN_PHASES and is_operator:
            problems.append(("status.phase", f"{user!r} is the operator and may not set {after!r}: automation "
                             "writes, humans approve (spec §3.8 S-2)"))
        if after not in HUMAN_PHASES and not is_operator:
            problems.append(("status.phase", f"only the operator ({operator_user}) sets {after!r}; {user!r} may "
                             f"set {' or '.join(sorted(HUMAN_PHASES))} only"))
        if after in PLATFORM_ONLY and scope != "platform":
            problems.append(("status.phase", f"{after!r} is only for platform-scope plans; an application change is "
                             "undone by reverting it in git"))
    if after == APPROVED and before != APPROVED:
        if new.get("approvedBy") != user or not new.get("approvedAt"):
            problems.append(("status.approvedBy", f"an approval records its approver: expected {user!r} and a time, "
                             "stamped by the mutating webhook (is it registered?)"))
    else:
        problems += [(f"status.{field}", "is stamped by the admission webhook when a person approves, and never "
                      "changes afterwards") for field in STAMP_FIELDS if new.get(field) != old.get(field)]
    if not is_operator:
        for field in sorted(set(old) | set(new)):
            if field != "phase" and field not in STAMP_FIELDS and old.get(field) != new.get(field):
                problems.append((f"status.{field}", f"belongs to the operator ({operator_user}); {user!r} may "
                                 "only set status.phase"))
    return problems


def approval_stamp(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, user: str,
                   now: str) -> dict[str, str]:
    """The fields to stamp on a status write that approves a plan (empty when it does not approve)."""
    if _phase(new) == APPROVED and _phase(old) != APPROVED:
        return {"approvedBy": user, "approvedAt": now}
    return {}


# --- the same rules as CEL on the CRD (root-level rules see spec and status; oldSelf = the stored object) --

def _old_phase_in(phases: frozenset[str | None]) -> str:
    named = ", ".join(f"'{p}'" for p in sorted(p for p in phases if p))
    known = f"has(oldSelf.status) && has(oldSelf.status.phase) && oldSelf.status.phase in [{named}]"
    if None in phases:
        return f"!has(oldSelf.status) || !has(oldSelf.status.phase) || ({known})"
    return f"({known})"


def _new_phase_is(phase: str) -> str:
    return f"has(self.status) && has(self.status.phase) && self.status.phase == '{phase}'"


def migration_plan_cel() -> tuple[SchemaPatch, ...]:
    """The CEL rules of the MigrationPlan CRD, generated from the tables above."""
    rules = [cel(("spec",), "self == oldSelf", f"spec {SPEC_IMMUTABLE}", "FieldValueForbidden")]
    for phase in PHASES:
        rules.append(cel((), f"!({_new_phase_is(phase)}) || {_old_phase_in(REACHABLE_FROM[phase])}",
                         f"status.phase may become {phase} only from {_sources(phase)}", "FieldValueForbidden"))
    rules.append(cel((), "!has(oldSelf.status) || !has(oldSelf.status.phase) || "
                     "(has(self.status) && has(self.status.phase))", "status.phase cannot be removed",
                     "FieldValueForbidden"))
    for phase in sorted(PLATFORM_ONLY):
        rules.append(cel((), f"!({_new_phase_is(phase)}) || self.spec.scope.type == 'platform'",
                         f"status.phase {phase} is only for platform-scope plans", "FieldValueInvalid"))
    for field in STAMP_FIELDS:
        rules.append(cel((), f"!has(oldSelf.status) || !has(oldSelf.status.{field}) || (has(self.status) && "
                         f"has(self.status.{field}) && self.status.{field} == oldSelf.status.{field})",
                         f"status.{field} never changes once stamped", "FieldValueForbidden"))
    return tuple(rules)
