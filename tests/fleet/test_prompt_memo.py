"""The prompt memo (sim/workload.py BLOCK_TOKENS, the routing loop's tree of prompt-block
prefixes in sim/fleet/fleet.py) and the vectorised routers change nothing: the same token ids,
text and chain hashes as making each prompt whole, the same hashes as the replica's scheduler,
and the same fleet to the byte with the caches off, cleared at every decision, or against the
routers' plain-Python formulas (kept here as the reference)."""
from __future__ import annotations

import math
import random
from array import array
from collections import OrderedDict

import pytest

from sim.cost import cost_from_preset
from sim.fleet import FleetSettings, simulate_fleet
from sim.fleet import fleet as fleet_mod
from sim.fleet import prompts as prompts_mod
from sim.fleet.fleet import _Prompts, chain_hashes, text_chain_hashes
from sim.fleet.routers.dynamo import KvCost, block_hashes
from sim.fleet.routers.llmd import NAN, PrefixIndex, Weighted, _KV, _WAITING, normalized_precise
from sim.fleet.routing import Decision, Router
from sim.fleet.scenarios import chat
from sim.scheduler import Seq
from sim import workload as wl_mod
from sim.workload import (PROMPT_BLOCK_TOKENS, Request, Workload, block_prompt_tokens,
                          block_prompt_tokens_unmemoized, own_prompt_tokens, own_prompt_tokens_many)

MS = cost_from_preset("a100-8B-fp16")
BLOCK_SIZES = (1, 3, 16, 17, 64, 512, 700, 1024)


