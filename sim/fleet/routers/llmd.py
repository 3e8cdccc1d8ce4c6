"""llm-d / Gateway API Inference Extension (GIE) routers: scorers with weights, a max-score picker.

Sources read:
- llm-d/llm-d-inference-scheduler `pkg/plugins/scorer/precise_prefix_cache.go` and `utils.go`
  (indexedScoresToNormalizedScoredPods) with llm-d/llm-d-kv-cache-manager
  `pkg/kvcache/kvblock_scorer.go` (LongestPrefixScorer): a pod's raw score is how many leading
  blocks of the prompt its KV cache holds (from vLLM's KV events), listed only for pods that hold
  block 0; normalised over the listed pods as (s - min) / (max - min), 1.0 for all of them when
  min == max; a pod not listed scores 0.
- kubernetes-sigs/gateway-api-inference-extension `pkg/epp/scheduling/framework/plugins/`:
  `scorer/queue.go` (waiting queue, min-max: (max - q) / (max - min), 1.0 when all equal),
  `scorer/kvcache_utilization.go` (1 - KV use), `multi/prefix/plugin.go` and `indexer.go`
  (the approximate prefix scorer, below), `picker/max_score_picker.go` (shuffle, then a stable
  sort by score: the highest wins, a tie is broken at random).
- the default profile, GIE `config/charts/inferencepool/templates/epp-config.yaml`:
  queue-scorer 2, kv-cache-utilization-scorer 2, prefix-cache-scorer 3 (also llm-d's
  inference-scheduling guide); the scheduler sums weight x score per pod.
"""
from __future__ import annotations

from collections import OrderedDict
from itertools import chain, compress, repeat
from operator import attrgetter, eq, sub

from ..routing import Decision, Router, register_router

NAN = float("nan")
QUEUE_TABLE = 64   # weighted: below this longest queue, the queue score of each length is made once
_WAITING = attrgetter("waiting")
_KV = attrgetter("kv_usage")


def normalized_precise(blocks: list) -> list:
    """llm-d's precise prefix score per replica from the raw leading-block counts."""
    listed = [b for b in blocks if b > 0]
    if not listed:
        return [0.0] * len(blocks)
    lo, hi = min(listed), max(listed)
    if lo == hi:
        return [1.0 if b > 0 else 0.0 for b in blocks]
    span = float(hi - lo)
    return [(b - lo) / span if b > 0 else 0.0 for b in blocks]


@register_router("precise_prefix")
class PrecisePrefix(Router):
    """llm-d's precise prefix-cache scorer alone: the replica whose real prefix cache holds the
    most leading blocks of the prompt (ctx.cached_blocks). A tie (several with the most, or none
    holding any) goes, with `tie_break` "in_flight" (the default), to the lowest in-flight count
    and then the first in worker order; with "random", to a seeded draw among them, as llm-d's
    max-score picker does. Scores: "cached_blocks" (raw), "prefix" (llm-d's normalised score;
    picking its maximum is picking the raw maximum), "in_flight". Reasons: "most_cached" (one
    replica has the most), "tie_in_flight", "tie_random", "no_cache_hit" (no replica holds
    block 0; then the tie rule picks among all)."""

    defaults = {"tie_break": "in_flight"}
    reads_prefix_cache = True

    @classmethod
    def validate(cls, config):
        if config["tie_break"] not in ("in_flight", "random"):
            raise ValueError(f"router precise_prefix setting tie_break must be in_flight or random, "
                             f"not {config['tie_break']!r}")

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        self.everyone = tuple(range(self.n))
        self.random_ties = self.config["tie_break"] == "random"

    def route(self, request, ctx):
        n = self.n
        blocks = ctx.cached_prefix(request)
        loads = ctx.in_flight
        best = max(blocks)
        if blocks.count(best) == 1:
            pick = blocks.index(best)
            tied = (pick,)
            reason = "most_cached"
        else:
            tied = [i for i, b in enumerate(blocks) if b == best]
            if self.random_ties:
                pick, reason = tied[self.rng.randrange(len(tied))], "tie_random"
            else:   # the lowest count, the first in worker order on a tie (min keeps the first)
                pick, reason = min(tied, key=loads.__getitem__), "tie_in_flight"
        if best == 0:
            reason = "no_cache_hit"
        scores = {"cached_blocks": list(map(float, blocks)), "prefix": normalized_precise(blocks),
                  "in_flight": list(map(float, loads))} if ctx.record_scores else {}
        return Decision(pick, reason, self.everyone, scores, {"cached_blocks": best, "tied": tuple(tied)})


