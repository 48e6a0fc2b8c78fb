"""The gate's baseline that outlives its Application: an ApplicationBaseline per (namespace, app, environment) in
the operator's namespace, not owned by the Application (the garbage collector never takes it), written by the
operator only. Which baseline a pass gates against: the record, else status.lastAppliedSpec (Applications applied
before records existed, or whose record a person forgot while they still run), else none (a first deployment)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from lifecycle.crd import BASELINE
from lifecycle.trust import foreign_writers, untrusted

__all__ = ["Memory", "identity", "record", "record_name", "remembered"]


class Memory(NamedTuple):
    """What the gate compares with: the effective spec last applied and the plan that apply carried out."""

    spec: Mapping[str, Any] | None
    applied_plan: str | None
    source: str  # "record", "status" or "none": for the status message and the logs


def identity(app: Mapping[str, Any]) -> tuple[str, str, str]:
    """(namespace, app, environment): the deployment an Application object stands for, whichever object it is."""
    meta, spec = app["metadata"], app.get("spec") or {}
    return str(meta["namespace"]), str(meta["name"]), str(spec.get("environment") or "")


def record_name(namespace: str, app: str, environment: str) -> str:
    """`<namespace>.<app>.<environment>`: DNS labels joined by dots, so no two deployments share one."""
    return f"{namespace}.{app}.{environment}"


def record(app: Mapping[str, Any], spec: Mapping[str, Any], applied_plan: str | None,
           records_namespace: str) -> dict[str, Any]:
    """The ApplicationBaseline the operator applies once `spec` is applied for `app`."""
    namespace, name, environment = identity(app)
    body: dict[str, Any] = {"application": {"namespace": namespace, "name": name, "environment": environment,
                                            "uid": app["metadata"]["uid"]},
                            "effectiveSpec": dict(spec)}
    if applied_plan:
        body["appliedMigrationPlan"] = applied_plan
    return {"apiVersion": BASELINE.api_version, "kind": BASELINE.kind,
            "metadata": {"name": record_name(namespace, name, environment), "namespace": records_namespace},
            "spec": body}


def _from_record(obj: Mapping[str, Any], app: Mapping[str, Any], field_manager: str) -> Memory | str:
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    foreign = foreign_writers(obj, "effectiveSpec", field_manager, part="spec") + \
        foreign_writers(obj, "appliedMigrationPlan", field_manager, part="spec")
    if foreign:
        return f"ApplicationBaseline {obj['metadata']['name']} was written by {', '.join(sorted(set(foreign)))}, " \
               "not by the operator"
    if tuple((spec.get("application") or {}).get(k) for k in ("namespace", "name", "environment")) != identity(app):
        return f"ApplicationBaseline {obj['metadata']['name']} names another deployment"
    effective = spec.get("effectiveSpec")
    if not isinstance(effective, Mapping):
        return f"ApplicationBaseline {obj['metadata']['name']}: spec.effectiveSpec is not a mapping"
    plan = spec.get("appliedMigrationPlan")
    return Memory(effective, plan if isinstance(plan, str) and plan else None, "record")


def remembered(app: Mapping[str, Any], found: Mapping[str, Any] | None, *, field_manager: str,
               status_manager: str) -> Memory | str:
    """The baseline of this pass, or why none can be trusted (fail closed: nothing is applied on it). `found` is the
    deployment's ApplicationBaseline (None when there is none); the record outranks the status, which may be gone
    (a new object) or older (a crash between the record and the status write)."""
    why = untrusted(app, "lastAppliedSpec", status_manager)
    if why:  # a status someone else wrote is tampering, whatever the record says: fail closed
        return why
    if found is not None:
        return _from_record(found, app, field_manager)
    status = app.get("status") if isinstance(app.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    spec = status.get("lastAppliedSpec")
    if spec is None:
        return Memory(None, None, "none")
    plan = status.get("appliedMigrationPlan")
    return Memory(spec, plan if isinstance(plan, str) else None, "status")
