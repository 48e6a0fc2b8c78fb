"""Writing what a decision says: the whole status of an object by server-side apply (unless it already is that),
and the Events it asks for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_runtime.client import Kube
from controller_runtime.compare import status_up_to_date
from controller_runtime.events import Recorder
from controller_runtime.informer import Informer
from lifecycle.conditions import StatusUpdate, status_document
from lifecycle.notes import Note
from toolchain.timestamps import time_now

__all__ = ["record", "write_status"]


async def write_status(kube: Kube, cache: Informer, obj: dict[str, Any], update: StatusUpdate) -> dict[str, Any]:
    """The object after applying `update` as its whole status (fields left out are removed: every one is ours);
    nothing is written when the live status already is that. Returns the object as the server holds it."""
    status = status_document(update, obj.get("status") or {}, time_now())
    if status_up_to_date(obj, status, kube.status_field_manager):
        return obj
    meta = obj["metadata"]
    body = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "status": status,
            "metadata": {"name": meta["name"], **({"namespace": meta["namespace"]} if meta.get("namespace") else {})}}
    written = await kube.apply(body, status=True)
    cache.update(written)
    return written


async def record(recorder: Recorder, regarding: Mapping[str, Any], note: Note) -> None:
    await recorder.event(regarding, note.reason, note.text, note.occurrence, type_=note.type)
