"""`kv_cost`: NVIDIA Dynamo's KV router (the default worker selector).

Sources: ai-dynamo/dynamo `lib/kv-router/src/scheduling/selector.rs` (DefaultWorkerSelector,
`worker_logit`, `softmax_sample`), `lib/kv-router/src/scheduling/config.rs` (KvRouterConfig
defaults: overlap_score_credit 1.0, prefill_load_scale 1.0, router_temperature 0.0,
decode_active_request_weight 0.0), `lib/kv-router/src/sequences/single.rs` (ActiveSequences)
and `prompt_registry.rs` (WorkerLoadProjection::potential_decode_blocks); the older
`lib/llm/src/kv_router/scheduler.rs` had the same shape as `overlap_score_weight * prefill_blocks
+ decode_blocks` (the weight has since been renamed prefill_load_scale).

Per replica, lower is better:
    raw_prefill_blocks = (active_prefill_tokens + prompt tokens) / block_size
    cost = prefill_load_scale * max(raw_prefill_blocks - overlap_score_credit * overlap_blocks, 0)
         + decode_blocks + active_request_weight * active_requests
- overlap_blocks: leading prompt blocks in the replica's real prefix cache (ctx.cached_blocks;
  Dynamo's indexer follows the workers' KV events).
- active_prefill_tokens: for each request the router sent there whose prefill is not done, its
  prompt tokens minus its cached tokens at dispatch (overlap x block size); dropped when
  `prefill_done` is called for it (Dynamo: the first output token) or when it is released.
- decode_blocks = the replica's unique active blocks (the full prompt blocks of the requests the
  router sent there and that are not released, deduplicated by chain hash: Dynamo assumes KV
  reuse) + this prompt's blocks not among them. Dynamo also adds output blocks as tokens are
  generated; the router is not told of generated tokens here, so they are not counted.
Pick: router_temperature 0 -> the lowest cost, a tie drawn uniformly with the seeded rng
(Dynamo's reservoir sampling among tied minima); above 0 -> a softmax draw over the negated
costs rescaled by their range (`softmax_sample_entries`), with the seeded rng.
Scores: "cost", "overlap_blocks", "prefill_blocks" (after the credit, before the scale),
"decode_blocks". Reasons: "lowest_cost", "tie_random", "softmax".

The active blocks are kept in one of two ways, with the same counts (tested against the plain
per-hash dicts). Plain: per replica a dict of every active block hash. In pieces (when the
routing loop offers ctx.prompt_segments and every replica has one block size): a prompt's
chain is its prompt blocks' pieces (lists of hashes shared by every prompt with those blocks),
a part of a cut last block's piece, and the hashes of its own ids (PromptSegments). Per
replica, each piece counts its active users (its hashes are active when one uses it whole, or
its first j when the longest partial use has j), and the own hashes are grouped by their
first hash (a group of one holds its own count of hashes; two with the same first hash, its
hashes are made and merged). Active blocks are prefix-closed and a chain hash fixes the tokens
before it, so a piece's hash and an own hash are the same only if their tokens are: that is
checked (an own chain's first hash against every piece seen, a new piece against the own
chains' first hashes), and the router goes back to the plain dicts, for good, if it ever
happens (only for a prompt given as ids equal to prompt blocks'), or past REGISTRY hashes.
"""
from __future__ import annotations

import math
from itertools import compress

import numpy as np

from ..routing import Decision, Router, register_router
from .kv_active import ActivePieces


