"""A router's cost alone: its calls replayed outside the simulation (bench_fleet.py --only router-alone).

Inside a fleet run (bench_fleet.py --only router) each decision comes after the replicas'
steps, which leave the CPU's caches full of their own data; a real router runs in a process of
its own. Here the router's calls are replayed, in the run's order, on a fresh router that
reads what it read in the run, so that only the router's own work is timed:

1. Record: the fleet is run as usual (Digest, no scores kept), and every call the loop makes
   to the router is logged in order (route, dispatched, released, prefill_done), with what a
   decision reads of the fleet: the time, the in-flight counts, a copy of every replica's view
   and which views the loop refreshed since the last decision (ctx.signals_changed),
   the answers of ctx.cached_blocks, and the KV events that the fleet-wide prefix index took in
   between two calls.
2. Replay: a fresh router of the same settings and seed, a fresh prompt cache (_Prompts) and a
   fresh prefix index fed the same KV events (not timed: they are the indexer's upkeep); each
   call is timed by the thread's CPU clock (the clock's own cost taken out). What the router
   makes of the prompt (ids, hashes, text) and its queries of the prefix index are in the
   figure, as they are in the run's. The replay's picks must equal the run's, request for
   request, or no figure is given. The log is replayed three times (`rounds`), a fresh router
   and prompt cache each: the figure is the middle one, with the range beside it.
A router that reads the replicas it draws (power_of_two: lazy views, each replica run up to a
decision when it is read) is not replayed.
3. The workload's part: a second replay times, inside the router's calls, the making of the
   request's own ids (past its shared prompt blocks) and of their text, or its length and first
   bytes (perf_counter wrappers).
   The workload makes those, and a real router is sent them with the request. The part is
   printed beside the figure and is not taken out of it. The prompt is planned in the run's
   order, as the run's loop plans it, so own ids are made in batches as they are in the run.
"""
from __future__ import annotations

import copy
import gc
import time
from functools import partial
from types import SimpleNamespace

CALLS = ("route", "dispatched", "released", "prefill_done")


class _Log:
    def __init__(self):
        self.events: list = []   # ("route", req, t, in_flight, views, signals changed) | (call, req, replica, time) | ("kv", i, h, present)
        self.blocks: list = []   # ctx.cached_blocks' answers to the router, in order
        self.prefix: list = []   # ctx.cached_prefix's, where the loop has no prefix index to replay
        self.inside = False
        self.nested = False


def _record(name: str, wl, replicas: int, cost):
    """Run the fleet, logging the router's calls; (the log, the run's picks)."""
    from sim.fleet import FleetSettings, simulate_fleet
    from sim.fleet import fleet as fleet_mod
    from sim.fleet.prefix_index import FleetPrefixIndex
    from sim.fleet.routers import make_router
    from sim.fleet.routing import Router

    log = _Log()
    cls = type(make_router(name, replicas))
    saved = {k: cls.__dict__.get(k) for k in CALLS}
    saved_watcher, saved_init = FleetPrefixIndex.watcher, fleet_mod.RoutingLoop.__init__
    lazy = [False]

    def wrap(k):
        f = getattr(cls, k)

        def logged(self, *a):
            if k == "route":
                req, ctx = a
                views = None if lazy[0] else [copy.copy(v) for v in ctx.replicas]
                changed = None if ctx.signals_changed is None else list(ctx.signals_changed)
                log.events.append(("route", req, ctx.time, list(ctx.in_flight), views, changed))
                log.inside = True
                try:
                    return f(self, *a)
                finally:
                    log.inside = False
            if log.inside:
                log.nested = True   # a response ended inside route: lazy views
            log.events.append((k, a[0], a[1], a[2] if k != "dispatched" else None))
            return f(self, *a)
        return logged

    def watcher(self, replica, _f=saved_watcher):
        changed = _f(self, replica)

        def logged(h, present):
            log.events.append(("kv", replica, h, present))
            changed(h, present)
        return logged

    def init(self, backends, settings, router, _f=saved_init):
        _f(self, backends, settings, router)
        lazy[0] = log.nested = bool(self.lazy)   # its views run the replicas when read: not replayed
        ctx = self.ctx
        blocks, prefix = ctx.cached_blocks, ctx.cached_prefix

        def cached_blocks(i, req):
            got = blocks(i, req)
            log.blocks.append(got)
            return got
        ctx.cached_blocks = cached_blocks
        if self.indexes is None:
            def cached_prefix(req):
                got = prefix(req)
                log.prefix.append(list(got))
                return got
            ctx.cached_prefix = cached_prefix

    for k in CALLS:
        if getattr(cls, k) is not getattr(Router, k):
            setattr(cls, k, wrap(k))
    FleetPrefixIndex.watcher, fleet_mod.RoutingLoop.__init__ = watcher, init
    try:
        fleet = simulate_fleet(wl, FleetSettings(replicas=replicas, router=name, record_scores=False),
                               cost=cost, digest=True)
    finally:
        for k, f in saved.items():
            if f is None:
                if k in cls.__dict__:
                    delattr(cls, k)
            else:
                setattr(cls, k, f)
        FleetPrefixIndex.watcher, fleet_mod.RoutingLoop.__init__ = saved_watcher, saved_init
    return log, fleet.routes["replica"].tolist()


