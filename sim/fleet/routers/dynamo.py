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
"""
from __future__ import annotations

import math

from ..routing import Decision, Router, register_router


def block_hashes(tokens, block_size: int) -> list:
    """Chain hashes of the prompt's full blocks, as the replica's prefix cache forms them
    (sim/scheduler.py Seq.extend_hashes); tuples of ints hash the same in every process."""
    h = 0
    out = []
    for i in range(len(tokens) // block_size):
        h = hash((h, tuple(tokens[i * block_size:(i + 1) * block_size])))
        out.append(h)
    return out


@register_router("kv_cost")
class KvCost(Router):
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

    # what a page may want to show
    def active_blocks(self, replica: int) -> int:
        return len(self.rcs[replica])

    def active_prefill_tokens(self, replica: int) -> int:
        return self.ptok[replica]
