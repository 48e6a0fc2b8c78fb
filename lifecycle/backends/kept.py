"""Whose a claim's kept data is (issue 41 item 4): the namespace, by its UID, that it was first provisioned for.

A backend that keeps a claim's data outside the claim's namespace (a pg role and database, a Redis ACL user and its
keys, an s3 bucket) keys it by names: `<namespace>.<claim>`. Names are not identities: a namespace deleted and made
again (by another team) under the same name would get the old one's data back, password and all. So beside the data
the operator keeps a record, a Secret without data in the backend's site namespace, that names the namespace's UID;
a claim from a namespace of another UID gets nothing of it (KeptForAnotherNamespace), and none of it is dropped by
such a claim. An administrator gives it to the namespace now of that name by deleting the record (the next pass
writes it for that namespace), or drops it by the documented admin act. Data kept before these records existed has
none: the first claim that finds it writes the record for its namespace. No I/O: reconciler/kept_data.py reads the
namespace and the record, asks `judge`, and writes what it says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from controller_runtime.outcomes import Done, Requeue
from lifecycle.backends.common import CLAIM_ANNOTATION, claim_ref, tenant_name
from lifecycle.backends.contract import Waiting

__all__ = ["GENERATION", "KEPT_FOR_ANOTHER", "KEPT_LABELS", "NAMESPACE_UID", "RECORD_TYPE", "Judged", "judge",
           "record_name", "record_object", "recorded_generation", "with_generation"]

RECORD_TYPE = "apprafter.io/kept-data"  # the record Secret's type: it holds no data, only whose the data is
NAMESPACE_UID = "apprafter.io/namespace-uid"  # the record's annotation: the UID of the namespace the data is kept for
KEPT_LABELS: Mapping[str, str] = {"app.kubernetes.io/managed-by": "apprafter", "apprafter.io/kept-data": "true"}
# the record's annotation: the generation of the data the claim is at, once a restore moved it past 1
# (lifecycle.restore): a claim made again (its app removed and added) gets the restored data back, not generation 1
GENERATION = "apprafter.io/generation"
KEPT_FOR_ANOTHER = "KeptForAnotherNamespace"  # the claim's reason when the data is another namespace's
PREFIX = "kept."
NAME_MAX = 253  # a Secret's name: a DNS subdomain


class Judged(NamedTuple):
    """What a claim may do with the data kept under its name: `ours` (it is this namespace's, or nobody's yet),
    the record to create when there is none (`record`), or why not (`refused`)."""

    ours: bool
    record: dict[str, Any] | None = None
    refused: Waiting | None = None


def record_name(claim: Mapping[str, Any]) -> str:
    """`kept.<namespace>.<claim>` (hashed past 253 bytes as lifecycle.backends.common.tenant_name does)."""
    return PREFIX + tenant_name(claim, NAME_MAX - len(PREFIX))


def record_object(claim: Mapping[str, Any], where: str, namespace_uid: str) -> dict[str, Any]:
    """The record that the claim's data, kept in namespace `where`, is the namespace of UID `namespace_uid`'s."""
    return {"apiVersion": "v1", "kind": "Secret", "type": RECORD_TYPE,
            "metadata": {"name": record_name(claim), "namespace": where, "labels": dict(KEPT_LABELS),
                         "annotations": {CLAIM_ANNOTATION: claim_ref(claim), NAMESPACE_UID: namespace_uid}}}


def recorded_generation(record: Mapping[str, Any] | None) -> int:
    """The generation a record says the claim's data is at (1: no record, or none recorded)."""
    found = str(((record or {}).get("metadata") or {}).get("annotations", {}).get(GENERATION) or "")
    return int(found) if found.isdigit() and int(found) > 1 else 1


def with_generation(record: Mapping[str, Any], generation: int) -> dict[str, Any]:
    """The record (as record_object makes it, or as it is live) saying the claim's data is at `generation`."""
    meta = record.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k in (CLAIM_ANNOTATION, NAMESPACE_UID)}
    return {"apiVersion": "v1", "kind": "Secret", "type": RECORD_TYPE,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": dict(KEPT_LABELS),
                         "annotations": {**annotations, GENERATION: str(generation)}}}


def kept_for(record: Mapping[str, Any] | None) -> str | None:
    """The UID of the namespace a record keeps the data for (None: no record, or one without a UID)."""
    if record is None:
        return None
    uid = ((record.get("metadata") or {}).get("annotations") or {}).get(NAMESPACE_UID)
    return str(uid) if uid else None


def judge(claim: Mapping[str, Any], namespace: Mapping[str, Any] | None, record: Mapping[str, Any] | None,
          where: str) -> Judged:
    """Whether the data kept under the claim's name (recorded by `record` in namespace `where`) is the claim's
    namespace's (`namespace`: that namespace as the API server has it now)."""
    uid = str(((namespace or {}).get("metadata") or {}).get("uid") or "")
    if not uid:  # the namespace is not there for us to read: nothing is handed out on a guess
        return Judged(False, refused=Waiting("NamespaceUnknown", f"namespace {claim_ref(claim).split('/')[0]} "
                                             "is not there to read: its data is not handed out unseen",
                                             Requeue("namespace not read")))
    owner = kept_for(record)
    if owner is None:
        return Judged(True, record=record_object(claim, where, uid))
    if owner == uid:
        return Judged(True)
    name = (record or {}).get("metadata", {}).get("name")
    return Judged(False, refused=Waiting(
        KEPT_FOR_ANOTHER,
        f"the data kept for {claim_ref(claim)} is a namespace's of that name deleted earlier (uid {owner}), not this "
        f"one's (uid {uid}): none of it is handed over. An administrator gives it to this namespace by deleting "
        f"Secret {where}/{name}, or drops it (docs/platform-services.md \"Data kept for a namespace\")", Done()))