def _replay(name: str, replicas: int, log: _Log, clock_cost: float, groups: dict,
            workload_part: bool = False) -> tuple:
    """Replay the log on a fresh router; (CPU seconds per call kind, picks). workload_part: also
    time (perf_counter, under "workload") the making of the request's own ids and of their text,
    which a real router is sent with the request (the wrappers add their own cost)."""
    from sim.fleet import FleetSettings
    from sim.fleet.fleet import RoutingLoop, offer_prompts
    from sim.fleet.prefix_index import FleetPrefixIndex
    from sim.fleet.prompts import _Prompts
    from sim.fleet.routers import make_router
    from sim.fleet.routing import RouterContext

    s = FleetSettings(replicas=replicas, router=name, record_scores=False).check()
    router = make_router(s.router, s.replicas, s.router_config, s.seed)
    prompts = _Prompts()
    prompts.plan([e[1] for e in log.events if e[0] == "route"])   # the run's requests, in its order
    views = list(next(e for e in log.events if e[0] == "route")[4])
    blocks, prefix = iter(log.blocks), iter(log.prefix)
    ctx = RouterContext(0.0, views, lambda i, req: next(blocks), prompts.token_ids, prompts.text,
                        in_flight=[0] * replicas, record_scores=False)
    offer_prompts(ctx, prompts)   # what the run's loop offers
    groups = groups if router.reads_prefix_cache else {}
    indexes = {bs: FleetPrefixIndex(members, replicas) for bs, members in groups.items()}
    watchers = {i: idx.watcher(i) for idx in indexes.values() for i in idx.replicas}
    if indexes:
        shim = SimpleNamespace(prompts=prompts, indexes=indexes, backends=[None] * replicas)
        shim._cached_prefix_bits = ctx.cached_prefix_bits = partial(RoutingLoop._cached_prefix_bits, shim)
        ctx.cached_prefix = partial(RoutingLoop._cached_prefix, shim)
    else:
        ctx.cached_prefix = lambda req: next(prefix)
    spent = dict.fromkeys(CALLS, 0.0)
    if workload_part:
        spent["workload"] = 0.0
        depth = [0]   # one of them inside another counts once
        for k in ("_own", "_own_text", "_own_text_len", "_own_text_head", "_batch_lens", "_batch_heads"):
            f = getattr(prompts, k)

            def timed(*a, _f=f):
                if depth[0]:
                    return _f(*a)
                depth[0], t0 = 1, time.perf_counter()
                try:
                    return _f(*a)
                finally:
                    spent["workload"] += time.perf_counter() - t0
                    depth[0] = 0
            setattr(prompts, k, timed)
    picks = []
    clock = time.thread_time
    route, dispatched, released, prefill_done = (getattr(router, k) for k in CALLS)
    for e in log.events:
        kind = e[0]
        if kind == "kv":
            w = watchers.get(e[1])
            if w is not None:
                w(e[2], e[3])
            continue
        if kind == "route":
            _, req, t, in_flight, vs, changed = e
            ctx.time, ctx._in_flight, ctx.signals_changed = t, in_flight, changed
            if vs is not None:
                views[:] = vs
                ctx.waiting = [v.waiting for v in vs]   # the lists the loop keeps beside its views
                ctx.kv_usage = [v.kv_usage for v in vs]
            prompts.reset(req)
            t0 = clock()
            d = route(req, ctx)
            spent["route"] += clock() - t0 - clock_cost
            picks.append(d.replica)
            continue
        _, req, replica, when = e
        if kind == "dispatched":
            t0 = clock()
            dispatched(req, replica, ctx)
            spent["dispatched"] += clock() - t0 - clock_cost
        else:
            f = released if kind == "released" else prefill_done
            t0 = clock()
            f(req, replica, when)
            spent[kind] += clock() - t0 - clock_cost
    return spent, picks