def block_hashes(tokens, block_size: int) -> list:
    """Chain hashes of the prompt's full blocks, as the replica's prefix cache forms them
    (sim/scheduler.py Seq.extend_hashes); tuples of ints hash the same in every process."""
    h = 0
    out = []
    for i in range(len(tokens) // block_size):
        h = hash((h, tuple(tokens[i * block_size:(i + 1) * block_size])))
        out.append(h)
    return out


_IDLE = (None, None, None, None, None)   # no decision waiting for its dispatch


@register_router("kv_cost")
class KvCost(ActivePieces, Router):
    defaults = {"prefill_load_scale": 1.0, "overlap_score_credit": 1.0, "router_temperature": 0.0,
                "active_request_weight": 0.0}
    reads_prefix_cache = True

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        c = self.config
        self.scale = float(c["prefill_load_scale"])
        self.credit = float(c["overlap_score_credit"])
        self.temperature = float(c["router_temperature"])
        self.req_weight = float(c["active_request_weight"])
        # route's formula with nothing but the counts: the lowest cost can be found without costing all (_lowest)
        self.plain = self.temperature == 0.0 and self.scale == 1.0 and not self.req_weight
        self.rcs = [dict() for _ in range(self.n)]   # per replica: block hash -> active requests holding it
        # the same per replica as arrays, for a decision computed over every replica at once:
        self.ptok = [0] * self.n      # prefill tokens not yet done
        self.nreq = [0] * self.n      # active requests
        self.nblocks = [0] * self.n   # unique active blocks (len of rcs[i])
        # per replica ptok + block size x nblocks (one block size): the order of the costs of the
        # replicas that hold none of the prompt (see _lowest); an upper bound on them
        self.keys = [0] * self.n
        self.key_bound = 0
        self.low, self.nlow, self.lowi = None, 0, None   # the lowest key, how many have it, one at it
        self.bs = None
        self.holders: dict = {}       # block hash -> bitmask of the replicas it is active on
        self.active: dict = {}        # request id -> [replica, hashes, prefill tokens still counted]
        # the last decision, for its dispatch: (request id, block size or None for several, its
        # hashes or segments (a dict by block size for several), cached blocks, prompt length)
        self._pending = _IDLE
        self.everyone = tuple(range(self.n))
        self.alone = tuple((i,) for i in range(self.n))   # a lone pick's "tied"
        self._less, self._cand, self._costs = {}, [], []   # route's and _lowest's scratch
        self._sizes = (None, None)    # (the views' list, their block sizes): they do not change
        # in pieces (see the module text); None until the first decision says whether it can be
        self.in_pieces = None
        self.full = [dict() for _ in range(self.n)]    # per replica: piece key -> users of it whole
        self.part = [dict() for _ in range(self.n)]    # per replica: piece key -> {j: users of its first j}
        self.tails = [dict() for _ in range(self.n)]   # per replica: first own hash -> the PromptSegments
        self.tail_counts = [dict() for _ in range(self.n)]   # per replica: first own hash -> hash -> users (2+ chains)
        self.held: dict = {}       # piece key or first own hash -> bitmask of the replicas it is active on
        self.piece_len: dict = {}  # piece key -> its hashes, for every piece seen
        self.registry: set = set()  # every hash of those pieces
        self.own_firsts: dict = {}  # first own hash -> active own chains with it (all replicas)

    def _hashes(self, request, ctx, block_size):
        shared = getattr(ctx, "block_hashes", None)   # the loop's own chain hashes, if it offers them
        if shared is not None:
            return shared(request, block_size)
        return block_hashes(ctx.prompt_tokens(request), block_size)

    @staticmethod
    def _length(request, ctx) -> int:
        """The prompt's length in tokens (the loop knows it without making the ids)."""
        known = getattr(ctx, "prompt_length", None)
        return known(request) if known is not None else len(ctx.prompt_tokens(request))

    @staticmethod
    def _present(rc: dict, hashes: list) -> int:
        """How many leading hashes are active on the worker. Active blocks are prefix-closed
        (a chain hash implies its whole prefix came with the same request), so halve."""
        if not rc or not hashes or hashes[0] not in rc:
            return 0
        lo, hi = 1, len(hashes)
        if hashes[-1] in rc:
            return hi
        hi -= 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if hashes[mid - 1] in rc:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _block_sizes(self, reps) -> tuple:
        seen, sizes = self._sizes
        if seen is not reps or sizes is None:
            sizes = tuple(sorted({r.block_size for r in reps}))
            self._sizes = (reps, sizes)
        return sizes

    REGISTRY = 1 << 21   # piece hashes kept at most (then the plain dicts)

    def route(self, request, ctx):
        n = self.n
        reps = ctx.replicas
        isl = self._length(request, ctx)
        bits = getattr(ctx, "cached_prefix_bits", None)   # the loop's answer with its replicas above 0
        if bits is not None:
            cached, some = bits(request)
        else:
            cached, some = ctx.cached_prefix(request), None
        segs = self._segments(request, ctx, reps)
        sizes = self._block_sizes(reps)
        credit = self.credit
        if segs is not None:
            bs = sizes[0]
            nh = segs.n
            less = self._less   # replica -> blocks of the prompt active on it (those holding its first block)
            less.clear()
            held = self.held.get(segs.first_key(), 0) if nh else 0
            if held:
                present = self._present_pieces
                # a replica using every whole piece and no own chain with this one's first hash
                # holds the shared part alone (most holders): no call to _present_pieces
                keys = [pc[-1] for pc in segs.pieces] if segs.part is None else None
                t1 = segs.first_tail()
                fulls, tails = self.full, self.tails
                while held:
                    low = held & -held
                    i = low.bit_length() - 1
                    held ^= low
                    if keys is not None and all(map(fulls[i].get, keys)) and (t1 is None or t1 not in tails[i]):
                        less[i] = segs.shared
                    else:
                        less[i] = present(i, segs)
            self._pending = (request.id, bs, segs, cached, isl)
            if self.plain and not ctx.record_scores and self.key_bound + isl + bs * nh < 1 << 45:
                return self._lowest(cached, some, less, isl, bs, nh)
            overlap = np.array(cached, dtype=np.float64)
            x = (np.array(self.ptok, dtype=np.int64) + isl) / bs
            x -= overlap if credit == 1.0 else credit * overlap
            prefill = np.where(x < 0.0, 0.0, x)    # max(x, 0.0): 0.0 only where 0.0 > x
            blocks = np.array(self.nblocks, dtype=np.int64) + nh
            for i, k in less.items():
                blocks[i] -= k
            decode = blocks.astype(np.float64)
        elif len(sizes) == 1:
            # every replica at once (numpy): the same float operations, in the same order, as
            # max((ptok + isl) / bs - credit * overlap, 0.0) and len(rc) + new blocks per replica
            bs = sizes[0]
            hashes = self._hashes(request, ctx, bs)
            self._pending = (request.id, bs, hashes, cached, isl)
            nh = len(hashes)
            overlap = np.array(cached, dtype=np.float64)
            x = (np.array(self.ptok, dtype=np.int64) + isl) / bs
            x -= overlap if credit == 1.0 else credit * overlap
            prefill = np.where(x < 0.0, 0.0, x)    # max(x, 0.0): 0.0 only where 0.0 > x
            blocks = np.array(self.nblocks, dtype=np.int64) + nh   # new blocks: all unless block 0 is active
            if nh:
                held = self.holders.get(hashes[0], 0)
                if held:
                    rcs, hl, present = self.rcs, hashes[-1], self._present
                    while held:
                        low = held & -held
                        i = low.bit_length() - 1
                        held ^= low
                        rc = rcs[i]
                        blocks[i] = len(rc) if hl in rc else len(rc) + nh - present(rc, hashes)
            decode = blocks.astype(np.float64)
        else:
            by_size = {bs: self._hashes(request, ctx, bs) for bs in sizes}
            self._pending = (request.id, None, by_size, cached, isl)
            present = self._present
            ptok = self.ptok
            overlap, prefill, decode = list(map(float, cached)), [], []
            for i in range(n):
                bs = reps[i].block_size
                hashes = by_size[bs]
                rc = self.rcs[i]
                prefill.append(max((ptok[i] + isl) / bs - credit * overlap[i], 0.0))
                decode.append(float(len(rc) + len(hashes) - present(rc, hashes)))
            overlap, prefill, decode = np.array(overlap), np.array(prefill), np.array(decode)
        scale, rw = self.scale, self.req_weight
        cost = prefill + decode if scale == 1.0 else scale * prefill + decode
        if rw:
            cost += rw * np.array(self.nreq, dtype=np.int64)
        scores = {"cost": cost.tolist(), "overlap_blocks": overlap.tolist(), "prefill_blocks": prefill.tolist(),
                  "decode_blocks": decode.tolist()} if ctx.record_scores else {}
        if self.temperature == 0.0:
            best = cost.min()
            tied = np.flatnonzero(cost == best)
            if len(tied) == 1:
                first = int(tied[0])
                return Decision(first, "lowest_cost", self.everyone, scores, {"tied": (first,)})
            tied = tied.tolist()
            pick = tied[self.rng.randrange(len(tied))]
            return Decision(pick, "tie_random", self.everyone, scores, {"tied": tuple(tied)})
        return Decision(self._softmax(cost.tolist()), "softmax", self.everyone, scores,
                        {"temperature": self.temperature})

    def _lowest(self, cached: list, some: int | None, less: dict, isl: int, bs: int, nh: int) -> Decision:
        """The pick of route's formula (no scores kept, temperature 0, scale 1, no request
        weight), costing only the replicas that can be lowest. A replica that holds none of the
        prompt (no overlap, no active block of it) costs (ptok + isl) / bs + (nblocks + nh), in
        exact arithmetic (keys[i] + isl + bs * nh) / bs: so of those, only the ones with the
        lowest key can be lowest or tie, as long as the float's rounding (under 2**-52 of the
        cost) is far below the 1 / bs between two keys (route checks the bound). The others (a
        few: those holding the prompt's first block) are costed each, with route's operations.
        Those cost at most their key's cost (the credit is >= 0: Router.check_config), so the
        lowest key over every replica will do; and the replicas at it with the same ptok (so the
        same nblocks) cost the same: one of each ptok is costed. `some`: a bitmask of the
        replicas with overlap > 0 (None: read from `cached`)."""
        ptok, nblocks, credit = self.ptok, self.nblocks, self.credit
        cand, costs = self._cand, self._costs   # scratch lists: no garbage to collect
        if some is None:
            cand[:] = compress(range(self.n), cached)   # overlap > 0
        else:
            cand.clear()
            while some:
                low = some & -some
                cand.append(low.bit_length() - 1)
                some ^= low
        for i in less:
            if not cached[i]:
                cand.append(i)
        group = self._low_group(cand)
        if len(group) <= 3 or len(ps := set(map(ptok.__getitem__, group))) == len(group):
            cand += group   # a few, or all different: each costed
            group = ()
        cand.sort()
        k = len(cand)
        if group:   # many at the lowest key (idle replicas at low load): one of each ptok costed
            if len(ps) == 1:
                cand.append(group[0])
            else:
                one = {}
                for i in group:
                    one.setdefault(ptok[i], i)
                cand += one.values()
        costs.clear()
        for i in cand:
            x = (ptok[i] + isl) / bs
            x -= float(cached[i]) if credit == 1.0 else credit * float(cached[i])
            costs.append((0.0 if x < 0.0 else x) + float(nblocks[i] + nh - less.get(i, 0)))
        best = min(costs)
        if not group:
            if costs.count(best) == 1:
                first = cand[costs.index(best)]
                return Decision(first, "lowest_cost", self.everyone, {}, {"tied": self.alone[first]})
            tied = list(compress(cand, map(best.__eq__, costs)))
        else:
            tied = list(compress(cand[:k], map(best.__eq__, costs)))
            low = [ptok[i] for i, c in zip(cand[k:], costs[k:]) if c == best]
            if low:
                mixed = bool(tied)
                tied += group if len(low) == len(ps) else [i for i in group if ptok[i] in low]
                if mixed:
                    tied.sort()
            if len(tied) == 1:
                return Decision(tied[0], "lowest_cost", self.everyone, {}, {"tied": self.alone[tied[0]]})
        pick = tied[self.rng.randrange(len(tied))]
        return Decision(pick, "tie_random", self.everyone, {}, {"tied": tuple(tied)})

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
        rid, pbs, got, overlap, isl = self._pending
        self._pending = _IDLE
        bs = ctx.replicas[replica].block_size
        hashes = None
        if rid == request.id:
            hashes = got if pbs == bs else got.get(bs) if pbs is None else None
        if hashes is not None and (self.in_pieces or isinstance(hashes, list)):
            ov = overlap[replica]
        else:
            ov = ctx.cached_blocks(replica, request)
            hashes = self._segments(request, ctx, ctx.replicas)
            if hashes is None:
                hashes = self._hashes(request, ctx, bs)
            isl = self._length(request, ctx)
        active = self.active
        if request.id in active:
            self.released(request, active[request.id][0], ctx.time)
        tokens = max(isl - int(ov) * bs, 0)
        self.ptok[replica] += tokens
        self.nreq[replica] += 1
        active[request.id] = [replica, hashes, tokens]
        if self.in_pieces:
            self._use(replica, hashes, 1)   # nblocks and keys[replica] updated there
            return
        rc = self.rcs[replica]
        holders = self.holders
        bit = 1 << replica
        for h in hashes:
            c = rc.get(h, 0)
            rc[h] = c + 1
            if not c:
                holders[h] = holders.get(h, 0) | bit
        self.nblocks[replica] = len(rc)

    def prefill_done(self, request, replica, time):
        entry = self.active.get(request.id)
        if entry is None or entry[2] == 0:
            return
        r = entry[0]
        self.ptok[r] -= entry[2]
        entry[2] = 0
        if self.bs is not None:
            self._rekey(r)

    def released(self, request, replica, time):
        entry = self.active.pop(request.id, None)
        if entry is None:
            return
        r, hashes, tokens = entry
        self.ptok[r] -= tokens
        self.nreq[r] -= 1
        if self.in_pieces:
            self._use(r, hashes, -1)   # keys[r] updated there
            return
        rc = self.rcs[r]
        holders = self.holders
        keep = ~(1 << r)
        for h in hashes:
            c = rc[h] - 1
            if c:
                rc[h] = c
            else:
                del rc[h]
                m = holders[h] & keep
                if m:
                    holders[h] = m
                else:
                    del holders[h]
        self.nblocks[r] = len(rc)

    # what a page may want to show
    def active_blocks(self, replica: int) -> int:
        return int(self.nblocks[replica])

    def active_prefill_tokens(self, replica: int) -> int:
        return int(self.ptok[replica])
