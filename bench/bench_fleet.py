"""The fleet's figures (sim/fleet): how far the simulated fleet scales, what a router's decision
costs, and a router grid through `python -m sim search`.

  python bench/bench_fleet.py --only scale            # 4, 16, 64, 256 replicas x 100,000 requests
  python bench/bench_fleet.py --only router           # µs per decision of every router at 64 replicas
  python bench/bench_fleet.py --only router --router-clock cpu   # the same in CPU µs (a shared machine)
  python bench/bench_fleet.py --only router-alone     # each router's calls replayed outside the run (bench/router_alone.py)
  python bench/bench_fleet.py --only grid             # replicas x 4 routers, --workers 2 and local Ray
  python bench/bench_fleet.py --only real             # against the real fleets (bench/fleet_real.py)
  python bench/bench_fleet.py --only page-sim         # the Fleet page's large run simulated, CPU s (--rounds)
  python bench/bench_fleet.py --only grid --grid-requests 100000 --grid-replicas 2,4,6,8,10,12,14,16
                                                      # the issue's full grid (32 configs: hours on 2 cores)

The workload (scale, router): sim.fleet.scenarios.chat scaled to the fleet: arrivals at 4
requests/s per replica (the chat scenario's 16/s on 4) over its 24 shared 1,024-token system
prompts, so that under round robin every fleet size is loaded the same (each replica sees the
same arrival rate and the same 24 prompts: the same prefix-cache hits); prompts 1,056-1,279
tokens, outputs 32-255, prefix caching on, 2,000 blocks of 16 and 64 sequences a replica,
steps costed by the a100-8B-fp16 roofline (ms). `--rate` (per replica) and `--groups` (in all)
change it.

- scale: each size in a fresh child process (capped at --max-gb of address space and --max-min
  minutes), one core: simulate_fleet(..., digest=True, record_scores=False) (what the search
  runs), then the search's row (sim.search.fleet_row); wall time, CPU time and the child's peak
  RSS (ru_maxrss). Target (issue 25): 64 replicas x 100k requests in < 2 minutes and < 4 GB.
- router: a 64-replica run of --router-requests requests per router (Digest, no scores kept):
  the time inside router.route, router.dispatched, router.released and router.prefill_done
  (each call wrapped in perf_counter, ~0.1 µs of the wrapper included; a replica's steps run
  inside a call taken out), and of it the time making the prompt's token ids, text and chain
  hashes (the fleet's _Prompts: token ids, chain hashes per block size, the text, the ids as an
  array, the text's hashes; it hands the ids on to the replica: made once either way), and of
  that the request's own ids past its prompt blocks and their text (the workload's part: a real
  router is sent the ids, or the text); the KV events the fleet-wide prefix index takes in
  (inside the replicas' steps, not in the router's figure: llm-d's and Dynamo's indexers take
  them apart from routing); the run's CPU time over its wall time (under 1 when other
  processes share the cores: the wall-clock µs above are that much longer than CPU µs); and the
  routing loop's own cost per request: the time in RoutingLoop.route less the replicas'
  simulation run inside it (SimReplica.advance, timed the same way): waking the replicas that
  have a step due, refreshing their signals, the routing table's row. Target: < 20 µs a request
  at 64 replicas.
- grid: `python -m sim search W.json --grid G.json --slo ... --workers 2`, end to end, then the
  same with `--ray local` (a local cluster of 2 CPUs started and stopped by the command); the two
  CSVs must be equal byte for byte. The workload is fixed (--grid-rate requests/s in all) while
  the replicas vary: the question is how many replicas, behind which router, meet the SLO.
Every figure is printed with the machine's load average.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COST = "a100-8B-fp16"
SLO = {"ttft": 500, "tpot": 50}
GRID_ROUTERS = ["round_robin", "power_of_two", "least_loaded", "cache_aware"]


def load() -> str:
    a, b, c = os.getloadavg()
    return f"load average {a:.2f} {b:.2f} {c:.2f} on {os.cpu_count()} CPUs"


def fleet_workload(replicas: int, n: int, rate: float = 4.0, groups: int = 24):
    """The chat scenario scaled to `replicas`: `rate` requests/s per replica, `groups` system
    prompts in all."""
    from sim.fleet.scenarios import chat
    return chat(n=n, rate_per_s=rate * replicas, groups=groups)


# -- scale: one size in a fresh process ---------------------------------------------------------

def one_size(replicas: int, n: int, router: str, rate: float, groups: int) -> None:
    """Child: build the workload, simulate the fleet (Digest, no scores), make the search's row;
    print a JSON line."""
    from sim.cost import cost_from_preset
    from sim.fleet import FleetSettings, simulate_fleet
    from sim.search import fleet_row
    from sim.slo import SLO as Targets
    t0 = time.perf_counter()
    wl = fleet_workload(replicas, n, rate, groups)
    t_gen = time.perf_counter() - t0
    rss_wl = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    fleet = simulate_fleet(wl, FleetSettings(replicas=replicas, router=router, record_scores=False), cost=cost_from_preset(COST),
                           digest=True)
    t_sim, cpu_sim = time.perf_counter() - t0, time.process_time() - c0
    rss_sim = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"simulated in {t_sim:.1f} s wall ({cpu_sim:.1f} s CPU), peak RSS so far {rss_sim / 1024:,.0f} MB",
          file=sys.stderr, flush=True)
    t1, c1 = time.perf_counter(), time.process_time()
    row = fleet_row(fleet, Targets.parse(SLO))
    t_row, cpu_row = time.perf_counter() - t1, time.process_time() - c1
    print(json.dumps({"replicas": replicas, "n": n, "router": router, "gen_s": t_gen, "sim_s": t_sim,
                      "sim_cpu_s": cpu_sim, "row_s": t_row, "row_cpu_s": cpu_row, "steps": row["steps"],
                      "rss_workload_mb": rss_wl / 1024, "rss_after_sim_mb": rss_sim / 1024,
                      "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "ttft_p99": row["ttft_p99"], "slo_attainment": row["slo_attainment"],
                      "prefix_hit_rate": row["prefix_hit_rate"], "load_imbalance": row["load_imbalance"],
                      "tokens_per_step": row["tokens_per_step"]}))


def bench_scale(sizes, n: int, router: str, rate: float, groups: int, max_gb: float, max_min: float) -> list[dict]:
    out = []
    print(f"-- scale: {n:,} requests, router {router}, {rate:g} requests/s per replica, {groups} system prompts; "
          f"one core each, a fresh process per size", flush=True)
    for r in sizes:
        code = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({int(max_gb * 2**30)}, "
                f"{int(max_gb * 2**30)})); sys.argv = ['bench_fleet.py', '--one', '{r}', '--requests', '{n}', "
                f"'--router', '{router}', '--rate', '{rate}', '--groups', '{groups}']; "
                f"sys.path.insert(0, {str(ROOT / 'bench')!r}); import bench_fleet; bench_fleet.main()")
        before = load()
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=max_min * 60,
                               cwd=ROOT)
        except subprocess.TimeoutExpired:
            print(f"{r:>4} replicas: not done in {max_min:g} min ({before} at the start)", flush=True)
            out.append({"replicas": r, "timeout_min": max_min})
            continue
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            lines = p.stderr.strip().splitlines()
            why = "MemoryError" if "MemoryError" in p.stderr else (lines[-1] if lines else f"exit {p.returncode}")
            print(f"{r:>4} replicas: failed after {wall:.0f} s ({why}; address space capped at {max_gb:g} GB)",
                  flush=True)
            out.append({"replicas": r, "failed": str(why)})
            continue
        d = json.loads(p.stdout.strip().splitlines()[-1])
        us_step = 1e6 * d["sim_cpu_s"] / d["steps"]
        print(f"{r:>4} replicas x {n:,} requests: simulate {d['sim_s']:.1f} s wall ({d['sim_cpu_s']:.1f} s CPU; "
              f"{d['steps']:,} steps, {us_step:.0f} µs CPU a step, {1e6 * d['sim_cpu_s'] / n:.0f} µs a request), "
              f"the search's row {d['row_s']:.1f} s; peak RSS {d['rss_peak_mb']:,.0f} MB (workload "
              f"{d['rss_workload_mb']:,.0f}, after simulate {d['rss_after_sim_mb']:,.0f}); "
              f"{d['tokens_per_step']:.1f} tokens a step, p99 TTFT {d['ttft_p99']:.0f} ms, prefix hits "
              f"{d['prefix_hit_rate']:.2f}, load imbalance {d['load_imbalance']:.3f} ({before} at the start, "
              f"{load()} at the end)", flush=True)
        out.append(d)
    return out


# -- router: µs per decision --------------------------------------------------------------------

# what the fleet's _Prompts makes of a request's prompt for a router (timed as "the prompt")
PROMPT_PARTS = ("length", "token_ids", "chain", "text", "parts", "text_chain", "text_split", "text_split_named",
                "own_chain",
                "own", "segments")
# the workload's part of it: a request's own ids past its prompt blocks, and their text (a real
# router is sent them)
OWN_IDS = ("own_prompt_tokens", "own_prompt_tokens_flat", "own_prompt_tokens_many", "_written_vocab", "written_ids",
           "written_lengths")
CALLBACKS = ("route", "dispatched", "released", "prefill_done")   # a router's work per request


class _Clock:
    def __init__(self):
        self.route = self.dispatched = self.released = self.prefill_done = 0.0
        self.loop = self.advance = self.prompts = self.own_ids = self.events = 0.0
        self.n_events = 0


def _clock_cost(clock) -> float:
    """What timing one empty call with `clock` adds to the total (the clock's own cost inside
    the interval, and the call), measured with the same clock: taken out of each call timed."""
    def empty():
        pass
    best = float("inf")
    for _ in range(5):
        total = 0.0
        for _ in range(2000):
            t = clock()
            empty()
            total += clock() - t
        best = min(best, total / 2000)
    return best


def bench_router(routers, replicas: int, n: int, rate: float, groups: int, cpu: bool = False) -> dict:
    """cpu: time the router's calls by the thread's CPU clock (a system call each, its cost
    measured and taken out), not perf_counter: on a shared machine, the time waiting for a core
    is left out; the prompt, the workload's part and the KV events are then not timed (their
    wrappers, nested in the calls, would add their clock's cost)."""
    from time import perf_counter as wall_clock, thread_time
    perf_counter = thread_time if cpu else wall_clock
    overhead = _clock_cost(perf_counter) if cpu else 0.0

    from sim.cost import cost_from_preset
    from sim.fleet import FleetSettings, simulate_fleet
    from sim.fleet import fleet as fleet_mod
    from sim.fleet import prompts as prompts_mod   # where the routing loop's prompt pieces are made
    from sim.fleet.prefix_index import FleetPrefixIndex
    from sim.fleet.replica import SimReplica
    from sim.fleet.routing import Router
    wl = fleet_workload(replicas, n, rate, groups)
    print(f"-- router cost: {replicas} replicas x {n:,} requests (Digest, no scores kept); {load()}", flush=True)
    out = {}
    for name in routers:
        c = _Clock()
        cls = type(__import__("sim.fleet", fromlist=["make_router"]).make_router(name, replicas))
        # the callbacks the router has (Router's own do nothing: not wrapped, their ~0.4 µs of wrapper left out)
        callbacks = [k for k in CALLBACKS if getattr(cls, k) is not getattr(Router, k)]
        saved = {k: getattr(cls, k) for k in callbacks}
        own = {k: k in cls.__dict__ for k in callbacks}   # else inherited: put back by deleting
        saved_loop = {"advance": SimReplica.advance, "loop": fleet_mod.RoutingLoop.route,
                      "watcher": FleetPrefixIndex.watcher}
        made = {k: getattr(fleet_mod._Prompts, k) for k in PROMPT_PARTS if hasattr(fleet_mod._Prompts, k)}
        own_ids = {k: getattr(prompts_mod, k) for k in OWN_IDS if hasattr(prompts_mod, k)}
        inside = [0]   # router calls under way: one called inside another (released inside route) counts once

        def timed_callback(k, f):
            def wrapper(self, *a):
                if inside[0]:
                    return f(self, *a)
                inside[0], t, adv = 1, perf_counter(), c.advance
                try:
                    return f(self, *a)
                finally:   # a router with lazy views runs the replicas it reads: their steps left out
                    setattr(c, k, getattr(c, k) + (perf_counter() - t) - (c.advance - adv) - overhead)
                    inside[0] = 0
            return wrapper

        def advance(self, until, _f=saved_loop["advance"]):
            t, was = perf_counter(), inside[0]
            inside[0] = 0   # the replicas' steps are not the router's (its calls inside them are)
            try:
                return _f(self, until)
            finally:
                inside[0] = was
                c.advance += perf_counter() - t

        def loop_route(self, req, target=None, _f=saved_loop["loop"]):
            t, a = perf_counter(), c.advance
            try:
                return _f(self, req, target)
            finally:
                c.loop += (perf_counter() - t) - (c.advance - a)   # the loop's own time, replicas' steps left out

        def watcher(self, replica, _f=saved_loop["watcher"]):
            changed = _f(self, replica)

            def timed(h, present):
                t = perf_counter()
                changed(h, present)
                c.events += perf_counter() - t
                c.n_events += 1
            return timed

        nested = [False]   # chain() calls token_ids(): count the outer call only

        def timed_prompt(f, field="prompts"):
            def wrapper(*a):
                if nested[0] and field == "prompts":
                    return f(*a)
                was, nested[0], t = nested[0], True, perf_counter()
                try:
                    return f(*a)
                finally:
                    setattr(c, field, getattr(c, field) + perf_counter() - t)
                    nested[0] = was
            return wrapper

        for k in callbacks:
            setattr(cls, k, timed_callback(k, saved[k]))
        SimReplica.advance, fleet_mod.RoutingLoop.route = advance, loop_route
        if cpu:
            made, own_ids = {}, {}
        else:
            FleetPrefixIndex.watcher = watcher
        for k, f in made.items():
            setattr(fleet_mod._Prompts, k, timed_prompt(f))
        for k, f in own_ids.items():
            setattr(prompts_mod, k, timed_prompt(f, "own_ids"))
        t0, cpu0 = wall_clock(), time.process_time()
        try:
            simulate_fleet(wl, FleetSettings(replicas=replicas, router=name, record_scores=False),
                           cost=cost_from_preset(COST), digest=True)
        finally:
            for k in callbacks:
                if own[k]:
                    setattr(cls, k, saved[k])
                else:
                    delattr(cls, k)
            SimReplica.advance, fleet_mod.RoutingLoop.route = saved_loop["advance"], saved_loop["loop"]
            FleetPrefixIndex.watcher = saved_loop["watcher"]
            for k, f in made.items():
                setattr(fleet_mod._Prompts, k, f)
            for k, f in own_ids.items():
                setattr(prompts_mod, k, f)
        wall = wall_clock() - t0
        share = (time.process_time() - cpu0) / wall
        per = {k: 1e6 * getattr(c, k) / n for k in CALLBACKS + ("loop", "prompts", "own_ids", "events")}
        per["cpu_share"] = share
        per["callbacks"] = per["released"] + per["prefill_done"]
        per["decision"] = per["route"] + per["dispatched"] + per["callbacks"]
        per["events_per_request"] = c.n_events / n
        if cpu:
            print(f"{name:>16}: CPU µs (thread_time, {1e6 * overhead:.2f} µs a call of the clock's own taken out): "
                  f"route {per['route']:6.1f} + dispatched {per['dispatched']:5.1f} + released/prefill_done "
                  f"{per['callbacks']:5.1f} = {per['decision']:6.1f} µs a request; the run {wall:.1f} s, CPU/wall "
                  f"{share:.2f} ({load()})", flush=True)
            out[name] = per
            continue
        print(f"{name:>16}: route {per['route']:6.1f} + dispatched {per['dispatched']:5.1f} + released/prefill_done "
              f"{per['callbacks']:5.1f} = {per['decision']:6.1f} µs a request, of which the prompt's ids, text and "
              f"hashes {per['prompts']:5.1f} µs (of it the request's own ids and their text made, the workload's part: "
              f"{per['own_ids']:4.1f} µs); the routing loop in all {per['loop']:6.1f} µs a request (the replicas' "
              f"steps left out); KV events into the fleet's prefix index {per['events']:5.1f} µs a request "
              f"({per['events_per_request']:.0f} events, inside the replicas' steps); the run {wall:.1f} s, CPU/wall "
              f"{share:.2f} ({load()})",
              flush=True)
        out[name] = per
    return out