class PrefixIndex:
    """GIE's approximate prefix index (`multi/prefix/indexer.go`): per server an LRU of block
    hashes of what was routed to it (capacity `lru_capacity` entries; adding a hash it holds
    makes it the most recent; hashicorp golang-lru's `Add`, one hash at a time), and hash ->
    servers (here a bitmask of them, so that a match walks the prompt's hashes once for every
    server).

    A server's LRU is kept in one of two ways. Until an add could evict from it: its adds in
    order and how many hashes it holds (`logs`, a _Log; a hash's place in the LRU is its last
    add, and which hashes it holds are its bits in `servers`), so that an add reads only the
    hashes the server may not hold: none of a shared prefix it was given before. From then on:
    an OrderedDict walked hash by hash (`full`)."""

    MEMO_KEYS = 4096   # shared prefixes whose walk is kept at most (then the memo starts again empty)
    GIVEN_KEYS = 1024  # shared prefixes a server is known to hold whole, at most (then read again)
    LOG_SLACK = 16     # hashes logged per hash held (past LOG_MIN) before a log is squeezed to one entry each
    LOG_MIN = 65536

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.servers: dict[int, int] = {}
        self.logs: dict[int, _Log] = {}
        self.full: dict[int, OrderedDict] = {}
        # match_split's memo: prefix key -> its walk; hash -> the keys whose walk read it (dropped
        # when the hash's servers change)
        self.memo: dict = {}
        self.watch: dict = {}

    @property
    def lru(self) -> dict[int, OrderedDict]:
        """Every server's LRU, oldest first."""
        out = {s: _ordered(lg.log) for s, lg in self.logs.items()}
        out.update(self.full)
        return out

    def _changed(self, hashes) -> None:
        """These hashes' servers changed: the walks that read them are out of date."""
        watch, memo = self.watch, self.memo
        for h in hashes:
            keys = watch.pop(h, None)
            if keys is not None:
                for k in keys:
                    memo.pop(k, None)

    def add(self, hashes, server: int) -> None:
        self.add_split(None, (), hashes, server)

    def add_split(self, key, shared, own, server: int) -> None:
        """add(shared + own, server), `shared` the prefix named by `key` (None: no name). The
        lists are kept, not copied: they must not change."""
        if server not in self.full:
            lg = self.logs.get(server)
            if lg is None:
                lg = self.logs[server] = _Log()
            if key is not None and key in lg.given and lg.size + len(own) <= self.capacity:
                self._add_own(lg, shared, own, server)
                return
            if self._add_logged(lg, key, shared, own, server):
                return
            self.full[server] = _ordered(self.logs.pop(server).log)
        self._add_walk(list(shared) + list(own), server)

    def _add_own(self, lg: _Log, shared, own, server: int) -> None:
        """The add, logged, of a shared prefix the server holds whole (it has evicted nothing
        since it was given it) and own hashes that cannot fill its LRU."""
        lg.append(shared, own)
        if not own:
            return
        servers = self.servers
        bit = 1 << server
        before = len(servers)
        got = list(map(servers.setdefault, own, repeat(bit)))   # a hash nobody held gets the bit
        held = len(servers) - before
        if held < len(own):   # some were held already (by other servers, or twice in own)
            for h, m in zip(own, got):
                if not m & bit:   # held by other servers only (so far: a hash twice is seen twice)
                    m = servers[h]
                    if not m & bit:
                        servers[h] = m | bit
                        held += 1
        lg.grew(held, self.LOG_SLACK, self.LOG_MIN)
        # (own hashes held before are among them: their walks are dropped for nothing)
        if self.watch and not self.watch.keys().isdisjoint(own):
            self._changed(own)

    def _add_logged(self, lg: _Log, key, shared, own, server: int) -> bool:
        """The add, logged, if the server's LRU cannot evict in it; False (nothing done) if it may."""
        get = self.servers.get
        bit = 1 << server
        new = [h for h in shared if not get(h, 0) & bit]
        new += [h for h in own if not get(h, 0) & bit]
        if lg.size + len(new) > self.capacity:   # (a hash twice in `new` counts twice)
            return False
        lg.append(shared, own)
        servers = self.servers
        held = 0
        for h in new:
            m = get(h, 0)
            if not m & bit:
                servers[h] = m | bit
                held += 1
        lg.grew(held, self.LOG_SLACK, self.LOG_MIN)
        if key is not None:
            if len(lg.given) >= self.GIVEN_KEYS:
                lg.given.clear()
            lg.given.add(key)
        if self.watch and new:
            self._changed(new)
        return True

    def _add_walk(self, hashes, server: int) -> None:
        """golang-lru's Add for each hash in turn: an evicted hash leaves at once."""
        lru = self.full[server]
        servers = self.servers
        cap = self.capacity
        bit = 1 << server
        new = []
        evicted = False
        for h in hashes:
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
                new.append(h)
                if len(lru) > cap:
                    evicted = True
                    old, _ = lru.popitem(last=False)
                    new.append(old)   # its servers change too
                    m = servers.get(old, 0) & ~bit
                    if m:
                        servers[old] = m
                    else:
                        servers.pop(old, None)
        # every hash sent gets the server's bit; one already in its LRU has it (a bit is cleared
        # only when its hash leaves the LRU), unless this add evicted it: then all of them
        for h in hashes if evicted else new:
            servers[h] = servers.get(h, 0) | bit
        if self.watch and new:
            self._changed(new)

    def match(self, hashes, n: int) -> list:
        """matchLongestPrefix: walk the hashes while some server holds one; each server holding
        a hash on the way gets one more (the source's count, not checked for gaps). Runs of
        hashes held by the same servers are counted together."""
        out = [0] * n
        run_mask, run, _, _ = self._walk(hashes, out, 0, 0, n)
        _add_bits(out, run_mask, run, n)
        return out

    def _walk(self, hashes, out: list, run_mask: int, run: int, n: int) -> tuple:
        """match's walk from a run under way: (run mask, run, stopped, hashes read)."""
        servers = self.servers
        read = 0
        for h in hashes:
            read += 1
            m = servers.get(h, 0)
            if not m:
                return run_mask, run, True, read
            if m == run_mask:
                run += 1
                continue
            _add_bits(out, run_mask, run, n)
            run_mask, run = m, 1
        return run_mask, run, False, read

    def match_split(self, key, shared: list, own: list, n: int) -> list:
        """match(shared + own, n), the walk over `shared` (a prefix many prompts share, named
        by `key`) kept until a hash it read changes servers."""
        got, pairs = self.match_kept(key, shared, own, n)
        return got if pairs is None else list(got)

    def match_kept(self, key, shared: list, own: list, n: int) -> tuple:
        """(match_split's list, None) or, where the walk ended in the shared prefix, (the memo's
        list: not to be changed, its (server, count) pairs of a count above 0)."""
        if key is None:
            return self.match(shared + own, n), None
        got = self.memo.get(key)
        if got is None:
            out = [0] * n
            run_mask, run, stopped, read = self._walk(shared, out, 0, 0, n)
            if len(self.memo) >= self.MEMO_KEYS:
                self.memo.clear()
                self.watch.clear()
            done = list(out)   # the match if the walk goes no further
            _add_bits(done, run_mask, run, n)
            got = self.memo[key] = (out, run_mask, run, stopped, done, [(i, m) for i, m in enumerate(done) if m])
            watch = self.watch
            for h in shared[:read]:
                w = watch.get(h)
                if w is None:
                    watch[h] = {key}
                else:
                    w.add(key)
        base, run_mask, run, stopped, done, pairs = got
        if stopped or not own or own[0] not in self.servers:   # (most own hashes are nobody's)
            return done, pairs
        out = list(base)
        run_mask, run, _, _ = self._walk(own, out, run_mask, run, n)
        _add_bits(out, run_mask, run, n)
        return out, None