def bench_router_alone(routers, replicas: int, n: int, wl, cost, clock_cost: float, load, rounds: int = 3) -> dict:
    """Each router's calls, recorded in a run and replayed alone `rounds` times (a fresh router
    each, the same log); prints µs a request of the round in the middle (by the sum) and the
    range of the sums: one replay's figure moves by 5-10% on a shared machine."""
    from sim.fleet import FleetSettings
    from sim.fleet.fleet import replica_configs
    from sim.gc_passes import fewer_gc_passes

    s = FleetSettings(replicas=replicas).check()
    cfgs = replica_configs(wl, s, None)
    groups: dict = {}
    for i, (cfg, _, _) in enumerate(cfgs):
        if cfg.enable_prefix_caching:
            groups.setdefault(cfg.block_size, []).append(i)
    print(f"-- router cost alone: {replicas} replicas x {n:,} requests, each router's calls replayed outside "
          f"the run (CPU clock, {1e6 * clock_cost:.2f} µs a call of the clock's own taken out); {load()}",
          flush=True)
    out = {}
    for name in routers:
        log, run_picks = _record(name, wl, replicas, cost)
        if log.nested:
            print(f"{name:>16}: not replayed (it reads the replicas it draws: they are run up to a decision inside it)",
                  flush=True)
            continue
        pers, differ = [], 0
        for _ in range(max(rounds, 1)):
            gc.collect()
            with fewer_gc_passes():   # as the run has them: the log's heap would otherwise be walked again and again
                spent, picks = _replay(name, replicas, log, clock_cost, groups)
            if picks != run_picks:
                differ = sum(a != b for a, b in zip(picks, run_picks))
                break
            per = {k: 1e6 * v / n for k, v in spent.items()}
            per["decision"] = sum(per[k] for k in CALLS)
            pers.append(per)
        del log
        if differ:
            print(f"{name:>16}: the replay's picks differ from the run's ({differ} of {len(run_picks)}): no figure",
                  flush=True)
            continue
        pers.sort(key=lambda p: p["decision"])
        per = pers[len(pers) // 2]
        per["decision_range"] = (pers[0]["decision"], pers[-1]["decision"])
        # a second replay, the prompt's own ids and text timed inside it: the workload's part
        log, _ = _record(name, wl, replicas, cost)
        gc.collect()
        with fewer_gc_passes():
            timed, _ = _replay(name, replicas, log, clock_cost, groups, workload_part=True)
        del log
        per["workload"] = 1e6 * timed["workload"] / n
        lo, hi = per["decision_range"]
        print(f"{name:>16}: route {per['route']:6.1f} + dispatched {per['dispatched']:5.1f} + released/prefill_done "
              f"{per['released'] + per['prefill_done']:5.1f} = {per['decision']:6.1f} CPU µs a request "
              f"({len(pers)} replays {lo:.1f}-{hi:.1f}), of it {per['workload']:4.1f} the workload's part "
              f"(picks equal to the run's; {load()})", flush=True)
        out[name] = per
    return out
