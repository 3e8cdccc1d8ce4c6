"""`cache_aware`: vllm-router's and sglang-router's approximate-tree policy.

Sources: vllm-project/router `src/policies/cache_aware.rs` and `src/tree.rs`; sgl-project/sglang
`sgl-model-gateway/src/policies/cache_aware.rs` and `tree.rs`; what was observed on the real
vllm-router 0.1.17 and sglang-router 0.3.2 (the fleet kit's README, "How each router decides").

Per request, with the router's in-flight counts as loads:
1. imbalanced = max_load - min_load > balance_abs_threshold AND max_load > balance_rel_threshold
   * min_load: the least-loaded worker (the first in worker order on a tie) -> "load_imbalance";
   the prompt is still inserted into the tree for the worker it went to.
2. else the longest prefix match over the one shared tree; match_rate = matched / prompt length
   (tokens, or characters). match_rate > cache_threshold -> the owner of the deepest matched node
   -> "prefix_hit"; else the least-loaded worker (first on a tie) -> "prefix_miss".
   Several owners of that node: `owner` "creator" (the default) is what the sources do - the
   node's cached last tenant, i.e. the worker whose prompt created the node (a split keeps it),
   while that worker is still on the node, else the first worker added to it. vllm-router
   0.1.17 was seen not to follow it (a match held by a busy and an idle replica went to the
   idle one); `owner` "least_loaded" takes the least-loaded owner (first in worker order on a
   tie) for that reading.
The prompt goes into the tree in `dispatched`, for the replica it really went to (the whole
prompt, whether or not that replica still holds it in KV). Every `eviction_interval_ms` of
router time (from time 0; 0 = never, as the sources' eviction thread is off at 0) the tree is
cut to `max_tree_size` elements per worker, least recently used leaves first.

`granularity` "token" keys the tree by the prompt's token ids (vllm-router 0.1.17: the metric
vllm_router_prefix_routing_decisions_total and a probe showed token-level matches, e.g. 30 of 80
tokens a hit); "char" by the characters of ctx.prompt_text (sglang-router 0.3.2 and the stored
sources; sglang's rate divides byte lengths, the same for ASCII text). `flavor` sets the
defaults the two differ in; a setting given explicitly wins:
  vllm:   granularity token, eviction_interval_ms 120000, max_tree_size 33554432
  sglang: granularity char,  eviction_interval_ms 60000,  max_tree_size 67108864
(sglang-router 0.3.2's start-up log: eviction_interval_secs 60, max_tree_size 67108864.)

Speed, not a rule: a token key made of prompt blocks walks the tree over its shared blocks once
per prefix (kept until a split or an eviction), then over the request's own ids alone; the
insert in `dispatched` follows route's walk (RadixTree.match_on, insert_walked; the same tree as
walking the whole key each time, tests/fleet/test_radix_walked.py).

Decision.scores: "matched" (elements of the prompt each worker's part of the tree matches) and
"in_flight"; detail: match_rate, matched, prompt_len and, on a hit, the owners of the node.
"""
from __future__ import annotations

from array import array
from ..radix import RadixTree
from ..routing import Decision, Router, least_loaded, register_router

FLAVORS = {
    "vllm": {"granularity": "token", "eviction_interval_ms": 120000, "max_tree_size": 33554432},
    "sglang": {"granularity": "char", "eviction_interval_ms": 60000, "max_tree_size": 67108864},
}


