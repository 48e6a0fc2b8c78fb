"""What a decision says, made writable: the status document of a StatusUpdate (the runtime's one status writer,
controller_runtime.writes.write_status, writes it) and the Events a decision asks for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_runtime.events import Recorder
from lifecycle.conditions import StatusUpdate, status_document
from lifecycle.notes import Note
from toolchain.timestamps import time_now

__all__ = ["record", "status_of"]


def status_of(obj: Mapping[str, Any], update: StatusUpdate) -> dict[str, Any]:
    """The whole status `update` makes of `obj`'s (fields left out are removed: every one is ours; conditions keep
    their transition times), stamped now."""
    return status_document(update, obj.get("status") or {}, time_now())


async def record(recorder: Recorder, regarding: Mapping[str, Any], note: Note) -> None:
    await recorder.event(regarding, note.reason, note.text, note.occurrence, type_=note.type)
