"""Fair shares of the review workers and of the wait for one, on the model of Kubernetes API Priority and Fairness:
each writer's reviews are a flow (client address, user, namespace) queued apart; a free worker goes to the flow
served least (fair queuing); a review of a heavy body (over 64 KiB) never takes the last free worker, which stays for
the ordinary ones; when a wait is full, the flow with the most reviews waiting gives up its newest one, so a flood is
refused before anyone else's write is. The operator's reviewed writes wait in a lane of their own and go first.
Pure bookkeeping: no clock, no I/O."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["LANES", "LARGE", "RESERVED", "SMALL", "Flow", "Shares", "Ticket"]

RESERVED, SMALL, LARGE = "reserved", "small", "large"
LANES = (RESERVED, SMALL, LARGE)


class Flow(NamedTuple):
    """Whose review it is: the connection's client address (a writer that reaches the webhook directly never
    shares the API server's flows, whatever user its body names), the request's user and namespace."""

    client: str
    user: str
    namespace: str


@dataclasses.dataclass(eq=False)
class Ticket:
    """One review's place: in a lane's wait, then on a worker; a heavy one (a body over 64 KiB, every large one)
    never takes the last free worker."""

    flow: Flow
    lane: str
    heavy: bool = False


class _Lane:
    """The reviews of one lane waiting for a worker, one queue per flow, served in turn."""

    def __init__(self, name: str, room: int) -> None:
        self.name = name
        self.room = room
        self.flows: collections.OrderedDict[Flow, collections.deque[Ticket]] = collections.OrderedDict()
        self.count = 0

    def waiting(self, flow: Flow) -> int:
        queue = self.flows.get(flow)
        return len(queue) if queue else 0

    def _longest(self) -> Flow | None:
        return max(self.flows, key=lambda f: len(self.flows[f]), default=None)

    def refusal(self, flow: Flow) -> str | None:
        """Why a review of `flow` finds no place (None: it does, pushing out another flow's when the lane is full)."""
        if self.count < self.room:
            return None
        longest = self._longest()
        if longest is not None and len(self.flows[longest]) > self.waiting(flow):
            return None
        return f"{self.count} {self.name} reviews waiting for a worker, {self.waiting(flow)} of them this writer's"

    def add(self, ticket: Ticket) -> Ticket | None:
        """Queue `ticket` (refusal() said it has a place); the ticket pushed out to make room, if any: the newest of
        the flow with the most waiting (longest queue drop: the flood pays for the room)."""
        pushed = None
        if self.count >= self.room:
            longest = self._longest()
            assert longest is not None
            pushed = self.flows[longest].pop()
            self._drop_empty(longest)
            self.count -= 1
        self.flows.setdefault(ticket.flow, collections.deque()).append(ticket)
        self.count += 1
        return pushed

    def remove(self, ticket: Ticket) -> None:
        queue = self.flows.get(ticket.flow)
        if queue is not None and ticket in queue:
            queue.remove(ticket)
            self.count -= 1
            self._drop_empty(ticket.flow)

    def take(self, eligible: Callable[[Ticket], bool], served: Callable[[Flow], int]) -> Ticket | None:
        """The oldest review of the flow served least so far whose oldest is eligible (fair queuing with unit costs:
        a writer that has had nothing goes before one that has had much; ties in turn, and the flow served goes to
        the back)."""
        chosen = min((flow for flow, queue in self.flows.items() if eligible(queue[0])), key=served, default=None)
        if chosen is None:
            return None
        queue = self.flows[chosen]
        ticket = queue.popleft()
        self.count -= 1
        if queue:
            self.flows.move_to_end(chosen)
        else:
            del self.flows[chosen]
        return ticket

    def _drop_empty(self, flow: Flow) -> None:
        if not self.flows[flow]:
            del self.flows[flow]


class Shares:
    """Who waits and who runs: `enter` a review into its lane's wait, `next` hands a free worker to the review whose
    turn it is, `finish` gives the worker back, `leave` takes a review out of the wait (its deadline passed)."""

    def __init__(self, workers: int, queue: int, reserved: int) -> None:
        self.workers = workers
        # Large bodies wait at most `workers` of them (and never take the last free worker: see next()).
        self.lanes = {RESERVED: _Lane(RESERVED, reserved), SMALL: _Lane(SMALL, queue), LARGE: _Lane(LARGE, workers)}
        self.running: collections.Counter[Flow] = collections.Counter()
        self.running_lanes: collections.Counter[str] = collections.Counter()
        # Reviews each flow has had since it last had none waiting or running (its place in the fair turn).
        self.served: collections.Counter[Flow] = collections.Counter()

    def refusal(self, ticket: Ticket) -> str | None:
        """Why `ticket` would be refused now (None: it would get a place); nothing changes."""
        return self.lanes[ticket.lane].refusal(ticket.flow)

    def enter(self, ticket: Ticket) -> tuple[str | None, Ticket | None]:
        """(why it is refused, else None; the ticket it pushed out of the wait, if any)."""
        why = self.refusal(ticket)
        if why is not None:
            return why, None
        return None, self.lanes[ticket.lane].add(ticket)

    def leave(self, ticket: Ticket) -> None:
        self.lanes[ticket.lane].remove(ticket)
        self._forget(ticket.flow)

    def next(self, idle: int) -> Ticket | None:
        """The review that takes one of `idle` free workers now (it counts as running), or None."""
        if idle <= 0:
            return None
        served = self.served.__getitem__
        # A heavy review never takes the last free worker (while one is being replaced, the live ones count): it
        # stays for the ordinary reviews, whoever floods; with a single worker configured there is no other to keep.
        spare = self.workers == 1 or idle >= 2

        def may_run(ticket: Ticket) -> bool:
            return spare or not ticket.heavy

        ticket = self.lanes[RESERVED].take(lambda ticket: True, served)
        if ticket is None:
            ticket = self.lanes[SMALL].take(may_run, served)
        if ticket is None:  # a large review waits while a small one may go
            ticket = self.lanes[LARGE].take(may_run, served)
        if ticket is not None:
            self.running[ticket.flow] += 1
            self.running_lanes[ticket.lane] += 1
            self.served[ticket.flow] += 1
        return ticket

    def finish(self, ticket: Ticket) -> None:
        self.running[ticket.flow] -= 1
        if self.running[ticket.flow] <= 0:
            del self.running[ticket.flow]
        self.running_lanes[ticket.lane] -= 1
        self._forget(ticket.flow)

    def _forget(self, flow: Flow) -> None:
        """A flow with nothing waiting or running starts its next busy spell with a clean slate."""
        if flow not in self.running and not any(lane.waiting(flow) for lane in self.lanes.values()):
            self.served.pop(flow, None)

    def flows(self) -> int:
        """Flows with a review waiting or running."""
        waiting = {flow for lane in self.lanes.values() for flow in lane.flows}
        return len(waiting | set(self.running))
