"""A pg claim's two alternating login roles (issue 42 item 2: a rotation with no failed login): which one the app uses,
the alternate's entry, the Job that makes its sessions run as the claim's role, and the retired password. Pure.

PostgreSQL holds one password per role, so a new password on the app's role would refuse the old pods' new
connections until they are replaced. Instead a claim has two login roles per generation (AWS Secrets Manager's
"alternating users"): its role `<name>` (it owns the database and every object) and an alternate `<name>~b`
(ALTERNATE_SUFFIX), a member of `<name>` (CloudNativePG's `inRoles`) with the same connection limit. A rotation gives
the role the app does not use (the standby) a new password, hands it out once CloudNativePG applied it (the old pods
keep logging in as the other role, whose password still works), and only once no pod holds the old one replaces the
old role's password with a new one handed out to no one (RETIRED_ANNOTATION): the old credentials are refused from
then. The next rotation goes back.

Objects made in a session of the alternate must still be `<name>`'s (else the switch back would leave them out of its
reach): the alternate's sessions run as `<name>` (`ALTER ROLE ... SET role`, the per-role default of the `role`
setting; PostgreSQL lets an ordinary role set its own defaults). CloudNativePG's role spec has no per-role settings,
and no client of ours connects to PostgreSQL, so a one-shot Job in the Cluster's namespace, connecting as the
alternate with its own password, sets it (`set_role_job`), and the alternate is handed out only once it succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_runtime.outcomes import Done, Requeue
from lifecycle.backends.common import CLAIM_ANNOTATION, PROVIDER_LABEL
from lifecycle.backends.contract import Waiting
from lifecycle.backends.pg_backup import JOB
from lifecycle.backends.pg_cluster import (
    CLUSTER_LABELS,
    PORT,
    Shared,
    Tenant,
    password_in,
    password_secret_object,
    tenant_of,
)
from lifecycle.conditions import find_condition

__all__ = ["JOB", "RETIRED_ANNOTATION", "alternate_entry", "alternate_of", "job_name", "pair", "retired",
           "retired_secret", "set_role_job", "setting_waits"]

# On a role's password Secret: the rotation request whose completion replaced its password with one handed out to no
# one (the app's old credentials refused from then)
RETIRED_ANNOTATION = "apprafter.io/retired"
ALTERNATE_COMMENT = "apprafter alternate login of claim "  # not CLAIM_COMMENT: its share is its claim's role's
# The alternate's setting, made once (idempotent: a session already running as the owner has it), then checked on a
# new session. The first login may wait for CloudNativePG's reload of the pg_hba (`samerole`).
SET_ROLE = """set -eu
for attempt in $(seq 30); do
  psql -X -w -Atc 'select 1' >/dev/null 2>&1 && break
  [ "$attempt" = 30 ] && { echo "cannot log in as the alternate role"; exit 1; }
  sleep 2
done
if [ "$(psql -X -w -Atc 'select current_user')" != "$OWNER" ]; then
  psql -X -w -v ON_ERROR_STOP=1 -qc "$SQL"
fi
[ "$(psql -X -w -Atc 'select current_user')" = "$OWNER" ] || { echo "its sessions do not run as $OWNER"; exit 1; }
echo "sessions of $PGUSER run as $OWNER"
"""
JOB_SECONDS = 600  # the setting's deadline; past it the Job fails and the claim says so


def alternate_of(claim: Mapping[str, Any], generation: int | None = None) -> Tenant:
    """The alternate login role of the claim's generation (lifecycle.backends.pg_cluster.tenant_of)."""
    return tenant_of(claim, generation, alternate=True)


def retired(secret: Mapping[str, Any] | None) -> str | None:
    """The request whose completion retired a role's password (None: not retired)."""
    value = (((secret or {}).get("metadata") or {}).get("annotations") or {}).get(RETIRED_ANNOTATION)
    return value if isinstance(value, str) and value else None


def pair(owner: Tenant, alternate: Tenant, given: Mapping[str, str] | None,
         secrets: Mapping[str, Mapping[str, Any] | None]) -> tuple[Tenant, Tenant]:
    """(the role the app uses, the standby): the one the connection Secret names, else (none handed out yet, or
    another generation's) the claim's role unless its password is retired and the alternate's is not."""
    user = (given or {}).get("user")
    if user == alternate.name:
        return alternate, owner
    if user == owner.name:
        return owner, alternate
    alternate_secret = secrets.get(alternate.name)
    if retired(secrets.get(owner.name)) and password_in(alternate_secret, alternate) and not retired(alternate_secret):
        return alternate, owner
    return owner, alternate