def _requests(n: int, seed: int, pool: int = 6) -> list[Request]:
    """Requests named by prompt blocks: shared runs of a few block ids (so prefixes repeat), now
    and then a huge id, a prompt shorter than its blocks (the last one cut), longer (its own
    tail), exactly its blocks, or no blocks at all."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        nb = rng.randint(0, 5)
        first = rng.randrange(pool)
        blocks = [first * 7 + j if rng.random() < 0.8 else rng.randrange(1 << 63) for j in range(nb)]
        kind = rng.random()
        if kind < 0.3 and nb:
            pl = nb * PROMPT_BLOCK_TOKENS - rng.randint(1, PROMPT_BLOCK_TOKENS - 1)   # the last block cut
        elif kind < 0.4:
            pl = nb * PROMPT_BLOCK_TOKENS or 1
        else:
            pl = nb * PROMPT_BLOCK_TOKENS + rng.randint(1, 700)                    # a tail of its own
        out.append(Request(id=f"q{seed}-{i}", prompt_len=pl, max_tokens=4, prompt_blocks=tuple(blocks),
                           arrival_time=float(i)))
    return out


def _check(p: _Prompts, r: Request, sizes=BLOCK_SIZES) -> None:
    toks = block_prompt_tokens_unmemoized(r.prompt_blocks, r.prompt_len, r.id)
    p.reset(r)
    for bs in sizes:
        assert p.chain(r, bs) == chain_hashes(toks, bs), (r, bs)
    text = " ".join(map(str, toks))
    assert p.text(r) == text
    parts = p.parts(r)   # None only for a prompt the tree of prefixes does not hold
    if parts is None:
        assert p._prefix(r) is None
    else:
        assert parts[1] + parts[2] == array("I", toks)
    assert p.length(r) == len(toks)
    for key in ((64, 256, 11), (64, 3, 5), (7, 10_000, -2), (5_000, 4, 1)):
        assert p.text_chain(r, *key) == text_chain_hashes(text, *key), (r, key)
    assert p.token_ids(r) == toks


# ---------------------------------------------------------------- the pieces

def test_block_tokens_memo_equals_one_pass_over_the_prompt(monkeypatch):
    """Cached blocks give the ids of one numpy pass over the whole prompt (tails, cut blocks, a
    block twice, huge ids), with a cache so small that it evicts all the time, and with none."""
    for capacity in (4096, 3, 0):
        monkeypatch.setattr(wl_mod, "BLOCK_TOKENS", wl_mod._BlockTokens(capacity))
        for r in _requests(150, seed=capacity) + [Request(id="twice", prompt_len=1500, max_tokens=1,
                                                          prompt_blocks=(4, 4, 4))]:
            got = block_prompt_tokens(r.prompt_blocks, r.prompt_len, r.id)
            assert got == block_prompt_tokens_unmemoized(r.prompt_blocks, r.prompt_len, r.id)
            assert r.prompt_tokens() == got
        assert len(wl_mod.BLOCK_TOKENS.blocks) <= capacity
    first = wl_mod.prompt_block_tokens(3)
    assert wl_mod.prompt_block_tokens(3) == block_prompt_tokens_unmemoized((3,), PROMPT_BLOCK_TOKENS, "x")
    assert first == wl_mod.prompt_block_tokens(3)


def test_own_tokens_made_together_equal_one_at_a_time():
    rng = random.Random(4)
    spans = [(f"id{i}", s, s + rng.choice([0, 1, 77, 600])) for i, s in
             ((i, rng.choice([0, 512, 1024, 70_000])) for i in range(200))]
    assert own_prompt_tokens_many(spans) == [own_prompt_tokens(*s) for s in spans]
    assert own_prompt_tokens_many([]) == [] and own_prompt_tokens_many([("a", 9, 9)]) == [[]]


@pytest.mark.parametrize("capacity", [8192, 4, 1, 0])
def test_prompts_from_the_prefix_tree_equal_the_whole_prompt(capacity):
    """Token ids, text, the ids as an array, chain hashes at every block size (dividing 512 or
    not, bigger than a block) and the text's hashes (max_blocks reached or not), made from the
    tree's cached pieces, equal those made from the whole prompt; a tree of 4 or 1 nodes starts
    again all the time, and 0 means no tree."""
    p = _Prompts(capacity)
    reqs = _requests(120, seed=capacity)
    for r in reqs + reqs[:20]:        # again: now from cached pieces
        _check(p, r)
    assert p.tree.nodes <= max(capacity, 0)


def test_own_tokens_made_ahead_for_the_planned_order():
    """plan(): the own ids of the next requests are made in one pass; asked in another order,
    or for a request not planned, they are still right."""
    p = _Prompts()
    reqs = _requests(300, seed=9)
    p.plan(reqs)
    for r in reqs[:100] + reqs[250:] + reqs[100:250][::-1]:
        _check(p, r, sizes=(16,))
    stranger = _requests(5, seed=10)
    for r in stranger:
        _check(p, r, sizes=(16,))


def _named_requests() -> list[Request]:
    """Many requests on few prefixes (so that their own texts' first bytes agree now and then),
    and two ids of one crc32 ("plumless", "buckeroo": the same own ids) on one prefix, of two
    lengths, and on another; requests of no blocks."""
    reqs = _requests(400, seed=31, pool=2)
    for rid, blocks, n in (("plumless", (0, 1), 1800), ("buckeroo", (0, 1), 1500), ("plumless-2", (0, 1), 1700),
                           ("buckeroo", (7,), 1300), ("x-none", (), 900)):
        reqs.append(Request(id=rid, prompt_len=n, max_tokens=1, prompt_blocks=blocks))
    reqs.append(Request(id="plumless", prompt_len=1200, max_tokens=1, prompt_blocks=(7,)))
    reqs.append(Request(id="buckeroo", prompt_len=600, max_tokens=1, prompt_blocks=()))
    reqs.append(Request(id="plumless", prompt_len=700, max_tokens=1, prompt_blocks=()))
    return reqs


@pytest.mark.parametrize("key", [(64, 256, 11), (64, 30, 5), (7, 10_000, -2), (1, 400, 3), (200, 256, 0),
                                 (5_000, 4, 1)])
def test_named_own_text_blocks_are_one_exactly_where_their_hashes_are(key):
    """text_split_named against text_split: the same key and shared hashes, as many own ones,
    and over every request's own blocks, two get one name exactly when they get one hash (a
    bijection), with first blocks of equal text from other requests among them."""
    p = _Prompts()
    reqs = _named_requests()
    p.plan(reqs)
    name_of: dict = {}
    hash_of: dict = {}
    owners: dict = {}
    for r in reqs:
        p.reset(r)
        named = p.text_split_named(r, *key)
        p.reset(r)
        exact = p.text_split(r, *key)
        assert named[0] == exact[0] and named[1] == exact[1] and len(named[2]) == len(exact[2]), (r, key)
        for h, m in zip(exact[2], named[2]):
            assert name_of.setdefault(h, m) == m, (r, key)
            assert hash_of.setdefault(m, h) == h, (r, key)
            owners.setdefault(h, set()).add(r.id)
    assert len(name_of) == len(hash_of) > 0
    if key[0] <= 64:   # blocks of other requests' texts that are one: both the chance and the crc32 kind
        assert any(len(o) > 1 and "plumless" not in o for o in owners.values())
        assert any(o == {"plumless", "buckeroo"} for o in owners.values())


def test_written_heads_are_each_spans_first_ids_written():
    """The batch's first bytes of each own text: its first HEAD_IDS ids (all of a shorter span)
    written as the request's own text begins; spans of 1 id to hundreds, 1-digit to 5-digit ids."""
    import numpy as np
    rng = random.Random(5)
    lens = [1, 2, 21, 22, 23, 400] + [rng.randint(1, 60) for _ in range(40)]
    spans = [[rng.choice((0, 7, 10, 99, 100, 31999, rng.randrange(32000))) for _ in range(k)] for k in lens]
    bounds = [0]
    for sp in spans:
        bounds.append(bounds[-1] + len(sp))
    text, starts = prompts_mod._written_heads(np.array(sum(spans, []), dtype=np.uint32), bounds)
    assert len(starts) == len(spans) + 1
    for i, sp in enumerate(spans):
        head = text[starts[i]:starts[i + 1] - 1]
        assert head == " ".join(map(str, sp[:prompts_mod.HEAD_IDS])).encode(), i
        assert len(head) >= min(prompts_mod.OWN_TEXT_ALIKE - 1, len(" ".join(map(str, sp)))) or min(sp) < 10