# -- profile ------------------------------------------------------------------------------------

def bench_profile(replicas: int, n: int, router: str, rate: float, groups: int) -> None:
    import cProfile
    import pstats

    from sim.cost import cost_from_preset
    from sim.fleet import FleetSettings, simulate_fleet
    wl = fleet_workload(replicas, n, rate, groups)
    prof = cProfile.Profile()
    c0 = time.process_time()
    prof.enable()
    fleet = simulate_fleet(wl, FleetSettings(replicas=replicas, router=router, record_scores=False),
                           cost=cost_from_preset(COST), digest=True)
    prof.disable()
    cpu = time.process_time() - c0
    stats = pstats.Stats(prof)
    total = stats.total_tt
    steps = sum(len(t.steps) for t in fleet.replicas)
    print(f"-- cProfile, {replicas} replicas x {n:,} requests, {router} (profiled, so slower): {cpu:.1f} s CPU, "
          f"{steps:,} steps; by own time ({load()}):", flush=True)
    for (file, line, fn), (cc, nc, tt, ct, _) in sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:20]:
        where = file.replace(str(ROOT) + "/", "")
        print(f"  {100 * tt / total:5.1f}% own {100 * ct / total:5.1f}% cum {nc:>11,} calls  {where}:{line} {fn}")