class _Log:
    """A server's LRU while it has evicted nothing: its adds in order, (shared, own) each."""
    __slots__ = ("log", "size", "logged", "given")

    def __init__(self):
        self.log: list = []
        self.size = 0      # hashes held
        self.logged = 0    # hashes in the log
        self.given: set = set()   # keys of the shared prefixes it holds whole

    def append(self, shared, own) -> None:
        self.log.append((shared, own))
        self.logged += len(shared) + len(own)

    def grew(self, held: int, slack: int, least: int) -> None:
        """`held` more hashes held; the log squeezed to one entry per hash if it is long."""
        self.size += held
        if self.logged > slack * self.size + least:
            self.log[:] = [((), list(_ordered(self.log)))]
            self.logged = self.size


def _scores(waiting: list, kvs: list, third: list, total_blocks: int, total: list) -> dict:
    """Weighted's scores per replica, as floats."""
    lo, hi = min(waiting), max(waiting)
    span = float(hi - lo)
    return {"queue": [1.0] * len(waiting) if hi == lo else [(hi - w) / span for w in waiting],
            "kv": list(map(sub, repeat(1.0), kvs)),
            "prefix": [m / total_blocks for m in third] if total_blocks else list(map(float, third)),
            "total": total}


def _ordered(log: list) -> OrderedDict:
    """The LRU a log of adds (no eviction among them) leaves: each hash once, at its last add."""
    newest_first = dict.fromkeys(reversed(list(chain.from_iterable(chain.from_iterable(log)))))
    return OrderedDict.fromkeys(reversed(newest_first))