@pytest.mark.parametrize("key", [(64, 256, 11), (7, 10_000, -2), (1, 400, 3), (200, 256, 0), (5_000, 4, 1)])
def test_named_split_of_a_batch_is_the_one_made_alone(key):
    """For requests planned (their own ids made in batches) the split is made from the batch's
    counted lengths and written first bytes; unplanned, from the request's own ids: the same
    hashes and names, request by request, and in another order than planned."""
    reqs = _named_requests()
    batch, alone = _Prompts(), _Prompts()
    batch.plan(reqs)
    used = 0
    for r in reqs[:300] + reqs[350:] + reqs[300:350][::-1]:
        batch.reset(r)
        got = batch.text_split_named(r, *key)
        used += batch.own_at is not None
        alone.reset(r)
        assert alone.own_at is None
        made = alone.text_split_named(r, *key)
        assert got[1:] == made[1:] and (got[0] is None) == (made[0] is None), (r, key)
        if got[0] is not None:   # (node, rule): the nodes of two trees, of one prefix
            assert got[0][1] == made[0][1] and [n.block for n in got[0][0].path()] == [n.block for n in made[0][0].path()]
    assert used > 200   # most went the batch's way


@pytest.mark.parametrize("bs", [16, 32, 5])
def test_router_hashes_are_the_replica_schedulers(bs):
    """The chain hashes a router gets are what the replica's scheduler computes for its prefix
    cache (Seq.extend_hashes), so that a router's prefix hits land where the replica's do."""
    p = _Prompts()
    for r in _requests(60, seed=bs):
        p.reset(r)
        seq = Seq(r, 0, 0, True)
        seq.extend_hashes(bs)
        assert p.chain(r, bs) == seq.hashes
        assert block_hashes(r.prompt_tokens(), bs) == seq.hashes


# ---------------------------------------------------------------- whole fleets

PREFIX_ROUTERS = [("cache_aware", {}), ("cache_aware", {"flavor": "sglang"}), ("precise_prefix", {}),
                  ("kv_cost", {}), ("kv_cost", {"router_temperature": 0.5, "active_request_weight": 0.3}),
                  ("weighted", {}), ("weighted", {"prefix": "precise"}),
                  ("weighted", {"hash_block_size": 7, "max_prefix_blocks": 40, "lru_capacity_per_server": 60})]


def _mixed_workload() -> Workload:
    reqs = _requests(90, seed=21, pool=3)
    reqs = [Request(id=r.id, prompt_len=r.prompt_len, max_tokens=8 + i % 40, prompt_blocks=r.prompt_blocks,
                    arrival_time=i * 25.0) for i, r in enumerate(reqs)]
    return Workload(reqs, {"enable_prefix_caching": True, "num_gpu_blocks": 400, "block_size": 16,
                           "max_num_seqs": 16, "max_num_batched_tokens": 1024})


def _no_caches(monkeypatch, clear_every_decision: bool) -> None:
    if clear_every_decision:   # the caches are there but start empty at every decision
        real = fleet_mod.RoutingLoop.route

        def route(self, req, target=None):
            self.prompts.tree.clear()
            wl_mod.BLOCK_TOKENS.clear()
            self.prompts.forget_batch()
            return real(self, req, target)
        monkeypatch.setattr(fleet_mod.RoutingLoop, "route", route)
    else:
        monkeypatch.setattr(prompts_mod, "PREFIX_TREE_NODES", 0)
        monkeypatch.setattr(prompts_mod, "OWN_BATCH", 1)
        monkeypatch.setattr(wl_mod, "BLOCK_TOKENS", wl_mod._BlockTokens(0))


@pytest.mark.parametrize("clear", [False, True], ids=["off", "cleared"])
@pytest.mark.parametrize("router,config", PREFIX_ROUTERS)
def test_prompt_caches_change_no_route_and_no_byte(router, config, clear, monkeypatch):
    """A fleet routed with the prompt caches is the same to the byte (routes, scores, every
    replica's trace) as one with the caches off, or cleared before every decision; replicas of
    two block sizes and one without prefix caching."""
    wl = _mixed_workload()
    s = FleetSettings(replicas=4, router=router, router_config=config, seed=5,
                      replica_configs=[{}, {"block_size": 32}, {}, {"enable_prefix_caching": False}])
    cached = simulate_fleet(wl, s, cost=MS)
    _no_caches(monkeypatch, clear)
    plain = simulate_fleet(wl, s, cost=MS)
    assert plain.routes["replica"].tolist() == cached.routes["replica"].tolist()
    assert plain.to_bytes() == cached.to_bytes()


