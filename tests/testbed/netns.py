"""Entering the node's network namespace from a thread: a socket made there stays in it (the DNS queries of
tests/testbed/node_dns.py, the servers of tests/testbed/node_registry.py)."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TypeVar

CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def in_netns(path: str, make: Callable[[], T]) -> T:
    """make() run on a thread that entered the network namespace at `path`: a socket it creates stays there."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        try:  # a namespace gone (the bed stopped) is the caller's error too
            with open(path, "rb") as ns:
                if libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns {path}")
            result.append(make())
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run, name="netns")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]
