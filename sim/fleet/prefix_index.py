"""Which replicas hold which prefix blocks, fleet-wide: what llm-d's KV-cache indexer and Dynamo's
KV indexer keep from the replicas' KV events (BlockStored / BlockRemoved), and what the precise
routers ask at every decision.

Asking each replica's pool in turn costs a dict lookup per cached block per replica (64
replicas sharing a 64-block system prompt: 4,096 lookups a decision). Here every block hash maps
to a bitmask of the replicas whose cache holds it, so one walk down the prompt's blocks answers
for every replica at once: at each block the replicas that still match are ANDed with its
holders, and a replica that drops out scores the depth where it did. It gives exactly what
`BlockPool.cached_run` gives per replica (tested), since both count leading blocks present now.

Prompts that share a prefix (prompt blocks: a system prompt) walk the same hashes again and
again. `shared_run` keeps the walk over a shared prefix's hashes (per prefix key) until one of
the hashes it read changes holders (a KV event for it drops the memo), so that a decision walks
only the request's own blocks past the prefix, and those only while some replica still matches.
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
        self.memo: dict = {}     # prefix key -> (leading counts, every replica; replicas holding all of it; its length;
        #                          replicas holding some of it)
        self.watch: dict = {}    # hash -> the prefix keys whose memo read it (dropped when it changes holders)

    def watcher(self, replica: int):
        """The callback a replica's BlockPool calls when a hash comes into or leaves its cache."""
        bit = 1 << replica
        holders = self.holders
        memo, watch = self.memo, self.watch

        def changed(h: int, present: bool) -> None:
            if present:
                holders[h] = holders.get(h, 0) | bit
            else:
                m = holders.get(h, 0) & ~bit
                if m:
                    holders[h] = m
                else:
                    holders.pop(h, None)
            if h in watch:   # the walks that read h are out of date (most events: a hash none read)
                for k in watch.pop(h):
                    memo.pop(k, None)
        return changed

    MEMO_KEYS = 4096   # prefixes memoised at most (then the memo starts again empty)

    def shared_run(self, key, hashes) -> tuple:
        """The walk over a shared prefix's hashes (`hashes()` gives them, asked only when the memo
        lacks `key`): (out, alive, depth, some): out[i] for every replica i of this index as
        `leading` gives it for these hashes alone (0 for the others), the replicas that hold all
        of them (a bitmask), how many hashes there are, and the replicas i with out[i] > 0 (a
        bitmask). Do not change `out`."""
        m = self.memo.get(key)
        if m is None:
            hs = hashes()
            out = [0] * self.n
            alive, depth = self.walk(hs, self.everyone, 0, out)
            if len(self.memo) >= self.MEMO_KEYS:
                self.memo.clear()
                self.watch.clear()
            m = self.memo[key] = (out, alive, len(hs), nonzero_bits(out))
            watch = self.watch
            for h in hs[:depth + 1]:   # the hashes the walk read: their holders decide it
                w = watch.get(h)
                if w is None:
                    watch[h] = {key}
                else:
                    w.add(key)
        return m

    def walk(self, hashes, alive: int, depth: int, out: list) -> tuple:
        """Go on walking `hashes` (any iterable, read only as far as some replica matches) from
        `depth` with the replicas `alive` that matched so far: each one that drops out, and at
        the end each one left, gets its depth in `out`. (alive left, depth reached); hashes is
        read up to and including the one where none is left."""
        holders = self.holders
        for h in hashes:
            if not alive:
                break
            m = alive & holders.get(h, 0)
            if m != alive:
                gone = alive ^ m
                while gone:
                    low = gone & -gone
                    out[low.bit_length() - 1] = depth
                    gone ^= low
                alive = m
                if not alive:
                    return 0, depth
            depth += 1
        a = alive
        while a:
            low = a & -a
            out[low.bit_length() - 1] = depth
            a ^= low
        return alive, depth

    def leading(self, hashes: list[int], out: list) -> None:
        """Into out[i], for each replica i of this index: how many of `hashes`, from the first,
        its cache holds."""
        self.walk(hashes, self.everyone, 0, out)


def nonzero_bits(counts: list, among: int | None = None) -> int:
    """A bitmask of the replicas i (of `among`, a bitmask; every one if None) with counts[i] > 0."""
    some = 0
    if among is None:
        for i, k in enumerate(counts):
            if k:
                some |= 1 << i
        return some
    while among:
        low = among & -among
        if counts[low.bit_length() - 1]:
            some |= low
        among ^= low
    return some
