"""Simulation (no cluster) of the sharding design docs/operator.md ("Scale") describes for past one replica: a fixed
number of shards, an Application's shard a stable hash of its namespace, one Lease per shard, each replica holding
at most ceil(shards / replicas alive) of them, handing extra ones back when replicas join, and taking over the
Leases of a lost replica once they expire. At every step every Application has at most one owner, and exactly one
except while a lost replica's Leases run out.
Usage: .venv/bin/python scripts/simulate_sharding.py [--shards 16] [--namespaces 400] [--steps 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
from dataclasses import dataclass, field


def shard_of(namespace: str, shards: int) -> int:
    """A stable hash (not Python's salted hash()): every replica computes the same shard for a namespace."""
    return int.from_bytes(hashlib.sha256(namespace.encode()).digest()[:8], "big") % shards


@dataclass
class Lease:
    holder: str | None = None
    renewed: int = 0  # the step of the last renewal


@dataclass
class Cluster:
    shards: int
    lease_steps: int  # a Lease not renewed for this many steps may be taken
    leases: list[Lease] = field(default_factory=list)
    alive: set[str] = field(default_factory=set)
    now: int = 0

    def __post_init__(self) -> None:
        self.leases = [Lease() for _ in range(self.shards)]

    def quota(self) -> int:
        return math.ceil(self.shards / max(1, len(self.alive)))

    def step(self, draw: random.Random) -> None:
        """Each live replica, in random order: renew what it holds, hand what exceeds its quota to a live replica
        under its quota (one Lease write naming the successor: no step without an owner), take free or expired
        Leases up to its quota (a Lease write is a compare-and-swap: one winner)."""
        self.now += 1
        for replica in draw.sample(sorted(self.alive), len(self.alive)):
            held = [i for i, lease in enumerate(self.leases) if lease.holder == replica]
            for i in held:
                self.leases[i].renewed = self.now
            for i in held[self.quota():]:
                load = {r: sum(lease.holder == r for lease in self.leases) for r in self.alive}
                under = sorted(r for r, n in load.items() if n < self.quota() and r != replica)
                if under:
                    self.leases[i].holder = draw.choice(under)
            held = [i for i, lease in enumerate(self.leases) if lease.holder == replica]
            for i, lease in enumerate(self.leases):
                if len(held) >= self.quota():
                    break
                if lease.holder is None or self.now - lease.renewed > self.lease_steps:
                    lease.holder, lease.renewed = replica, self.now
                    held.append(i)

    def owners(self, shard: int) -> set[str]:
        """Who reconciles the shard now: its holder, if that replica still runs and its Lease is current."""
        lease = self.leases[shard]
        current = lease.holder in self.alive and self.now - lease.renewed <= self.lease_steps
        return {lease.holder} if current and lease.holder else set()


def simulate(shards: int = 16, namespaces: int = 400, steps: int = 2000, seed: int = 1,
             lease_steps: int = 3) -> dict[str, int]:
    """Replicas join and leave at random; checks the ownership rule at every step; counts what happened."""
    draw = random.Random(seed)
    cluster = Cluster(shards, lease_steps)
    apps = {f"team-{i}": shard_of(f"team-{i}", shards) for i in range(namespaces)}
    counts = {"joins": 0, "losses": 0, "orphaned_steps": 0, "steps": steps}
    lost_at: dict[int, int] = {}  # shard -> step its holder was lost
    names = iter(f"replica-{i}" for i in range(10**6))
    cluster.alive.add(next(names))
    for _ in range(steps):
        event = draw.random()
        if event < 0.05 and len(cluster.alive) < 8:
            cluster.alive.add(next(names))
            counts["joins"] += 1
        elif event < 0.09 and len(cluster.alive) > 1:
            gone = draw.choice(sorted(cluster.alive))
            cluster.alive.discard(gone)
            counts["losses"] += 1
            for i, lease in enumerate(cluster.leases):
                if lease.holder == gone:
                    lost_at[i] = cluster.now
        cluster.step(draw)
        for namespace, shard in apps.items():
            owners = cluster.owners(shard)
            assert len(owners) <= 1, f"step {cluster.now}: {namespace} owned by {owners}"
            if not owners:
                # only a lost replica's shard may be without an owner, and only until its Lease expires
                assert shard in lost_at and cluster.now - lost_at[shard] <= lease_steps + 1, \
                    f"step {cluster.now}: {namespace} (shard {shard}) has no owner"
                counts["orphaned_steps"] += 1
        for shard in [s for s in lost_at if cluster.owners(s)]:
            del lost_at[shard]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--namespaces", type=int, default=400)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    counts = simulate(args.shards, args.namespaces, args.steps, args.seed)
    print(f"{args.steps} steps, {counts['joins']} joins, {counts['losses']} replica losses: every Application had at "
          f"most one owner at every step; {counts['orphaned_steps']} (Application, step) pairs without one, all "
          "within a lost replica's Lease expiry")


if __name__ == "__main__":
    main()