@register_router("cache_aware")
class CacheAware(Router):
    defaults = {
        "flavor": "vllm",
        "cache_threshold": 0.3,
        "balance_abs_threshold": 64,
        "balance_rel_threshold": 1.5,
        "eviction_interval_ms": 120000,
        "max_tree_size": 33554432,
        "granularity": "token",
        "owner": "creator",
    }

    reads_engine = False   # its own in-flight counts and its own tree

    @classmethod
    def check_config(cls, config):
        given = dict(config or {})
        out = super().check_config(given)
        for k, v in FLAVORS[out["flavor"]].items():
            if k not in given:
                out[k] = v
        return out

    @classmethod
    def validate(cls, config):
        for key, choices in (("flavor", tuple(FLAVORS)), ("granularity", ("token", "char")),
                             ("owner", ("creator", "least_loaded"))):
            if config[key] not in choices:
                raise ValueError(f"router cache_aware setting {key} must be {' or '.join(choices)}, "
                                 f"not {config[key]!r}")
        if config["cache_threshold"] > 1:
            raise ValueError(f"router cache_aware setting cache_threshold must be between 0 and 1, "
                             f"not {config['cache_threshold']!r}")

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        c = self.config
        self.threshold = float(c["cache_threshold"])
        self.abs_t = float(c["balance_abs_threshold"])
        self.rel_t = float(c["balance_rel_threshold"])
        self.interval = float(c["eviction_interval_ms"])
        self.max_size = int(c["max_tree_size"])
        self.by_token = c["granularity"] == "token"
        self.owner_least_loaded = c["owner"] == "least_loaded"
        self.tree = RadixTree(() if self.by_token else "")
        for i in range(self.n):
            self.tree.add_tenant(i)      # init_workers: insert("", worker) for each worker
        self.next_eviction = self.interval if self.interval > 0 else float("inf")
        self.evictions = 0
        self._pending = (None, None, None, None, 0)   # (request id, key, its walk, tree version, base) from route
        # token keys made of prompt blocks: the tree's walk over each shared prefix, kept while
        # the tree's shape does not change (a split or an eviction empties it)
        self.walks: dict = {}
        self.walks_shape = 0
        self.everyone = tuple(range(self.n))

    def key_of(self, request, ctx):
        """The prompt's whole key (walk_of's way where the loop offers the prompt's parts)."""
        if self.by_token:
            ids = ctx.prompt_tokens(request)
            try:
                return array("I", ids)      # 4 bytes a token in the tree; slices compare in C
            except (OverflowError, TypeError):
                return tuple(ids)
        return ctx.prompt_text(request)

    def maybe_evict(self, time: float) -> None:
        if time >= self.next_eviction:
            self.tree.evict_by_size(self.max_size)
            self.evictions += 1
            # the timer's ticks missed while no request came do nothing more (the tree is already
            # within its size): skip to the first tick after `time`, adding the interval tick by
            # tick as the timer does, but in one jump across a long quiet spell
            ahead = (time - self.next_eviction) // self.interval
            if ahead > 1000:
                self.next_eviction += ahead * self.interval
            while self.next_eviction <= time:
                self.next_eviction += self.interval

    WALKS_KEPT = 4096   # shared prefixes whose walk is kept at most (then it starts again empty)

    def walk_of(self, request, ctx) -> tuple:
        """(key, walk, base, prompt length): tree.match of the prompt's key, where key holds the
        elements from `base` on. A token key made of prompt blocks walks its shared part from the
        walk kept for it (when the tree holds all of it), then the request's own ids alone."""
        tree = self.tree
        made = getattr(ctx, "prompt_parts", None) if self.by_token else None
        parts = made(request) if made is not None else None
        if parts is None:
            key = self.key_of(request, ctx)
            return key, tree.match(key), 0, len(key)
        prefix, shared, own = parts
        walks = self.walks
        if self.walks_shape != tree.shape:
            walks.clear()
            self.walks_shape = tree.shape
        base = len(shared)
        walk = walks.get(prefix)
        if walk is None:
            walk = tree.match(shared)
            if walk[0] != base:   # the tree lacks some of it: the whole key, walked whole
                key = shared + own
                return key, tree.match(key), 0, len(key)
            if len(walks) >= self.WALKS_KEPT:
                walks.clear()
            walks[prefix] = walk
        return own, tree.match_on(walk, own, base), base, base + len(own)

    def route(self, request, ctx):
        self.maybe_evict(ctx.time)
        n = self.n
        tree = self.tree
        key, walk, base, plen = self.walk_of(request, ctx)
        loads = ctx.in_flight
        lo, hi = min(loads), max(loads)
        matched, node, path = walk
        self._pending = (request.id, key, walk, tree.version, base)
        scores = {"matched": tree.matched_per_tenant(path, n), "in_flight": list(map(float, loads))} \
            if ctx.record_scores else {}
        rate = matched / plen if plen else 0.0
        detail = {"match_rate": rate, "matched": matched, "prompt_len": plen}
        everyone = self.everyone
        if hi - lo > self.abs_t and hi > self.rel_t * lo:
            return Decision(loads.index(lo), "load_imbalance", everyone, scores, detail)
        owner = tree.owner(node)          # the sources' tenant pick (and its 1-in-8 stamp refresh)
        if rate > self.threshold and owner is not None:
            owners = tuple(node.tenants)   # replicas only (tenants are replica indexes), bar a stray one
            if owners and max(owners) >= n:
                owners = tuple(t for t in owners if t < n)
            detail["owners"] = owners
            if self.owner_least_loaded and len(owners) > 1:
                owner = least_loaded(loads, sorted(owners))
            if owner < n:
                return Decision(owner, "prefix_hit", everyone, scores, detail)
        return Decision(loads.index(lo), "prefix_miss", everyone, scores, detail)

    def dispatched(self, request, replica, ctx):
        rid, key, walk, version, base = self._pending
        self._pending = (None, None, None, None, 0)
        if rid == request.id and version == self.tree.version:   # route's walk still holds: not walked again
            self.tree.insert_walked(key, replica, walk, base)
            return
        key, walk, base, _ = self.walk_of(request, ctx)
        self.tree.insert_walked(key, replica, walk, base)