def alternate_entry(alternate: Tenant, owner: Tenant) -> dict[str, Any]:
    """The alternate's entry in the Cluster's spec.managed.roles: a login role, its own password Secret, the claim's
    connection limit, a member of the claim's role (inherit: CloudNativePG's default), no other attribute."""
    return {"name": alternate.name, "ensure": "present", "login": True,
            "passwordSecret": {"name": alternate.object_name}, "connectionLimit": owner.connection_limit,
            "inRoles": [owner.name], "comment": f"{ALTERNATE_COMMENT}{owner.claim}"}


def retired_secret(shared: Shared, role: Tenant, password: str, request: str) -> dict[str, Any]:
    """A role's password Secret with a new password no connection Secret will hold, marked with the request whose
    completion retired the old one."""
    obj = password_secret_object(shared, role, password)
    obj["metadata"]["annotations"][RETIRED_ANNOTATION] = request
    return obj


def job_name(alternate: Tenant) -> str:
    return f"{alternate.object_name}-set-role"


def set_role_job(shared: Shared, alternate: Tenant, owner: Tenant, secret: Mapping[str, Any]) -> dict[str, Any]:
    """The Job that makes every session of the alternate run as the claim's role: it logs in as the alternate (its
    password from its Secret) to the claim's database and runs `ALTER ROLE SESSION_USER SET role`. Owned by the
    alternate's password Secret: it goes with it (the alternate's drop)."""
    meta = secret.get("metadata") or {}
    quoted = owner.name.replace("'", "''")
    env = [{"name": "PGHOST", "value": shared.host}, {"name": "PGPORT", "value": str(PORT)},
           {"name": "PGUSER", "value": alternate.name}, {"name": "PGDATABASE", "value": owner.name},
           {"name": "PGCONNECT_TIMEOUT", "value": "10"}, {"name": "OWNER", "value": owner.name},
           {"name": "SQL", "value": f"ALTER ROLE SESSION_USER SET role = '{quoted}'"},
           {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": alternate.object_name, "key": "password"}}},
           {"name": "HOME", "value": "/tmp"}]
    locked = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
              "runAsUser": 26, "runAsGroup": 26, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}
    resources = {"cpu": "100m", "memory": "64Mi"}
    labels = {**CLUSTER_LABELS, PROVIDER_LABEL: shared.provider}  # watched: its end wakes the claim
    pod = {"metadata": {"labels": {PROVIDER_LABEL: shared.provider}},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
                    "containers": [{"name": "set-role", "image": shared.image, "command": ["sh", "-c", SET_ROLE],
                                    "env": env, "resources": {"requests": resources, "limits": resources},
                                    "securityContext": locked, "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}],
                    "volumes": [{"name": "tmp", "emptyDir": {}}]}}
    owner_ref = {"apiVersion": "v1", "kind": "Secret", "name": alternate.object_name, "uid": meta.get("uid"),
                 "blockOwnerDeletion": False}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name(alternate), "namespace": shared.namespace, "labels": labels,
                         "annotations": {CLAIM_ANNOTATION: owner.claim}, "ownerReferences": [owner_ref]},
            "spec": {"backoffLimit": 2, "activeDeadlineSeconds": JOB_SECONDS, "template": pod}}


def setting_waits(shared: Shared, alternate: Tenant, job: Mapping[str, Any] | None) -> Waiting | None:
    """Why the alternate's sessions may not run as the claim's role yet (None: the Job succeeded)."""
    what = f"Job {shared.namespace}/{job_name(alternate)}"
    if job is None:
        return Waiting("RoleNotReady", f"{what} is being created", Requeue(f"{what} being created"))
    status = job.get("status") or {}
    if int(status.get("succeeded") or 0) >= 1:
        return None
    failed = find_condition(status.get("conditions"), "Failed") or {}
    if failed.get("status") == "True":
        return Waiting("BackendRefused", f"{what} failed to make role {alternate.name}'s sessions run as the claim's "
                       f"role ({failed.get('reason') or 'Failed'}: its pod's log says why); delete the Job to retry",
                       Done())
    said = f"{what} makes role {alternate.name}'s sessions run as the claim's role"
    return Waiting("RoleNotReady", said, Requeue(said))