# ---------------------------------------------------------------- the routers against their plain formulas

class RefKvCost(Router):
    name = "kv_cost"
    defaults = {"prefill_load_scale": 1.0, "overlap_score_credit": 1.0, "router_temperature": 0.0,
                "active_request_weight": 0.0}
    reads_prefix_cache = True
    _present = staticmethod(KvCost._present)

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        c = self.config
        self.scale = float(c["prefill_load_scale"])
        self.credit = float(c["overlap_score_credit"])
        self.temperature = float(c["router_temperature"])
        self.req_weight = float(c["active_request_weight"])
        self.rcs = [dict() for _ in range(self.n)]   # per replica: block hash -> active requests holding it
        self.ptok = [0] * self.n                      # per replica: prefill tokens not yet done
        self.nreq = [0] * self.n                      # per replica: active requests
        self.active: dict = {}        # request id -> (replica, hashes, prefill tokens still counted)
        self._pending = (None, None, None)
        self.everyone = tuple(range(self.n))

    def _hashes(self, request, ctx, block_size):
        shared = getattr(ctx, "block_hashes", None)   # the loop's own chain hashes, if it offers them
        if shared is not None:
            return shared(request, block_size)
        return block_hashes(ctx.prompt_tokens(request), block_size)

    def route(self, request, ctx):
        n = self.n
        reps = ctx.replicas
        isl = len(ctx.prompt_tokens(request))
        overlap = list(map(float, ctx.cached_prefix(request)))
        sizes = {r.block_size for r in reps}
        by_size = {bs: self._hashes(request, ctx, bs) for bs in sizes}
        present = self._present
        credit = self.credit
        rcs = self.rcs
        if len(sizes) == 1:
            bs = next(iter(sizes))
            hashes = by_size[bs]
            nh = len(hashes)
            prefill = [max((pt + isl) / bs - credit * ov, 0.0) for pt, ov in zip(self.ptok, overlap)]
            if nh:
                h0, hl = hashes[0], hashes[-1]
                # new blocks: all of them unless block 0 is active; none if the last one is
                decode = [float(len(rc) + nh) if h0 not in rc else float(len(rc)) if hl in rc
                          else float(len(rc) + nh - present(rc, hashes)) for rc in rcs]
            else:
                decode = [float(len(rc)) for rc in rcs]
        else:
            prefill, decode = [], []
            for i in range(n):
                bs = reps[i].block_size
                hashes = by_size[bs]
                rc = rcs[i]
                prefill.append(max((self.ptok[i] + isl) / bs - credit * overlap[i], 0.0))
                decode.append(float(len(rc) + len(hashes) - present(rc, hashes)))
        scale, rw = self.scale, self.req_weight
        if rw:
            cost = [scale * p + d + rw * q for p, d, q in zip(prefill, decode, self.nreq)]
        else:
            cost = [scale * p + d for p, d in zip(prefill, decode)]
        self._pending = (request.id, by_size, overlap)
        scores = {"cost": cost, "overlap_blocks": overlap, "prefill_blocks": prefill, "decode_blocks": decode}
        if self.temperature == 0.0:
            best = min(cost)
            first = cost.index(best)
            if cost.count(best) == 1:
                return Decision(first, "lowest_cost", self.everyone, scores, {"tied": (first,)})
            tied = [i for i in range(n) if cost[i] == best]
            pick = tied[self.rng.randrange(len(tied))]
            return Decision(pick, "tie_random", self.everyone, scores, {"tied": tuple(tied)})
        return Decision(self._softmax(cost), "softmax", self.everyone, scores,
                        {"temperature": self.temperature})

    def _softmax(self, cost: list) -> int:
        lo, hi = min(cost), max(cost)
        n = len(cost)
        if lo == hi:
            probs = [1.0 / n] * n
        else:
            scale = -1.0 / ((hi - lo) * self.temperature)
            top = lo * scale
            probs = [math.exp(c * scale - top) for c in cost]
        total = sum(probs)
        u = self.rng.random()
        acc = 0.0
        for i, p in enumerate(probs):
            acc += p / total
            if u <= acc:
                return i
        return n - 1

    def dispatched(self, request, replica, ctx):
        rid, by_size, overlap = self._pending
        self._pending = (None, None, None)
        bs = ctx.replicas[replica].block_size
        if rid == request.id and bs in by_size:
            hashes, ov = by_size[bs], overlap[replica]
        else:
            hashes, ov = self._hashes(request, ctx, bs), ctx.cached_blocks(replica, request)
        if request.id in self.active:
            self.released(request, self.active[request.id][0], ctx.time)
        rc = self.rcs[replica]
        for h in hashes:
            rc[h] = rc.get(h, 0) + 1
        tokens = max(len(ctx.prompt_tokens(request)) - int(ov) * bs, 0)
        self.ptok[replica] += tokens
        self.nreq[replica] += 1
        self.active[request.id] = (replica, hashes, tokens)

    def prefill_done(self, request, replica, time):
        entry = self.active.get(request.id)
        if entry is None or entry[2] == 0:
            return
        r, hashes, tokens = entry
        self.ptok[r] -= tokens
        self.active[request.id] = (r, hashes, 0)

    def released(self, request, replica, time):
        entry = self.active.pop(request.id, None)
        if entry is None:
            return
        r, hashes, tokens = entry
        self.ptok[r] -= tokens
        self.nreq[r] -= 1
        rc = self.rcs[r]
        for h in hashes:
            c = rc[h] - 1
            if c:
                rc[h] = c
            else:
                del rc[h]