# -- the Fleet page's large run ------------------------------------------------------------------

def bench_page_sim(rounds: int, n: int = 20_000) -> list[float]:
    """The run tests/e2e/test_fleet.py puts on the page (16 replicas x n chat requests of 4-16
    output tokens, least_loaded, the full Trace), simulated `rounds` times: CPU seconds each. To
    compare two commits, run this in a checkout of each, in turn, in one sitting."""
    import dataclasses

    import numpy as np

    from sim.cost import cost_from_preset
    from sim.fleet import FleetSettings, simulate_fleet
    from sim.fleet.scenarios import chat
    wl = chat(n=n, rate_per_s=80.0)
    rng = np.random.default_rng(5)
    wl.requests = [dataclasses.replace(r, max_tokens=int(rng.integers(4, 17))) for r in wl.requests]
    times = []
    for _ in range(rounds):
        t = time.process_time()
        simulate_fleet(wl, FleetSettings(replicas=16, router="least_loaded"), cost=cost_from_preset(COST))
        times.append(time.process_time() - t)
    print(f"-- the Fleet page's run, 16 replicas x {n:,} chat requests (least_loaded, full Trace): "
          f"{', '.join(f'{x:.2f}' for x in times)} s CPU ({load()})", flush=True)
    return times


# -- grid: python -m sim search -----------------------------------------------------------------

