"""Observers of the write requests every client of the process sends: an extension point for what runs the product
from outside it (the fault tier installs one that stops the process between two writes). The runtime installs none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["WriteObserver", "after_write", "before_write", "observe_writes"]


class WriteObserver(Protocol):
    """Told of each write request (not reads; `what` says it, e.g. "apply Deployment ns/web"; `resource` is its
    plural) just before it is sent and just after its reply came back, when it succeeded."""

    def before(self, what: str, resource: str) -> None: ...

    def after(self, what: str, resource: str) -> None: ...


_observers: list[WriteObserver] = []


def observe_writes(observer: WriteObserver) -> Callable[[], None]:
    """Tell `observer` of every write from now on; returns what stops that."""
    _observers.append(observer)
    return lambda: _observers.remove(observer)


def before_write(what: str, resource: str) -> None:
    for observer in tuple(_observers):
        observer.before(what, resource)


def after_write(what: str, resource: str) -> None:
    for observer in tuple(_observers):
        observer.after(what, resource)
