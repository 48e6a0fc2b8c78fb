"""free_port: a port handed out is not handed out again while its server may not have bound it yet (the API server's
and etcd's ports are picked together, before either starts)."""

from __future__ import annotations

import socket

from tests.parallel import port_range
from tests.testbed.procs import free_port


def test_ports_picked_together_are_distinct_and_free_and_in_the_workers_range() -> None:
    picked = [free_port() for _ in range(400)]
    assert len(set(picked)) == len(picked)
    assert set(picked) <= set(port_range())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", free_port()))
        taken = held.getsockname()[1]
        assert taken not in {free_port() for _ in range(50)}  # bound: never handed out