class RefPrefixIndex:
    """PrefixIndex as it was (its add walks every hash twice), the reference."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.lru: dict[int, OrderedDict] = {}
        self.servers: dict[int, int] = {}

    def add(self, hashes, server: int) -> None:
        lru = self.lru.get(server)
        if lru is None:
            lru = self.lru[server] = OrderedDict()
        servers = self.servers
        cap = self.capacity
        bit = 1 << server
        for h in hashes:
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
                if len(lru) > cap:
                    old, _ = lru.popitem(last=False)
                    m = servers.get(old, 0) & ~bit
                    if m:
                        servers[old] = m
                    else:
                        servers.pop(old, None)
        for h in hashes:
            servers[h] = servers.get(h, 0) | bit

    def match(self, hashes, n: int) -> list:
        out = [0] * n
        held = []
        for h in hashes:
            m = self.servers.get(h, 0)
            if not m:
                break
            held.append(m)
        for m in held:
            for i in range(n):
                if m >> i & 1:
                    out[i] += 1
        return out


class RefWeighted(Router):
    name = "weighted"

    validate = Weighted.validate
    defaults = {"queue_weight": 2.0, "kv_weight": 2.0, "prefix_weight": 3.0, "prefix": "approximate",
                "hash_block_size": 64, "max_prefix_blocks": 256, "lru_capacity_per_server": 31250,
                "model": "m"}

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        c = self.config
        self.wq, self.wk, self.wp = float(c["queue_weight"]), float(c["kv_weight"]), float(c["prefix_weight"])
        self.precise = c["prefix"] == "precise"
        self.reads_prefix_cache = self.precise
        self.block = int(c["hash_block_size"])
        self.max_blocks = int(c["max_prefix_blocks"])
        self.index = RefPrefixIndex(int(c["lru_capacity_per_server"]))
        self.model_hash = hash(("model", c["model"]))
        self._pending = (None, None)
        self.everyone = tuple(range(self.n))

    def hashes(self, request, ctx) -> list:
        data = ctx.prompt_text(request).encode()
        b = self.block
        if len(data) < b:
            return []
        data = data[:b * self.max_blocks]
        h = self.model_hash
        out = [h]
        for i in range(0, len(data) - b + 1, b):
            h = hash((data[i:i + b], h))
            out.append(h)
        return out

    def route(self, request, ctx):
        n = self.n
        reps = ctx.replicas
        waiting = list(map(_WAITING, reps))
        lo, hi = min(waiting), max(waiting)
        if hi == lo:
            queue = [1.0] * n
        else:
            span = float(hi - lo)
            queue = [(hi - w) / span for w in waiting]
        kv = [1.0 - u for u in map(_KV, reps)]
        if self.precise:
            prefix = normalized_precise(ctx.cached_prefix(request))
            detail = {}
        elif self.wp > 0:
            hashes = self.hashes(request, ctx)
            self._pending = (request.id, hashes)
            total_blocks = len(hashes)
            m = self.index.match(hashes, n)
            prefix = [x / total_blocks for x in m] if total_blocks else [0.0] * n
            detail = {"prefix_blocks": total_blocks}
        else:
            prefix = [NAN] * n
            detail = {}
        wq, wk, wp = self.wq, self.wk, self.wp
        if wp > 0:
            total = [wq * q + wk * k + wp * p for q, k, p in zip(queue, kv, prefix)]
        else:
            total = [wq * q + wk * k for q, k in zip(queue, kv)]
        best = max(total)
        tied = [i for i in range(n) if total[i] == best]
        if len(tied) == 1:
            pick, reason = tied[0], "max_score"
        else:
            pick, reason = tied[self.rng.randrange(len(tied))], "tie_random"
        detail["tied"] = tuple(tied)
        scores = {"queue": queue, "kv": kv, "prefix": prefix, "total": total}
        return Decision(pick, reason, self.everyone, scores, detail)

    def dispatched(self, request, replica, ctx):
        if self.precise or self.wp <= 0:
            return
        rid, hashes = self._pending
        if rid != request.id:
            hashes = self.hashes(request, ctx)
        self._pending = (None, None)
        if hashes:
            self.index.add(hashes, replica)



@pytest.mark.parametrize("config", [{}, {"router_temperature": 0.4}, {"active_request_weight": 0.7},
                                    {"prefill_load_scale": 2.0, "overlap_score_credit": 0.5}])
@pytest.mark.parametrize("mixed", [False, True], ids=["one-size", "two-sizes"])
def test_vectorised_kv_cost_is_the_plain_formula(config, mixed, monkeypatch):
    """kv_cost over every replica at once (numpy, a bitmask of the replicas holding block 0)
    gives the plain per-replica formula's costs, ties and picks to the byte."""
    _same_as_reference("kv_cost", config, RefKvCost, mixed, monkeypatch)


