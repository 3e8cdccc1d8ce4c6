"""A fleet: N replicas behind a router, on one clock.

Each request is routed when it reaches the router (its arrival_time), in arrival order (ties
in workload order). Before a decision every replica is run up to that moment, so the router
sees what a real one would:
- its own in-flight count per replica: +1 when it sends a request, -1 when the response has
  ended at the router, `response_tail` after the end of the step that produced the last token
  (the front end's detokenizing and streaming, and the hop back: tens of ms on a real server,
  shared/fleet/README.md). Real routers compare these counts (vllm-router and sglang-router
  read nothing else from a vLLM worker: their /get_load poll gets a 404 there);
- the engine-reported queue, running count and KV use, as of the last refresh of the router's
  signals (every `refresh_interval`; 0 = exact at every decision). A scraped signal that lags
  is how load herds onto one replica (BLIS measured +354% p99 TTFT from a KV-utilisation
  router refreshed every 100 ms);
- the replicas' real prefix caches, for the precise scorers (llm-d reads them from vLLM's KV
  events; here they are read directly, i.e. with no event lag).
The request reaches its replica `router_latency` after the decision. All randomness is the
router's, from `seed`: the same inputs give the same fleet, byte for byte.
"""
from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass, field, replace
from typing import Callable

import pandas as pd

from ..cost import UnitsCost
from ..gc_passes import with_fewer_gc_passes
from ..limits import MAX_ARRIVAL_TIME
from ..simulate import max_model_len_for, resolve_config
from ..versions import check_options
from ..workload import Workload
from .prefix_index import FleetPrefixIndex, nonzero_bits
from .prompts import _Prompts, chain_hashes, text_chain_hashes  # noqa: F401  (chain_hashes, text_chain_hashes: for recorded.py and the tests)
from .replica import SimReplica
from .routes import MAX_REPLICAS, ROUTE_COLUMNS, routes_frame
from .routers import make_router
from .routing import ReplicaView, RouterContext
from .trace import FleetTrace



@dataclass
class FleetSettings:
    """How the fleet is put together (replicas, router) and what its router sees."""
    replicas: int = 2
    router: str = "round_robin"
    router_config: dict = field(default_factory=dict)
    seed: int = 0
    refresh_interval: float = 0.0    # engine-reported signals refreshed this often (0: exact)
    response_tail: float = 0.0       # last token's step end -> the router's in-flight count drops
    router_latency: float = 0.0      # router decision -> the request reaches its replica
    replica_configs: list | None = None   # per replica: overrides over the common config (may differ)
    record_scores: bool = True       # keep every scorer's score per replica in the routing table

    def check(self) -> "FleetSettings":
        n = self.replicas
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_REPLICAS:
            raise ValueError(f"a fleet has 1 to {MAX_REPLICAS:,} replicas, not {n!r}")
        for name in ("refresh_interval", "response_tail", "router_latency"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"the fleet's {name} must be a finite time, 0 or more, not {v!r}")
            if v > MAX_ARRIVAL_TIME:   # past it, a step's duration vanishes in the clock's rounding
                raise ValueError(f"the fleet's {name} must be at most {MAX_ARRIVAL_TIME:g} (as arrival times), "
                                 f"not {v:g}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ValueError(f"the fleet's seed must be a whole number, 0 or more, not {self.seed!r}")
        if self.replica_configs is not None:
            if not isinstance(self.replica_configs, list) or len(self.replica_configs) != n or \
                    not all(isinstance(c, dict) for c in self.replica_configs):
                raise ValueError(f"replica_configs must be a list of {n} config objects, one per replica")
        if not isinstance(self.router_config, dict):
            raise ValueError("the router config must be a JSON object of settings")
        return self

    def to_json(self) -> dict:
        return {"replicas": self.replicas, "router": self.router, "router_config": dict(self.router_config),
                "seed": self.seed, "refresh_interval": self.refresh_interval, "response_tail": self.response_tail,
                "router_latency": self.router_latency, "replica_configs": self.replica_configs}


def _json_scores(scores: dict) -> str:
    return json.dumps({k: [None if (isinstance(x, float) and not math.isfinite(x)) else round(float(x), 6)
                           for x in v] for k, v in scores.items()}, sort_keys=True, separators=(",", ":"))


def timed_requests(workload: Workload, cost) -> tuple[list, str]:
    """The workload's requests with arrival times on the fleet's clock. A step-driven workload
    (arrival_step only) is put on the clock one idle tick of the cost model per arrival step."""
    reqs = list(workload.requests)
    if any(r.arrival_time is not None for r in reqs):
        return [r if r.arrival_time is not None else replace(r, arrival_time=0.0) for r in reqs], "arrival_time"
    tick = (cost or UnitsCost()).step_time(1, [1])
    return [replace(r, arrival_time=r.arrival_step * tick) for r in reqs], "arrival_step x one idle tick"


class _LazyViews:
    """The views of a router that reads only the replicas it draws: reading views[i] first runs
    replica i up to the decision's time."""

    def __init__(self, loop: "RoutingLoop"):
        self.loop = loop
        self.views = [b.view for b in loop.backends]

    def __len__(self) -> int:
        return len(self.views)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(len(self.views))[i]]
        self.loop.bring_one_up_to(i, self.loop.ctx.time)
        return self.views[i]

    def __iter__(self):
        return (self[i] for i in range(len(self.views)))


