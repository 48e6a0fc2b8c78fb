"""admission.shares alone (pure bookkeeping; tests/admission/test_fairness.py proves the same through the API server
and the real webhook): flows served least first, the last worker kept from heavy reviews, a full wait taken from the
flow with the most waiting, the operator's lane first."""

from __future__ import annotations

from admission.shares import LARGE, RESERVED, SMALL, Flow, Shares, Ticket

FLOOD, OTHER, THIRD = Flow("10.0.0.1", "flood", "a"), Flow("10.0.0.1", "other", "b"), Flow("10.0.0.1", "third", "c")
OPERATOR = Flow("10.0.0.1", "system:serviceaccount:apprafter-system:apprafter-operator", "a")


def enter(shares: Shares, flow: Flow, lane: str = SMALL) -> tuple[Ticket, str | None, Ticket | None]:
    ticket = Ticket(flow, lane)
    why, pushed = shares.enter(ticket)
    return ticket, why, pushed


def test_a_flood_is_refused_before_another_writer_is() -> None:
    shares = Shares(workers=2, queue=4, reserved=2)
    flood = [enter(shares, FLOOD)[0] for _ in range(4)]
    refused = enter(shares, FLOOD)
    assert refused[1] == "4 small reviews waiting for a worker, 4 of them this writer's"
    _, why, pushed = enter(shares, OTHER)  # the wait is full: the flood gives up its newest
    assert why is None and pushed is flood[-1]
    assert shares.lanes[SMALL].count == 4
    _, why, pushed = enter(shares, THIRD)
    assert why is None and pushed is flood[-2]
    _, why, pushed = enter(shares, OTHER)  # other has 1, flood 2: flood still gives way
    assert why is None and pushed is flood[-3]
    # now flood 1, other 2, third 1: a fourth review of other's finds no place (it has the most)
    assert enter(shares, OTHER)[1] is not None


def test_flows_take_turns_least_served_first() -> None:
    shares = Shares(workers=3, queue=32, reserved=8)
    for _ in range(5):
        enter(shares, FLOOD)
    other, _, _ = enter(shares, OTHER)
    first = shares.next(idle=3)
    assert first is not None and first.flow == FLOOD
    assert shares.next(idle=2) is other  # the turn passes to the other flow
    second = shares.next(idle=1)
    assert second is not None and second.flow == FLOOD  # nobody else waits: the flood may have every worker
    shares.finish(first)
    late, _, _ = enter(shares, THIRD)
    assert shares.next(idle=1) is late  # served least (nothing yet): before the flood's third


def test_a_heavy_review_never_takes_the_last_worker() -> None:
    shares = Shares(workers=2, queue=32, reserved=8)
    heavy = [Ticket(FLOOD, SMALL, heavy=True) for _ in range(3)]
    for ticket in heavy:
        shares.enter(ticket)
    assert shares.next(idle=2) is heavy[0]
    assert shares.next(idle=1) is None  # the last free worker stays for an ordinary review
    ordinary, _, _ = enter(shares, OTHER)
    assert shares.next(idle=1) is ordinary


def test_a_single_worker_serves_one_flow() -> None:
    shares = Shares(workers=1, queue=4, reserved=1)
    ticket, _, _ = enter(shares, FLOOD)
    assert shares.next(idle=1) is ticket


def test_large_reviews_wait_for_small_ones_and_never_take_the_last_worker() -> None:
    shares = Shares(workers=2, queue=8, reserved=2)
    large = Ticket(FLOOD, LARGE, heavy=True)
    shares.enter(large)
    small, _, _ = enter(shares, OTHER, SMALL)
    assert shares.next(idle=2) is small
    assert shares.next(idle=1) is None  # the last free worker is not a large review's
    shares.finish(small)
    assert shares.next(idle=2) is large


def test_the_operators_lane_goes_first_and_is_its_own() -> None:
    shares = Shares(workers=2, queue=2, reserved=2)
    for _ in range(2):
        enter(shares, FLOOD)
    assert enter(shares, FLOOD)[1] is not None  # the tenants' wait is full
    operator, why, pushed = enter(shares, OPERATOR, RESERVED)
    assert why is None and pushed is None
    assert shares.next(idle=1) is operator


def test_a_review_that_leaves_the_wait_frees_its_place() -> None:
    shares = Shares(workers=2, queue=1, reserved=1)
    ticket, _, _ = enter(shares, FLOOD)
    shares.leave(ticket)
    assert shares.lanes[SMALL].count == 0 and shares.flows() == 0
    assert enter(shares, FLOOD)[1] is None