@pytest.mark.parametrize("config", [{}, {"prefix_weight": 0}, {"prefix": "precise"},
                                    {"queue_weight": 0.5, "hash_block_size": 9, "lru_capacity_per_server": 40}])
@pytest.mark.parametrize("mixed", [False, True], ids=["one-size", "two-sizes"])
def test_vectorised_weighted_is_the_plain_formula(config, mixed, monkeypatch):
    _same_as_reference("weighted", config, RefWeighted, mixed, monkeypatch)


def _same_as_reference(name, config, ref_cls, mixed, monkeypatch):
    wl = chat(n=160, rate_per_s=60.0, groups=5)
    rc = [{}, {"block_size": 32}, {}, {}, {"enable_prefix_caching": False}, {}] if mixed else None
    s = FleetSettings(replicas=6, router=name, router_config=config, seed=11, refresh_interval=20.0, replica_configs=rc)
    fast = simulate_fleet(wl, s, cost=MS)
    assert fast.routes["reason"].nunique() >= 1
    monkeypatch.setattr(fleet_mod, "make_router", lambda n, k, c, seed: ref_cls(k, c, seed))
    plain = simulate_fleet(wl, s, cost=MS)
    assert plain.routes["scores"].tolist() == fast.routes["scores"].tolist()
    assert plain.to_bytes() == fast.to_bytes()


def test_prefix_index_add_is_the_plain_walk():
    """PrefixIndex.add sets only the new hashes' bits when nothing left the LRU: the same LRUs and
    holders as walking every hash twice, with a capacity that evicts now and then."""
    rng = random.Random(8)
    for cap in (3, 10, 40, 10_000):
        fast, plain = PrefixIndex(cap), RefPrefixIndex(cap)
        for _ in range(400):
            start = rng.randrange(30)
            hashes = list(range(start, start + rng.randint(0, 25))) + [1000 + rng.randrange(50)]
            server = rng.randrange(4)
            fast.add(hashes, server)
            plain.add(hashes, server)
            assert fast.servers == plain.servers
            assert {k: list(v) for k, v in fast.lru.items()} == {k: list(v) for k, v in plain.lru.items()}
            assert fast.match(hashes, 4) == plain.match(hashes, 4)


# ---------------------------------------------------------------- the router cost target (issue 25): pieces, memo, fast pick

@pytest.mark.parametrize("capacity", [8192, 4, 1, 0])
def test_prompt_segments_and_own_hashes_are_the_whole_chain(capacity):
    """A prompt's chain in pieces (PromptSegments: its blocks' pieces, a cut block's part, its
    own hashes) is its whole chain at every block size, the first own hash made alone is the
    whole list's first, and the walk's own hashes are the chain past the whole blocks."""
    p = _Prompts(capacity)
    reqs = _requests(150, seed=30 + capacity)
    p.plan(reqs)
    for r in reqs + reqs[:30]:
        toks = block_prompt_tokens_unmemoized(r.prompt_blocks, r.prompt_len, r.id)
        for bs in BLOCK_SIZES:
            want = chain_hashes(toks, bs)
            p.reset(r)
            sg = p.segments(r, bs)
            assert sg.n == len(want)
            if sg.ntail:   # the first own hash alone, before the rest is made
                assert sg.first_tail() == want[sg.shared + sg.j]
            assert sg.hashes() == want, (r, bs)
            assert [h for pc in sg.pieces for h in pc] == want[:sg.shared]
            assert all(pc and pc[-1] == want[sum(map(len, sg.pieces[:i + 1])) - 1] for i, pc in enumerate(sg.pieces))
            if p._prefix(r) is not None:
                assert list(p.own_chain(r, bs)) == want[len(p.prefix[0].full_chain(bs)):]