def offer_prompts(ctx: RouterContext, prompts: _Prompts) -> None:
    """What the routing loop offers its router of each request's prompt, made by `prompts` from
    cached pieces (a router falls back to ctx.prompt_tokens / prompt_text where one is missing)."""
    ctx.block_hashes = prompts.chain              # chain hashes as the replicas' prefix caches make them
    ctx.prompt_length = prompts.length            # len(prompt_tokens(req)), without making them
    ctx.prompt_parts = prompts.parts              # the ids as array('I')s: the shared blocks' and the rest
    ctx.text_block_hashes = prompts.text_chain    # GIE's hashes of the text
    ctx.text_block_split = prompts.text_split_named   # the same, as the shared prefix's and the rest
    #                                                 (the request's own blocks named, not hashed)
    ctx.prompt_segments = prompts.segments        # the chain hashes in shared pieces


class RoutingLoop:
    """Routes requests in arrival order over replica backends (simulated or recorded) and
    records every decision. A backend has: index, view (a ReplicaView), next_start, advance(t),
    signals(), finished and first_tokens (lists it appends (request id, time) to: responses
    ended, first tokens sampled), cached_blocks(hashes), dispatch(req)."""

    def __init__(self, backends: list, settings: FleetSettings, router):
        self.backends = backends
        self.s = settings
        self.router = router
        n = len(backends)
        self.in_flight = [0] * n
        # A router that reads only the replicas it draws gets lazy views: a replica is run up to
        # the decision when its view is read. Its responses and first tokens then wait in heaps of
        # its own, since only it is brought up to date.
        self.lazy = bool(router.reads_fleet and router.reads_drawn)
        self.releases: list = [[] for _ in range(n)] if self.lazy else []   # (time, seq, replica, request id)
        self.firsts: list = [[] for _ in range(n)] if self.lazy else []     # first tokens due at the router
        self.release_seq = 0
        self.released_at: dict[str, float] = {}
        self.last_refresh = -math.inf
        self.refreshed_at = [-math.inf] * n   # lazy views: the last refresh of each replica's signals
        self.brought_to = [-math.inf] * n     # lazy views: the decision time each replica was last run up to
        self.prompts = _Prompts()
        views = _LazyViews(self) if self.lazy else [b.view for b in backends]
        self.ctx = RouterContext(0.0, views, self._cached_blocks, self.prompts.token_ids, self.prompts.text,
                                 in_flight=self.in_flight, record_scores=settings.record_scores)
        offer_prompts(self.ctx, self.prompts)
        # the views' engine signals as lists in worker order, kept with them by _refresh (a router
        # reading every replica's reads two lists, not 64 objects)
        self.ctx.waiting = [b.view.waiting for b in backends]
        self.ctx.kv_usage = [b.view.kv_usage for b in backends]
        self.ctx.signals_changed = list(range(n))   # those refreshed since the last decision (_refresh)
        self.indexes = self._prefix_indexes() if router.reads_prefix_cache else None
        if self.indexes is not None:
            self.ctx.cached_prefix = self._cached_prefix
            self.ctx.cached_prefix_bits = self._cached_prefix_bits
        # A router that reads only its own in-flight counts needs a replica run up to a decision
        # only if one of its responses could have ended by then: `due` is a time before which none
        # can (SimReplica.release_horizon, plus the tail), and the wake heap is keyed by it. The
        # decisions are those of running every replica every time (tested byte for byte).
        self.counts_only = self._counts_only()
        self.due = [-math.inf] * n
        self.by_id: dict[str, object] = {}
        self.next_start = [math.inf] * len(backends)
        self.wake: list[tuple[float, int]] = []
        self.dirty: set[int] = set(range(len(backends)))
        self.rows: dict[str, list] = {k: [] for k in ROUTE_COLUMNS}
        self._cands = (None, "")   # the last candidates tuple and its text

    def _counts_only(self) -> bool:
        return bool(self.router.reads_fleet and not self.router.reads_engine
                    and all(hasattr(b, "release_horizon") for b in self.backends))

    def _cached_blocks(self, i: int, req) -> int:
        b = self.backends[i]
        return b.cached_blocks(self.prompts.chain(req, b.view.block_size))

    def _prefix_indexes(self) -> dict | None:
        """One FleetPrefixIndex per block size, following the simulated replicas' pools (KV
        events, as llm-d's and Dynamo's indexers follow them); None when a backend has no pool
        of its own to follow (a recorded replica): then each replica is asked in turn."""
        if not all(hasattr(b, "pool") for b in self.backends):
            return None
        groups: dict[int, list[int]] = {}
        for b in self.backends:
            if b.pool.enable_caching:
                groups.setdefault(b.view.block_size, []).append(b.index)
        n = len(self.backends)
        indexes = {bs: FleetPrefixIndex(members, n) for bs, members in groups.items()}
        for bs, idx in indexes.items():
            for i in idx.replicas:
                self.backends[i].pool.on_cache_change = idx.watcher(i)
        return indexes

    def _cached_prefix(self, req) -> list[int]:
        """Every replica's leading cached blocks of req's prompt, from the fleet-wide indexes (a
        list the router must not change)."""
        return self._cached_prefix_bits(req)[0]

    def _cached_prefix_bits(self, req) -> tuple:
        """(_cached_prefix's list, a bitmask of the replicas with a count above 0). A prompt made
        of prompt blocks: the walk over its whole blocks' hashes is the index's memo for that
        prefix (sim/fleet/prefix_index.py shared_run), then the request's own hashes are made and
        walked one by one only while some replica still holds all before them. The memo's list
        is handed out as it is where nothing is added to it."""
        prompts = self.prompts
        p = prompts._prefix(req)
        if p is None:
            out = [0] * len(self.backends)   # a replica without prefix caching holds nothing
            for bs, idx in self.indexes.items():
                idx.leading(prompts.chain(req, bs), out)
            return out, nonzero_bits(out)
        node = p[0]
        out, some, own = None, 0, False   # own: out is a list of ours (may be changed)
        for bs, idx in self.indexes.items():
            base, alive, depth, held = idx.shared_run(node, lambda: node.full_chain(bs))
            some |= held
            if out is None:
                out = base   # base is 0 outside the index's replicas
            else:
                if not own:
                    out, own = list(out), True
                for i in idx.replicas:
                    out[i] = base[i]
            if alive:   # the replicas holding all of it already read `depth`: go on only if one holds more
                first = prompts.own(req, bs).first()
                if first is not None and idx.holders.get(first, 0) & alive:
                    if not own:
                        out, own = list(out), True
                    idx.walk(prompts.own_chain(req, bs), alive, depth, out)
                    if not depth:   # those that hold all of it held none before: some may now
                        some |= nonzero_bits(out, alive)
        if out is None:
            return [0] * len(self.backends), 0
        return out, some

    def _refresh(self, which) -> None:
        waiting, kv_usage = self.ctx.waiting, self.ctx.kv_usage
        for i in which:
            b = self.backends[i]
            w, r, used = b.signals()
            v = b.view
            v.waiting, v.running, v.used_blocks = w, r, used
            v.kv_usage = kv = used / v.num_blocks if v.num_blocks else 0.0
            waiting[i], kv_usage[i] = w, kv
        self.ctx.signals_changed.extend(which)

    def _schedule(self, i: int) -> None:
        """Note when backend i next has a step to run (a heap entry; older ones go stale)."""
        ns = self.backends[i].next_start
        self.next_start[i] = ns
        if ns != math.inf:
            heapq.heappush(self.wake, (ns, i))

    def _schedule_due(self, i: int, due: float | None = None) -> None:
        """Counts only: note the earliest time a response of backend i could end at the router."""
        if due is None:
            due = self.backends[i].release_horizon() + self.s.response_tail
        self.due[i] = due
        if due != math.inf and not self.lazy:   # lazy views read `due` when a view is read
            heapq.heappush(self.wake, (due, i))

    def _advance_due(self, t: float) -> None:
        """Counts only: run up to t the replicas a response of which could have ended by t."""
        wake, due = self.wake, self.due
        ran = []
        while wake and wake[0][0] <= t:
            when, i = heapq.heappop(wake)
            if when != due[i]:
                continue   # stale entry
            due[i] = math.nan   # taken: no second entry for i until it is noted again below
            self._run_one(i, t)
            ran.append(i)
        for i in ran:
            self._schedule_due(i)

    def _advance(self, t: float) -> None:
        """Run every replica whose next step starts before t (only those: a heap of next starts,
        so a decision costs what changed, not a pass over every replica)."""
        if self.counts_only and t != math.inf:
            return self._advance_due(t)
        wake, ns = self.wake, self.next_start
        ran = []
        while wake and wake[0][0] < t:
            when, i = heapq.heappop(wake)
            if when != ns[i] or ns[i] >= t:
                continue   # stale entry, or already run up to t
            self.backends[i].advance(t)
            self._schedule(i)
            ran.append(i)
        for i in ran:
            self.dirty.add(i)
            self._collect(i)

    def _collect(self, i: int) -> None:
        """Backend i's finished responses, due to leave the in-flight count a tail later, and
        its first tokens (a router that counts prefill work, Dynamo's, stops counting it then)."""
        b = self.backends[i]
        if b.first_tokens:
            firsts = self.firsts[i] if self.lazy else self.firsts
            for rid, end in b.first_tokens:
                heapq.heappush(firsts, (end, self.release_seq, i, rid))
                self.release_seq += 1
            b.first_tokens.clear()
        if b.finished:
            rel = self.releases[i] if self.lazy else self.releases
            for rid, end in b.finished:
                heapq.heappush(rel, (end + self.s.response_tail, self.release_seq, i, rid))
                self.release_seq += 1
            b.finished.clear()

    def _release_until(self, t: float) -> None:
        if self.lazy:
            for i in range(len(self.backends)):
                self._release(self.firsts[i], self.releases[i], t)
        else:
            self._release(self.firsts, self.releases, t)

    def _release(self, firsts: list, rel: list, t: float) -> None:
        """First tokens and ended responses due by t, from these heaps, told to the router."""
        while firsts and firsts[0][0] <= t:
            when, _, i, rid = heapq.heappop(firsts)
            self.router.prefill_done(self.by_id[rid], i, when)
        while rel and rel[0][0] <= t:
            when, _, i, rid = heapq.heappop(rel)
            self.in_flight[i] -= 1
            self.backends[i].view.in_flight = self.in_flight[i]
            self.released_at[rid] = when
            self.router.released(self.by_id[rid], i, when)

    def bring_one_up_to(self, i: int, t: float) -> None:
        """Lazy views: replica i as the router would see it at t, had every replica been run to
        t (_bring_up_to for one replica: its refresh, its steps, its ended responses)."""
        if self.brought_to[i] == t:
            return
        self.brought_to[i] = t
        s, b = self.s, self.backends[i]
        if self.counts_only:
            if self.due[i] <= t:   # one of its responses could have ended by t: run it
                self._run_one(i, t)
                self._schedule_due(i)
            self._release(self.firsts[i], self.releases[i], t)
            return
        if s.refresh_interval > 0:
            r = math.floor(t / s.refresh_interval) * s.refresh_interval
            if r > self.refreshed_at[i]:
                self._run_one(i, r)
                self._refresh((i,))
                self.refreshed_at[i] = r
        self._run_one(i, t)
        self._release(self.firsts[i], self.releases[i], t)
        if s.refresh_interval <= 0:
            self._refresh((i,))

    def _run_one(self, i: int, t: float) -> None:
        b = self.backends[i]
        if b.next_start < t:
            b.advance(t)
            self._collect(i)

    def _bring_up_to(self, t: float) -> None:
        """Every replica run up to t, the responses ended by t released, the signals refreshed
        as the refresh interval says."""
        s = self.s
        if self.counts_only:   # no engine signal is read: the responses ended by t are all it needs
            self._advance(t)
            self._release_until(t)
            return
        if s.refresh_interval > 0:
            r = math.floor(t / s.refresh_interval) * s.refresh_interval
            if r > self.last_refresh:
                self._advance(r)
                self._refresh(range(len(self.backends)))
                self.last_refresh = r
        self._advance(t)
        self._release_until(t)
        if s.refresh_interval <= 0 and self.dirty:
            self._refresh(sorted(self.dirty))
            self.dirty.clear()

    def route(self, req, target: int | None = None):
        """Route one request at its arrival_time. `target` (replaying a real fleet): the replica
        that really served it, which the router is told it went to. Returns the Decision."""
        t = float(req.arrival_time)
        s = self.s
        if self.router.reads_fleet and not self.lazy:
            self._bring_up_to(t)
        self.ctx.time = t
        self.prompts.reset(req)
        changed = self.ctx.signals_changed
        seen = len(changed)
        d = self.router.route(req, self.ctx)
        del changed[:seen]   # (a lazy view refreshed inside route stays listed for the next decision)
        if not (isinstance(d.replica, int) and 0 <= d.replica < len(self.backends)):
            raise RuntimeError(f"router {self.router.name} picked replica {d.replica!r} of {len(self.backends)}")
        go = d.replica if target is None else target
        self.router.dispatched(req, go, self.ctx)
        self.by_id[req.id] = req
        reached = t + s.router_latency
        ids = self.prompts.replica_ids(req)
        if ids is not None:
            req = replace(req, prompt_token_ids=ids)   # made once, not again by the replica
        self.backends[go].dispatch(replace(req, arrival_time=reached))
        if self.counts_only:   # turned away on arrival, it would leave at once
            self._schedule_due(go, min(self.due[go], reached + s.response_tail))
        if self.lazy:
            self.brought_to[go] = -math.inf   # its queue grew: read again, its signals are refreshed
        elif not self.counts_only:
            self._schedule(go)
        self._collect(go)   # a recorded replica knows when the request finished
        self.dirty.add(go)
        self.in_flight[go] += 1
        self.backends[go].view.in_flight = self.in_flight[go]
        rows = self.rows
        rows["request"].append(req.id)
        rows["tenant"].append(req.tenant)
        rows["prompt_len"].append(req.prompt_len)
        rows["arrival"].append(t)
        rows["replica"].append(go)
        rows["reason"].append(d.reason)
        cands = d.candidates
        if cands is not self._cands[0]:   # routers hand the same tuple (every replica) again and again
            self._cands = (cands, ",".join(map(str, cands)))
        rows["candidates"].append(self._cands[1])
        rows["scores"].append(_json_scores(d.scores) if s.record_scores and d.scores else "")
        rows["detail"].append(json.dumps(d.detail, sort_keys=True, separators=(",", ":"), default=float)
                              if s.record_scores and d.detail else "")
        rows["reached"].append(reached)
        return d

    def finish(self) -> None:
        """Run every replica to the end and let every response end at the router."""
        if self.lazy or self.counts_only:
            for i in range(len(self.backends)):
                self._run_one(i, math.inf)
        else:
            self._advance(math.inf)
        self._release_until(math.inf)

    def table(self) -> pd.DataFrame:
        rows = dict(self.rows)
        rows["released"] = [self.released_at.get(rid, math.nan) for rid in rows["request"]]
        return routes_frame(rows)


