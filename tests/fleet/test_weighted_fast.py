"""The weighted router's fast paths change nothing: GIE's prefix index kept as a log of adds until
a server's LRU could evict (then hash by hash) holds the same LRUs and servers as golang-lru's
plain walk, and a fleet routed by it with the plain-float formula is the numpy router's to the
byte, with capacities that evict often, now and then, or never."""
from __future__ import annotations

import random

import numpy as np
import pytest

from sim.cost import cost_from_preset
from sim.fleet import FleetSettings, simulate_fleet
from sim.fleet import fleet as fleet_mod
from sim.fleet.routers.llmd import PrefixIndex, Weighted, _KV, _WAITING
from sim.fleet.routing import Decision
from sim.fleet.scenarios import chat
from tests.fleet.test_prompt_memo import RefPrefixIndex

MS = cost_from_preset("a100-8B-fp16")


class SqueezedIndex(PrefixIndex):
    """Logs squeezed and given keys forgotten all the time."""
    LOG_SLACK = 1
    LOG_MIN = 0
    GIVEN_KEYS = 3


def _same(fast: PrefixIndex, plain: RefPrefixIndex, hashes: list, n: int) -> None:
    assert fast.servers == plain.servers
    assert {k: list(v) for k, v in fast.lru.items()} == {k: list(v) for k, v in plain.lru.items()}
    assert fast.match(hashes, n) == plain.match(hashes, n)


@pytest.mark.parametrize("cls", [PrefixIndex, SqueezedIndex])
@pytest.mark.parametrize("cap", [1, 2, 5, 17, 60, 10_000])
def test_logged_lru_is_the_plain_walk(cls, cap):
    """Adds with a named shared prefix and own hashes (some repeated in the add, some the
    prefix's), and plain adds, to 6 servers: the same LRUs, servers and matches as the plain
    walk after every add; small capacities evict, and switch servers to the walk, at once."""
    rng = random.Random(cap)
    fast, plain = cls(cap), RefPrefixIndex(cap)
    prefixes = {k: [rng.randrange(1 << 60) for _ in range(rng.randint(1, 12))] for k in range(8)}
    earlier = []
    for _ in range(600):
        key = rng.randrange(8)
        shared = prefixes[key]
        own = [rng.randrange(1 << 60) for _ in range(rng.randint(0, 5))]
        if own and rng.random() < 0.2:
            own.append(own[0])
        if rng.random() < 0.2:
            own.append(rng.choice(shared))
        if rng.random() < 0.2:   # hashes other servers may hold: an earlier add's, another prefix's
            own += rng.choice(earlier) if earlier else prefixes[0][:2]
        earlier.append(own)
        server = rng.randrange(6)
        if rng.random() < 0.2:
            fast.add(shared + own, server)
        else:
            assert fast.match_split(key, shared, own, 6) == plain.match(shared + own, 6)
            fast.add_split(key, shared, own, server)
        plain.add(shared + own, server)
        _same(fast, plain, shared + own, 6)
    walked = set(fast.full)
    assert walked == (set(plain.lru) if cap <= 60 else set())   # every server evicted, or none


def test_a_log_squeezed_keeps_the_order():
    """Adds that bring nothing new grow a log only: squeezed to one entry per hash, in order."""
    fast, plain = SqueezedIndex(100), RefPrefixIndex(100)
    for i in range(50):
        hashes = [7, 3, 9, i % 4, 3]
        fast.add_split(i % 3, hashes[:3], hashes[3:], 0)
        plain.add(hashes, 0)
        _same(fast, plain, hashes, 1)
        assert fast.logs[0].logged <= 2 * fast.logs[0].size + 5


class PlainIndex(RefPrefixIndex):
    def add_split(self, key, shared, own, server):
        self.add(shared + own, server)

    def match_split(self, key, shared, own, n):
        return self.match(shared + own, n)

    def match_kept(self, key, shared, own, n):
        return self.match(shared + own, n), None


class NumpyWeighted(Weighted):
    """Weighted as it was: the numpy formula and the plain index (the reference)."""

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        self.index = PlainIndex(self.index.capacity)

    def route(self, request, ctx):
        n = self.n
        reps = ctx.replicas
        waiting = list(map(_WAITING, reps))
        lo, hi = min(waiting), max(waiting)
        third, total_blocks, detail, _ = self._prefix_kept(request, ctx)
        third = list(third)   # (the index's memo, when the walk ended in the shared prefix)
        rows = np.array((waiting, list(map(_KV, reps)), third), dtype=np.float64)
        queue = np.ones(n) if hi == lo else (hi - rows[0]) / float(hi - lo)
        kv = 1.0 - rows[1]
        prefix = rows[2] / total_blocks if total_blocks else rows[2]
        total = self.wq * queue + self.wk * kv
        if self.wp > 0:
            total += self.wp * prefix
        tied = np.flatnonzero(total == total.max()).tolist()
        if len(tied) == 1:
            pick, reason = tied[0], "max_score"
        else:
            pick, reason = tied[self.rng.randrange(len(tied))], "tie_random"
        detail["tied"] = tuple(tied)
        scores = {"queue": queue.tolist(), "kv": kv.tolist(), "prefix": prefix.tolist(), "total": total.tolist()} \
            if ctx.record_scores else {}
        return Decision(pick, reason, self.everyone, scores, detail)