def _random_index_run(seed: int):
    """A FleetPrefixIndex under random KV events (blocks of chains stored and evicted), and
    prompts that share prefixes: (index, watchers, prompts as (key, shared hashes, own hashes))."""
    from sim.fleet.prefix_index import FleetPrefixIndex
    rng = random.Random(seed)
    members = [0, 1, 3, 4, 6]
    idx = FleetPrefixIndex(members, 7)
    watch = {i: idx.watcher(i) for i in members}
    chains = [[rng.randrange(1 << 62) for _ in range(rng.randint(1, 12))] for _ in range(6)]
    held = {i: set() for i in members}
    for step in range(600):
        i = rng.choice(members)
        c = rng.choice(chains)
        if rng.random() < 0.6:   # store a prefix of a chain
            for h in c[:rng.randint(1, len(c))]:
                if h not in held[i]:
                    held[i].add(h)
                    watch[i](h, True)
        elif held[i]:            # evict one block, any (a cache need not stay prefix-closed)
            h = rng.choice(sorted(held[i]))
            held[i].discard(h)
            watch[i](h, False)
        k = rng.randrange(len(chains))
        cut = rng.randint(0, len(chains[k]))
        own = [rng.randrange(1 << 62) for _ in range(rng.randint(0, 3))] if rng.random() < 0.7 else chains[k][cut:]
        yield idx, (("p", k, cut), chains[k][:cut], own)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fleet_prefix_index_memo_is_the_plain_walk(seed):
    """The memo of a shared prefix's walk (kept until a KV event touches a hash it read) and the
    walk going on over the own hashes give what walking the whole prompt gives, at every step of
    random stores and evictions (a cache not always prefix-closed)."""
    hits = 0
    for idx, (key, shared, own) in _random_index_run(seed):
        hits += key in idx.memo
        base, alive, depth, some = idx.shared_run(key, lambda: shared)
        assert some == sum(1 << i for i, k in enumerate(base) if k)
        out = list(base)
        if alive:
            idx.walk(iter(own), alive, depth, out)
        plain = [0] * 7
        idx.leading(shared + own, plain)
        assert out == plain and depth == len(shared)
    assert 50 < hits < 550   # the memo was used, and dropped when a hash it read changed


def _crc_twins() -> tuple[str, str]:
    """Two request ids with the same crc32 (so the same own ids past their blocks; found by a
    search over f"twin-{i}")."""
    import zlib
    a, b = "twin-29685295", "twin-32060020"
    assert zlib.crc32(a.encode()) == zlib.crc32(b.encode())
    return a, b


def _pieces_workload(given_ids: bool) -> Workload:
    """Prompt blocks with own tails, cut last blocks, whole blocks only, no blocks; two requests
    with the same own ids (their ids' crc32 equal: the same own hashes, shared by two prompts);
    with given_ids, a prompt given as ids equal to another's blocks (a piece's hashes as own
    hashes: the router goes back to the plain dicts)."""
    reqs = _requests(110, seed=41, pool=3)
    a, b = _crc_twins()
    reqs += [Request(id=a, prompt_len=2 * PROMPT_BLOCK_TOKENS + 300, max_tokens=30, prompt_blocks=(0, 1),
                     arrival_time=40.0),
             Request(id=b, prompt_len=2 * PROMPT_BLOCK_TOKENS + 200, max_tokens=30, prompt_blocks=(0, 1),
                     arrival_time=41.0)]
    if given_ids:
        ids = block_prompt_tokens_unmemoized((7, 8), 2 * PROMPT_BLOCK_TOKENS + 50, "given")
        reqs.append(Request(id="given", prompt_len=len(ids), max_tokens=20, prompt_token_ids=tuple(ids),
                            arrival_time=60.0))
    reqs = [Request(id=r.id, prompt_len=r.prompt_len, max_tokens=8 + i % 40, prompt_blocks=r.prompt_blocks,
                    prompt_token_ids=r.prompt_token_ids, arrival_time=r.arrival_time * 25.0)
            for i, r in enumerate(reqs)]
    reqs.sort(key=lambda r: r.arrival_time)
    return Workload(reqs, {"enable_prefix_caching": True, "num_gpu_blocks": 400, "block_size": 16,
                           "max_num_seqs": 16, "max_num_batched_tokens": 1024})


@pytest.mark.parametrize("given_ids", [False, True], ids=["blocks", "given-ids"])
@pytest.mark.parametrize("config", [{}, {"router_temperature": 0.4}, {"active_request_weight": 0.7},
                                    {"prefill_load_scale": 2.0, "overlap_score_credit": 0.5}])
