"""Which replicas hold which prefix blocks, fleet-wide: what llm-d's KV-cache indexer and Dynamo's
KV indexer keep from the replicas' KV events (BlockStored / BlockRemoved), and what the precise
routers ask at every decision.

Asking each replica's pool in turn costs a dict lookup per cached block per replica (64
replicas sharing a 64-block system prompt: 4,096 lookups a decision). Here every block hash maps
to a bitmask of the replicas whose cache holds it, so one walk down the prompt's blocks answers
for every replica at once: at each block the replicas that still match are ANDed with its
holders, and a replica that drops out scores the depth where it did. It gives exactly what
`BlockPool.cached_run` gives per replica (tested), since both count leading blocks present now.
"""
from __future__ import annotations


class FleetPrefixIndex:
    """Block hash -> bitmask of the replicas whose prefix cache holds it, for replicas of one
    block size (hashes of different block sizes never match)."""

    def __init__(self, replicas: list[int], num_replicas: int):
        self.holders: dict[int, int] = {}
        self.replicas = list(replicas)
        self.n = num_replicas
        self.everyone = 0
        for i in self.replicas:
            self.everyone |= 1 << i

    def watcher(self, replica: int):
        """The callback a replica's BlockPool calls when a hash comes into or leaves its cache."""
        bit = 1 << replica
        holders = self.holders

        def changed(h: int, present: bool) -> None:
            if present:
                holders[h] = holders.get(h, 0) | bit
            else:
                m = holders.get(h, 0) & ~bit
                if m:
                    holders[h] = m
                else:
                    holders.pop(h, None)
        return changed

    def leading(self, hashes: list[int], out: list) -> None:
        """Into out[i], for each replica i of this index: how many of `hashes`, from the first,
        its cache holds."""
        holders = self.holders
        alive = self.everyone
        depth = 0
        for h in hashes:
            m = alive & holders.get(h, 0)
            if m != alive:
                gone = alive ^ m
                while gone:
                    low = gone & -gone
                    out[low.bit_length() - 1] = depth
                    gone ^= low
                alive = m
                if not alive:
                    return
            depth += 1
        while alive:
            low = alive & -alive
            out[low.bit_length() - 1] = depth
            alive ^= low