CONFIGS = [({}, False), ({"lru_capacity_per_server": 300}, True), ({"lru_capacity_per_server": 40, "hash_block_size": 16}, True),
           ({"queue_weight": 0, "kv_weight": 0.5, "lru_capacity_per_server": 3}, True), ({"prefix": "precise"}, False),
           ({"prefix_weight": 0}, False)]


@pytest.mark.parametrize("refresh", [15.0, 0.0], ids=["stale", "exact"])
@pytest.mark.parametrize("record", [True, False], ids=["scores", "no-scores"])
@pytest.mark.parametrize("config,evicts", CONFIGS)
def test_weighted_fleet_is_the_numpy_router(config, evicts, record, refresh, monkeypatch):
    """A fleet under weighted is the numpy router's with the plain index to the byte (routes,
    scores, ties drawn, every replica's trace), the LRUs evicting where the capacity is small;
    with exact signals, most decisions make the queue and KV terms again only for the replicas
    the loop refreshed (Weighted._queue_kv), with stale ones none between two refreshes."""
    wl = chat(n=240, rate_per_s=80.0, groups=6)
    s = FleetSettings(replicas=6, router="weighted", router_config=config, seed=3, refresh_interval=refresh,
                      record_scores=record)
    made, kept = [], []
    real = fleet_mod.make_router
    terms = Weighted._terms

    def keep(*args):
        made.append(real(*args))
        return made[-1]

    def counted(self, base, which, *a):
        kept.append(len(which) < self.n)
        return terms(self, base, which, *a)
    monkeypatch.setattr(fleet_mod, "make_router", keep)
    monkeypatch.setattr(Weighted, "_terms", counted)
    fast = simulate_fleet(wl, s, cost=MS)
    fast_digest = simulate_fleet(wl, s, cost=MS, digest=True)
    assert bool(made[0].index.full) == evicts
    if refresh == 0.0:   # some decisions made a few replicas' terms only, some every one's
        assert 0 < sum(kept) < len(kept)
    else:   # all of them after a refresh, none in between (two runs of 240 decisions)
        assert not any(kept) and len(kept) < 2 * 240
    monkeypatch.setattr(fleet_mod, "make_router", lambda n, k, c, seed: NumpyWeighted(k, c, seed))
    plain = simulate_fleet(wl, s, cost=MS)
    plain_digest = simulate_fleet(wl, s, cost=MS, digest=True)
    assert fast.routes.equals(plain.routes)
    assert fast.to_bytes() == plain.to_bytes()
    assert fast_digest.routes.equals(plain_digest.routes)
    assert fast.routes["reason"].nunique() >= 1


@pytest.mark.parametrize("seed", range(4))
def test_kept_queue_and_kv_terms_are_a_fresh_pass(seed):
    """Weighted._queue_kv told which replicas' signals changed (and a few more) gives, decision
    after decision, the very floats of a pass over every replica: queues that come and go at
    the shortest and the longest, past the queue table, the shortest moving too."""
    rng = random.Random(seed)
    n = 16
    kept = Weighted(n, {"queue_weight": 2.0, "kv_weight": 1.7})
    lows = set()
    waiting, kvs = [0] * n, [0.0] * n
    partial = 0
    for step in range(3000):
        stretch = step % 500 > 300   # no queue drawn empty: the shortest moves up, then down again
        changed = rng.sample(range(n), rng.choice([0, 1, 1, 2, 3, 5, 9 if stretch else 6]))
        for i in changed:
            r = rng.random()
            waiting[i] = (0 if r < 0.6 and not stretch else rng.randint(1, 4) if r < 0.95
                          else rng.randint(60, 90))
            kvs[i] = rng.random()
        if step % 700 == 699:   # every queue one longer, all of them told
            waiting = [w + 1 for w in waiting]
            changed = list(range(n))
        told = changed + rng.sample(range(n), rng.choice([0, 0, 1]))   # a replica listed that did not change
        partial += 2 * len(told) <= n
        got = kept._queue_kv(list(waiting), list(kvs), told)
        fresh = Weighted(n, {"queue_weight": 2.0, "kv_weight": 1.7})._queue_kv(waiting, kvs, None)
        assert [x.hex() for x in got] == [x.hex() for x in fresh]
        lows.add(min(waiting))
    assert lows >= {0, 1, 2}   # the shortest queue moved
    assert partial > 2000