@pytest.mark.parametrize("record", [True, False], ids=["scores", "no-scores"])
@pytest.mark.parametrize("replicas", [5, 1])
def test_kv_cost_in_pieces_is_the_plain_formula(config, given_ids, record, replicas, monkeypatch):
    """kv_cost keeping its active blocks in pieces (and, with no scores kept, costing only the
    replicas that can be lowest) routes every request as the plain per-hash formula does, to the
    byte: own hashes shared by two prompts (active together on one replica), cut blocks, a
    prompt given as ids (the plain dicts from then on), with and without scores."""
    wl = _pieces_workload(given_ids)
    s = FleetSettings(replicas=replicas, router="kv_cost", router_config=config, seed=3, record_scores=record)
    routers = []
    real = fleet_mod.make_router

    def keep(*a, **k):
        routers.append(real(*a, **k))
        return routers[-1]
    monkeypatch.setattr(fleet_mod, "make_router", keep)
    fast = simulate_fleet(wl, s, cost=MS)
    assert routers[0].in_pieces is (not given_ids)   # the given ids sent it back to the plain dicts
    monkeypatch.setattr(fleet_mod, "make_router", lambda n, k, c, seed: RefKvCost(k, c, seed))
    plain = simulate_fleet(wl, s, cost=MS)
    assert plain.routes["replica"].tolist() == fast.routes["replica"].tolist()
    assert plain.routes["reason"].tolist() == fast.routes["reason"].tolist()
    assert plain.to_bytes() == fast.to_bytes()


def test_kv_cost_lowest_is_route_with_every_cost(monkeypatch):
    """The fast pick (_lowest: only the replicas that can be lowest costed) gives, at every
    decision of a 24-replica chat fleet, the pick, reason and ties of costing every replica."""
    from sim.fleet.routers.dynamo import KvCost
    real = KvCost._lowest
    seen = []

    def both(self, cached, some, less, isl, bs, nh):
        assert some == sum(1 << i for i, c in enumerate(cached) if c)   # the loop's bits are its counts'
        state = self.rng.getstate()
        d = real(self, cached, some, less, isl, bs, nh)
        after = self.rng.getstate()
        self.rng.setstate(state)
        ov = [float(c) for c in cached]
        cost = [max((self.ptok[i] + isl) / bs - ov[i], 0.0) + float(self.nblocks[i] + nh - less.get(i, 0))
                for i in range(self.n)]
        best = min(cost)
        tied = [i for i, c in enumerate(cost) if c == best]
        pick = tied[0] if len(tied) == 1 else tied[self.rng.randrange(len(tied))]
        assert (d.replica, d.detail["tied"]) == (pick, tuple(tied))
        assert self.rng.getstate() == after
        seen.append(len(tied))
        return d
    monkeypatch.setattr(KvCost, "_lowest", both)
    simulate_fleet(chat(n=700, rate_per_s=90.0, groups=6),
                   FleetSettings(replicas=24, router="kv_cost", record_scores=False), cost=MS, digest=True)
    assert len(seen) == 700 and max(seen) > 1 and seen.count(1) > 100


def test_prefix_index_match_split_is_the_plain_match():
    """GIE's index matching a shared prefix from its memo (dropped when a hash it read changes
    servers: added to a server's LRU, or out of it) and then the prompt's own hashes gives
    match over the whole list, with capacities that evict all the time and never."""
    rng = random.Random(12)
    hits, listed = {}, {}
    for cap in (5, 30, 10_000):
        fast, plain = PrefixIndex(cap), RefPrefixIndex(cap)
        listed[cap] = 0
        prefixes = {k: [rng.randrange(1 << 60) for _ in range(rng.randint(1, 15))] for k in range(5)}
        hits[cap] = 0
        for _ in range(500):
            k = rng.randrange(5)
            shared = prefixes[k]
            own = [rng.randrange(1 << 60) for _ in range(rng.randint(0, 4))]
            hits[cap] += k in fast.memo
            assert fast.match_split(k, shared, own, 6) == plain.match(shared + own, 6)
            assert fast.match_split(None, shared, own, 6) == plain.match(shared + own, 6)
            kept, pairs = fast.match_kept(k, shared, own, 6)   # the memo's list and its servers above 0
            assert kept == plain.match(shared + own, 6)
            if pairs is not None:
                listed[cap] += 1
                assert kept is fast.memo[k][4] and pairs == [(i, m) for i, m in enumerate(kept) if m]
            server = rng.randrange(6)
            fast.add(shared + own, server)
            plain.add(shared + own, server)
    assert hits[10_000] > 400 and hits[5] < hits[30] < hits[10_000]   # the memo used; dropped as the LRUs change
    assert listed[10_000] > 300