def bench_grid(replica_counts, n: int, total_rate: float, with_ray: bool) -> None:
    from sim.fleet.scenarios import chat
    groups = 24
    wl = chat(n=n, rate_per_s=total_rate, groups=groups)
    grid = {"replicas": replica_counts, "router": GRID_ROUTERS}
    ncfg = len(replica_counts) * len(GRID_ROUTERS)
    with tempfile.TemporaryDirectory() as d:
        wpath, gpath = Path(d, "w.json"), Path(d, "g.json")
        wpath.write_text(wl.dumps())
        gpath.write_text(json.dumps(grid))
        base = [sys.executable, "-m", "sim", "search", str(wpath), "--grid", str(gpath), "--slo", json.dumps(SLO),
                "--cost", COST, "--quiet"]
        print(f"-- grid: {n:,} chat requests at {total_rate:g}/s ({groups} system prompts) x {ncfg} configs "
              f"(replicas {replica_counts} x {GRID_ROUTERS}), SLO {json.dumps(SLO)} ms", flush=True)
        print("   command: python -m sim search W.json --grid '" + json.dumps(grid) + "' --slo '" + json.dumps(SLO)
              + f"' --cost {COST} --workers 2", flush=True)
        csvs = {}
        for label, extra in (("--workers 2", ["--workers", "2"]), ("--ray local", ["--ray", "local"])):
            if label.startswith("--ray") and not with_ray:
                continue
            before = load()
            out = Path(d, f"out{len(csvs)}.csv")
            t0 = time.perf_counter()
            p = subprocess.run(base + extra + ["-o", str(out)], cwd=ROOT, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if p.returncode != 0:
                print(f"{label}: failed: {p.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            csvs[label] = out.read_text()
            info = " ".join(p.stdout.strip().splitlines())
            print(f"{label}: {wall:.0f} s end to end, {60 * ncfg / wall:.2f} configs/min; {info} ({before} at the "
                  f"start, {load()} at the end)", flush=True)
        if len(csvs) == 2:
            a, b = csvs.values()
            print(f"the two CSVs are {'the same byte for byte' if a == b else 'DIFFERENT'}", flush=True)
        if csvs:
            import csv
            import io
            rows = list(csv.DictReader(io.StringIO(next(iter(csvs.values())))))
            print(f"{'replicas':>8} {'router':>14} {'goodput/s':>10} {'SLO met':>8} {'p99 TTFT':>9} {'prefix hits':>11} "
                  f"{'imbalance':>9}")
            for r in rows:
                print(f"{r['replicas']:>8} {r['router']:>14} {1000 * float(r['goodput']):>10.2f} "
                      f"{float(r['slo_attainment']):>8.3f} {float(r['ttft_p99']):>9.0f} {float(r['prefix_hit_rate']):>11.3f} "
                      f"{float(r['load_imbalance']):>9.3f}")
            ok = [r for r in rows if float(r["slo_attainment"]) >= 0.99]
            if ok:
                f = min(ok, key=lambda r: (int(r["replicas"]), -float(r["goodput"])))
                print(f"fewest replicas with >= 99% of requests meeting the SLO: {f['replicas']} behind {f['router']} "
                      f"(config {f['config']})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="scale,router,grid")
    ap.add_argument("--sizes", default="4,16,64,256", help="scale: replica counts")
    ap.add_argument("--requests", type=int, default=100_000, help="scale: requests per size")
    ap.add_argument("--router", default="round_robin", help="scale: the router")
    ap.add_argument("--rate", type=float, default=4.0, help="requests/s per replica (scale, router)")
    ap.add_argument("--groups", type=int, default=24, help="shared system prompts in all (scale, router)")
    ap.add_argument("--routers", default=None, help="router: the routers (default: every registered one)")
    ap.add_argument("--router-replicas", type=int, default=64)
    ap.add_argument("--router-requests", type=int, default=20_000)
    ap.add_argument("--router-clock", choices=("wall", "cpu"), default="wall",
                    help="router: time the calls by perf_counter (wall) or the thread's CPU clock")
    ap.add_argument("--profile-replicas", type=int, default=64)
    ap.add_argument("--profile-requests", type=int, default=10_000)
    ap.add_argument("--grid-replicas", default="2,4,8,16")
    ap.add_argument("--grid-requests", type=int, default=10_000)
    ap.add_argument("--grid-rate", type=float, default=128.0,
                    help="grid: requests/s in all (128: 2 and 4 replicas fall behind, 8 meet the SLO)")
    ap.add_argument("--no-ray", action="store_true", help="grid: local workers only")
    ap.add_argument("--rounds", type=int, default=3, help="page-sim: runs")
    ap.add_argument("--alone-rounds", type=int, default=3, help="router-alone: replays of each router's log")
    ap.add_argument("--max-gb", type=float, default=8.0, help="address-space cap of a scale child")
    ap.add_argument("--max-min", type=float, default=20.0, help="time cap of a scale child")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one_size(args.one, args.requests, args.router, args.rate, args.groups)
        return
    only = set(args.only.split(","))
    print(f"{load()} at the start", flush=True)
    if "scale" in only:
        bench_scale([int(s) for s in args.sizes.split(",")], args.requests, args.router, args.rate, args.groups,
                    args.max_gb, args.max_min)
    if "router" in only:
        from sim.fleet import router_names
        routers = args.routers.split(",") if args.routers else router_names()
        bench_router(routers, args.router_replicas, args.router_requests, args.rate, args.groups,
                     cpu=args.router_clock == "cpu")
    if "router-alone" in only:
        from time import thread_time

        from router_alone import bench_router_alone
        from sim.cost import cost_from_preset
        from sim.fleet import router_names
        routers = args.routers.split(",") if args.routers else router_names()
        wl = fleet_workload(args.router_replicas, args.router_requests, args.rate, args.groups)
        bench_router_alone(routers, args.router_replicas, args.router_requests, wl, cost_from_preset(COST),
                           _clock_cost(thread_time), load, args.alone_rounds)
    if "profile" in only:
        bench_profile(args.profile_replicas, args.profile_requests, args.router, args.rate, args.groups)
    if "real" in only:   # the real fleets recorded here (bench/fleet_real.py)
        import fleet_real
        fleet_real.main()
    if "page-sim" in only:
        bench_page_sim(args.rounds)
    if "grid" in only:
        bench_grid([int(s) for s in args.grid_replicas.split(",")], args.grid_requests, args.grid_rate,
                   not args.no_ray)
    print(f"{load()} at the end", flush=True)


if __name__ == "__main__":
    main()