# the schedulers a replica may run (SimReplica reads their sequences, queue and KV pool);
# llama_slots keeps slots, not vLLM's structures
FLEET_SCHEDULERS = ("vllm", "static")


def replica_configs(workload: Workload, settings: FleetSettings, config: dict | None):
    """Each replica's (SchedulerConfig, scheduler name, max_model_len): the workload's config,
    overridden by `config`, then by the replica's own overrides."""
    out = []
    for i in range(settings.replicas):
        own = (settings.replica_configs or [None] * settings.replicas)[i] or {}
        try:
            cfg, mode = resolve_config(workload, {**(config or {}), **own})
            if mode not in FLEET_SCHEDULERS:   # a replica exposes vLLM's queue and KV pool to the router
                raise ValueError(f"scheduler {mode} cannot run as a fleet's replica; a replica runs "
                                 f"{' or '.join(FLEET_SCHEDULERS)}")
            cfg.validate()
            check_options(cfg, mode)   # async scheduling needs the vllm scheduler (and a version that has it)
            # a request longer than the replica's max_model_len is turned away there (SimReplica)
            mml = max_model_len_for(workload, cfg, strict=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"replica {i}'s config: {e}") from None
        out.append((cfg, mode, mml))
    return out


@with_fewer_gc_passes
def simulate_fleet(workload: Workload, settings: FleetSettings | None = None, config: dict | None = None, *,
                   cost=None, costs: list | None = None, digest: bool = False, max_requests: int | None = None,
                   progress: Callable[[int, int], None] | None = None):
    """Run `workload` on a fleet of simulated replicas behind a router; returns a FleetTrace
    (each replica's Trace, or Digest with `digest`, and the routing table). `cost`: every
    replica's step-time model; `costs`: one per replica instead (e.g. fitted on each replica's
    recording), all in one time unit. progress(done, total): requests finished (or turned away)
    of all, about every 1,000 steps of any replica and once at the end; it does not change the run."""
    s = (settings or FleetSettings()).check()
    cost = cost or (costs[0] if costs else None) or UnitsCost()
    if costs is not None and (len(costs) != s.replicas or len({c.time_unit for c in costs}) != 1):
        raise ValueError(f"give one cost model per replica ({s.replicas}), all in the same time unit")
    router = make_router(s.router, s.replicas, s.router_config, s.seed)
    reqs, clock = timed_requests(workload, cost)
    if max_requests is not None and len(reqs) > max_requests:
        raise ValueError(f"the workload has {len(reqs):,} requests; a fleet runs at most {max_requests:,} here")
    backends = []
    for i, (cfg, mode, mml) in enumerate(replica_configs(workload, s, config)):
        b = SimReplica(i, cfg, mode, mml, costs[i] if costs else cost, digest)
        try:
            b.check_fits(reqs)
        except ValueError as e:
            raise ValueError(f"replica {i}: {e}") from None
        b.view = ReplicaView(i, 0, 0, 0, 0.0, 0, cfg.num_gpu_blocks - 1, cfg.block_size)
        backends.append(b)
    if progress is not None:
        def tick() -> None:
            progress(sum(b.n_done for b in backends), len(reqs))
        for b in backends:
            b.tick = tick
    loop = RoutingLoop(backends, s, router)
    order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival_time, i))
    loop.prompts.plan([reqs[i] for i in order])
    for i in order:
        loop.route(reqs[i])
    loop.finish()
    if progress is not None:
        progress(len(reqs), len(reqs))
    meta_base = {"source": "simulator", "time_unit": cost.time_unit,
                 "cost_model": cost.describe() if hasattr(cost, "describe") else type(cost).__name__,
                 "workload": workload.name}
    traces = []
    for b in backends:
        t = b.build(dict(meta_base, replica=b.index))
        traces.append(t)
        b.release()   # its recorder's lists are in the tables now: a 100k-request fleet's peak, not twice it
    meta = {"source": "simulator", "time_unit": cost.time_unit, "workload": workload.name, "clock": clock,
            "settings": s.to_json(), "router_defaults": dict(router.config),
            "busy_time": [b.busy_time for b in backends], "num_requests": len(reqs),
            # requests each replica turned away for its max_model_len (None: it set none)
            "turned_away": [b.turned_away for b in backends],
            "context_limits": [None if b.context_limit == math.inf else b.context_limit for b in backends],
            "cost_model": meta_base["cost_model"]}
    return FleetTrace(routes=loop.table(), replicas=traces, meta=meta)