def _add_bits(out: list, mask: int, k: int, n: int) -> None:
    """out[i] += k for every bit i of mask below n."""
    while mask:
        low = mask & -mask
        i = low.bit_length() - 1
        if i < n:
            out[i] += k
        mask ^= low


@register_router("weighted")
class Weighted(Router):
    """llm-d's / GIE's default scheduling profile: total = queue_weight x queue score + kv_weight
    x KV score + prefix_weight x prefix score per replica, the highest total wins, a tie is drawn
    with the seeded rng (GIE's max-score picker shuffles before a stable sort).
    - queue: engine-reported waiting, (max - w) / (max - min), 1.0 when all equal.
    - kv: 1 - engine-reported kv_usage.
    - prefix "approximate" (GIE `multi/prefix/plugin.go`): the prompt text's bytes (ctx.prompt_text)
      cut into `hash_block_size`-byte blocks (a shorter tail is dropped; a prompt shorter than one
      block has no blocks), at most `max_prefix_blocks`, chain-hashed after a first hash of the
      model name; score = blocks matched / blocks (model hash included); the prompt's hashes are
      added for the replica it went to (`dispatched`), LRU of `lru_capacity_per_server` each.
      (The chain hash is Python's hash of (block bytes, previous hash): only equality is used,
      so a run does not depend on the per-process hash seed.)
      prefix "precise": llm-d's precise scorer, normalised (see normalized_precise).
    Scores: "queue", "kv", "prefix" and "total"; reason "max_score" or "tie_random"."""

    defaults = {"queue_weight": 2.0, "kv_weight": 2.0, "prefix_weight": 3.0, "prefix": "approximate",
                "hash_block_size": 64, "max_prefix_blocks": 256, "lru_capacity_per_server": 31250,
                "model": "m"}

    @classmethod
    def validate(cls, config):
        if config["prefix"] not in ("approximate", "precise"):
            raise ValueError(f"router weighted setting prefix must be approximate or precise, "
                             f"not {config['prefix']!r}")
        if not any(config[k] > 0 for k in ("queue_weight", "kv_weight", "prefix_weight")):
            raise ValueError("router weighted needs at least one of queue_weight, kv_weight, prefix_weight above 0")
        for k in ("hash_block_size", "max_prefix_blocks", "lru_capacity_per_server"):
            if config[k] < 1:
                raise ValueError(f"router weighted setting {k} must be 1 or more, not {config[k]!r}")

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        c = self.config
        self.wq, self.wk, self.wp = float(c["queue_weight"]), float(c["kv_weight"]), float(c["prefix_weight"])
        self.precise = c["prefix"] == "precise"
        self.reads_prefix_cache = self.precise
        self.block = int(c["hash_block_size"])
        self.max_blocks = int(c["max_prefix_blocks"])
        self.index = PrefixIndex(int(c["lru_capacity_per_server"]))
        self.model_hash = hash(("model", c["model"]))
        self._pending = (None, None)
        self.everyone = tuple(range(self.n))
        # _queue_kv's terms kept between decisions, the (shortest, longest) queue they were made
        # with, the queue term of each length (None: all the same; False: not tabled), the
        # replicas whose queue was not the shortest when their term was made
        self._base, self._span, self._q, self._off = None, None, None, set()

    def split(self, request, ctx) -> tuple:
        """(key, shared, own): the text's hashes as a prefix shared with other prompts (named by
        key, None if none) and the rest, where the loop offers it; else (None, [], all)."""
        made = getattr(ctx, "text_block_split", None)
        if made is not None:
            return made(request, self.block, self.max_blocks, self.model_hash)
        return None, [], self.hashes(request, ctx)

    def hashes(self, request, ctx) -> list:
        made = getattr(ctx, "text_block_hashes", None)   # the loop's, from cached pieces of the prompt
        if made is not None:
            return made(request, self.block, self.max_blocks, self.model_hash)
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

    def _prefix_kept(self, request, ctx) -> tuple:
        """(per replica: the precise score, or the approximate scorer's matched blocks, or NaN when
        prefix_weight is 0; the blocks matched over, 0 if not those; the decision's detail; and
        where that list is the prefix index's memo (not to be changed), the (replica, blocks
        matched) pairs of its replicas that match some, else None)."""
        if self.precise:
            return normalized_precise(ctx.cached_prefix(request)), 0, {}, None
        if self.wp <= 0:
            return [NAN] * self.n, 0, {}, None
        key, shared, own = self.split(request, ctx)
        self._pending = (request.id, (key, shared, own))
        total_blocks = len(shared) + len(own)
        if not total_blocks:
            return [0] * self.n, 0, {"prefix_blocks": 0}, None
        third, pairs = self.index.match_kept(key, shared, own, self.n)
        return third, total_blocks, {"prefix_blocks": total_blocks}, pairs

    def _queue_kv(self, waiting: list, kvs: list, changed) -> list:
        """Every replica's queue and KV terms summed (wq x queue score + wk x KV score), kept
        between decisions. Made again: the replicas in `changed` (those whose signals the loop
        refreshed since the last decision; None: not known), and when the longest queue moves,
        those whose queue is not the shortest; every one when the shortest moves. A replica at
        the shortest queue has queue score (hi - lo) / (hi - lo) = 1.0 exactly, whatever the
        longest: its term is the same float. Each is the same float, made by the same
        operations, as in a pass over all of them. The shortest and longest queues are found
        from `changed` and the replicas above the shortest (`_off`, a few), not from all."""
        base = self._base
        if base is None or changed is None or 2 * len(changed) > self.n:
            return self._all_terms(waiting, kvs)
        off = self._off
        lo = self._span[0]
        if changed:
            now = list(map(waiting.__getitem__, changed))
            if min(now) < lo:   # a new shortest queue
                return self._all_terms(waiting, kvs)
            off.difference_update(changed)
            off.update(compress(changed, map(lo.__ne__, now)))
            if len(off) == self.n:   # none left at the shortest: it moved up
                return self._all_terms(waiting, kvs)
        hi = max(map(waiting.__getitem__, off)) if off else lo
        if hi != self._span[1]:
            self._set_span(lo, hi)
            redo = off.union(changed)
        else:
            redo = changed
        if redo:
            self._terms(base, redo, waiting, kvs)
        return base

    def _all_terms(self, waiting: list, kvs: list) -> list:
        """_queue_kv's pass over every replica."""
        lo, hi = min(waiting), max(waiting)
        self._set_span(lo, hi)
        base = self._base = [0.0] * self.n
        self._terms(base, range(self.n), waiting, kvs)
        self._off = set(compress(range(self.n), map(lo.__ne__, waiting)))
        return base

    def _set_span(self, lo: int, hi: int) -> None:
        """The shortest and longest queue, and the queue term of each length (None: all the
        same; False: not tabled)."""
        self._span = (lo, hi)
        if hi == lo:
            self._q = None
        elif 0 <= lo and hi <= QUEUE_TABLE:   # each queue length's term once (a few lengths, 64 replicas)
            span = float(hi - lo)
            self._q = [self.wq * ((hi - w) / span) for w in range(hi + 1)]
        else:
            self._q = False

    def _terms(self, base: list, which, waiting: list, kvs: list) -> None:
        """base[i] = wq x queue score + wk x KV score for each i in `which` (the formulas in the
        class text, float by float: plain floats, at 64 replicas cheaper than numpy's, whose
        float64 operations they are)."""
        wq, wk, q = self.wq, self.wk, self._q
        if q is None:   # every queue the same length: queue score 1.0
            wq1 = wq * 1.0
            for i in which:
                base[i] = wq1 + wk * (1.0 - kvs[i])
        elif q:
            for i in which:
                base[i] = q[waiting[i]] + wk * (1.0 - kvs[i])
        else:
            lo, hi = self._span
            span = float(hi - lo)
            for i in which:
                base[i] = wq * ((hi - waiting[i]) / span) + wk * (1.0 - kvs[i])

    def route(self, request, ctx):
        n = self.n
        reps = ctx.replicas
        waiting = getattr(ctx, "waiting", None)   # the loop's lists of the views' signals, if it keeps them
        kvs = getattr(ctx, "kv_usage", None)
        if waiting is None or kvs is None:
            waiting, kvs = list(map(_WAITING, reps)), list(map(_KV, reps))
        third, total_blocks, detail, pairs = self._prefix_kept(request, ctx)
        base = self._queue_kv(waiting, kvs, getattr(ctx, "signals_changed", None))
        wp = self.wp
        # a replica with prefix score 0 adds wp x 0.0, which changes no total (none is -0.0), so
        # only those with one are added to (on a copy: base is kept for the next decision)
        if wp > 0 and (pairs is None or pairs):
            total = base.copy()
            if pairs is not None:   # the few replicas that match some, listed with the index's memo
                for i, m in pairs:
                    total[i] += wp * (m / total_blocks)
            else:
                for i in compress(range(n), third):
                    total[i] += wp * (third[i] / total_blocks if total_blocks else third[i])
        else:
            total = base.copy() if ctx.record_scores else base
        best = max(total)
        if total.count(best) == 1:
            pick, reason = total.index(best), "max_score"
            tied = (pick,)
        else:
            tied = tuple(compress(range(n), map(eq, total, repeat(best))))
            pick, reason = tied[self.rng.randrange(len(tied))], "tie_random"
        detail["tied"] = tied
        scores = _scores(waiting, list(kvs), third, total_blocks, total) if ctx.record_scores else {}
        return Decision(pick, reason, self.everyone, scores, detail)

    def dispatched(self, request, replica, ctx):
        if self.precise or self.wp <= 0:
            return
        rid, made = self._pending
        if rid != request.id:
            made = self.split(request, ctx)
        self._pending = (None, None)
        key, shared, own = made
        if shared or own:
            self.index.add_split(key, shared, own, replica)
