"""The config search's figures: how fast configs go through each backend, and what one config
costs as the workload grows.

  python bench/bench_search.py                      # everything (over an hour on 2 shared cores: the grid)
  python bench/bench_search.py --only workers,ray   # configs/minute on 1 and 2 local workers (and local Ray)
  python bench/bench_search.py --only overhead,ray  # what a task costs each backend beyond its run
  python bench/bench_search.py --only scale         # 10k, 100k, 1M requests: wall time and peak memory
  python bench/bench_search.py --only grid          # a 100k-request workload over a 24-config grid
  python bench/bench_search.py --only profile       # cProfile of one 10k-request config, and its memory split

- workers / ray: 8 configs (max_num_seqs x policy x token budget) over a 5,000-request workload
  (bench_sim.big_workload: Poisson arrivals, lognormal lengths), the same rows on every backend
  (checked). Ray's start (the local cluster) is timed apart.
- overhead: 300 tiny configs (the lesson's three requests): wall time x 2 workers less the time
  the runs took where they ran, per task: what a task costs the backend beyond its run.
- scale: each size in a fresh process (peak memory is that process's ru_maxrss): generate the
  workload, simulate it (the full Trace), then the row a search makes of it (summary + SLO).
  A child is capped at --max-gb of address space and --max-min minutes, so a size that would
  not fit says so instead of taking the machine's memory.
- grid: `python -m sim search` over 24 configs of a 100,000-request workload, --workers 2,
  end to end (reading the workload, the runs, the CSV).
Targets (issue 20): 2 workers >= 1.8x one; Ray's per-task overhead < 5% of a 100k-request
config's time; 1M requests simulated in < 5 minutes and < 4 GB on one core.
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
sys.path.insert(0, str(ROOT / "bench"))

from bench_sim import big_workload  # noqa: E402
from sim import scenarios  # noqa: E402
from sim.search import Grid, SearchJob, run_local, to_csv  # noqa: E402

SLO = {"ttft": 2000, "tpot": 20}
GRID8 = {"max_num_seqs": [128, 256], "policy": ["fcfs", "sjf"], "max_num_batched_tokens": [1024, 2048]}
GRID24 = {"max_num_seqs": [64, 128, 256], "max_num_batched_tokens": [1024, 2048], "policy": ["fcfs", "sjf"],
          "preemption_mode": ["recompute", "swap"]}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def bench_backends(with_ray: bool) -> dict:
    grid = Grid.parse(GRID8)
    job = SearchJob.make(big_workload(5000), slo=SLO)
    out = {}
    rows1, t1 = timed(lambda: run_local(job, grid.configs(), workers=1))
    rows2, t2 = timed(lambda: run_local(job, grid.configs(), workers=2))
    assert to_csv(grid, rows2) == to_csv(grid, rows1)
    n = len(grid)
    print(f"8 configs x 5,000 requests: 1 worker {t1:.1f} s ({60 * n / t1:.1f} configs/min), 2 workers {t2:.1f} s "
          f"({60 * n / t2:.1f} configs/min): {t1 / t2:.2f}x", flush=True)
    out.update(one=t1, two=t2)
    # the pool's fixed cost (a forkserver, two fresh interpreters importing sim, the workload sent
    # to each) next to the runs: two tiny configs take no time to run, so this is all start
    tiny = SearchJob.make(scenarios.workload(scenarios.DEFAULT_SCENARIO))
    _, t_start = timed(lambda: run_local(tiny, Grid.parse({"max_num_seqs": [1, 2]}).configs(), workers=2))
    sec: list = []
    run_local(job, grid.configs(), workers=2, timings=sec)
    longest = max(sec)
    print(f"  the pool's start (2 tiny configs on 2 workers): {t_start:.1f} s; the longest of the 8 configs "
          f"{longest:.1f} s of {sum(sec):.1f} s in all: 2 workers could at best take {max(longest, sum(sec) / 2):.1f} s "
          f"plus the start", flush=True)
    if with_ray:
        from sim.search_ray import connect, run_ray
        _, t_init = timed(lambda: connect("local", 2))
        rows_r, tr = timed(lambda: run_ray(job, grid.configs(), "local"))   # joins the running one, then stops it
        assert to_csv(grid, rows_r) == to_csv(grid, rows1)
        print(f"Ray (local cluster, 2 CPUs): cluster start {t_init:.1f} s; 8 configs {tr:.1f} s ({60 * n / tr:.1f} "
              f"configs/min with the actors' start and the shutdown; {60 * n / (tr + t_init):.1f} with the cluster's "
              f"start too)", flush=True)
        out.update(ray_init=t_init, ray=tr)
    return out


def bench_overhead(with_ray: bool, n: int = 300) -> dict:
    """What a task costs a backend beyond its run: n tiny configs (the lesson's three requests),
    wall time x workers less the seconds the runs took where they ran, per task (the pool's or
    the actors' start and stop included; a Ray cluster's start not)."""
    tiny = SearchJob.make(scenarios.workload("lesson_abc"))
    cfgs = [{"max_num_seqs": 3, "aging": float(i)} for i in range(n)]
    out = {}
    sec: list = []
    _, wall = timed(lambda: run_local(tiny, cfgs, workers=2, timings=sec))
    out["local"] = (2 * wall - sum(sec)) / n
    print(f"{n} tiny configs on 2 local workers: {wall:.1f} s, runs {sum(sec) / n * 1000:.1f} ms each where they ran; "
          f"{1000 * out['local']:.1f} ms a task besides", flush=True)
    if with_ray:
        from sim.search_ray import connect, run_ray
        connect("local", 2)
        _, wall = timed(lambda: run_ray(tiny, cfgs, "local", timings=sec))
        out["ray"] = (2 * wall - sum(sec)) / n
        print(f"{n} tiny configs on Ray (local, 2 CPUs): {wall:.1f} s, runs {sum(sec) / n * 1000:.1f} ms each in the "
              f"actors; {1000 * out['ray']:.1f} ms a task besides ({1000 * (out['ray'] - out['local']):+.1f} ms "
              f"against local workers)", flush=True)
    return out


# -- one size in a fresh process -----------------------------------------------------------------

def one_size(n: int, digest: bool) -> None:
    """Child: generate n requests, simulate (the full Trace, or the search's Digest), make the
    search's row; print a JSON line."""
    from sim.metrics import summary
    from sim.simulate import simulate
    from sim.slo import SLO as Targets, slo_summary
    wl, t_gen = timed(lambda: big_workload(n))
    rss_wl = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()

    shown = [-1]

    def progress(done, total):  # every 1,000 steps: how far, how long, how much memory (the last line tells)
        if (bucket := (done * 20) // max(total, 1)) != shown[0]:  # each 5% of the requests
            shown[0] = bucket
            with open("/proc/self/statm") as f:
                rss_mb = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
            print(f"{done:,} of {total:,} requests done after {time.perf_counter() - t0:.0f} s wall, "
                  f"{time.process_time() - c0:.0f} s CPU; RSS {rss_mb:,.0f} MB", file=sys.stderr, flush=True)

    trace, t_sim = timed(lambda: simulate(wl, progress=progress, digest=digest))
    cpu_sim = time.process_time() - c0
    rss_sim = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"simulated in {t_sim:.1f} s wall ({cpu_sim:.1f} s CPU), peak RSS so far {rss_sim / 1024:,.0f} MB",
          file=sys.stderr, flush=True)   # what a failure in the row still reports
    c1 = time.process_time()
    row, t_row = timed(lambda: {**summary(trace), **slo_summary(trace, Targets.parse(SLO))})
    cpu_row = time.process_time() - c1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"n": n, "gen_s": t_gen, "sim_s": t_sim, "sim_cpu_s": cpu_sim, "row_s": t_row,
                      "row_cpu_s": cpu_row, "steps": trace.num_steps,
                      "batch_rows": None if digest else len(trace.batch), "kv_rows": None if digest else len(trace.kv),
                      "rss_workload_mb": rss_wl / 1024, "rss_after_sim_mb": rss_sim / 1024, "rss_peak_mb": rss / 1024,
                      "goodput": row["goodput"]}))


def bench_scale(sizes, max_gb: float, max_min: float, modes=("digest", "trace")) -> list[dict]:
    out = []
    for mode, n in [(m, n) for m in modes for n in sizes]:
        what = ("the search's run (a Digest: no token rows)" if mode == "digest"
                else "the full Trace (Playback's: every token row and KV change)")
        print(f"-- {n:,} requests, {what}", flush=True)
        code = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({int(max_gb * 2**30)}, "
                f"{int(max_gb * 2**30)})); sys.argv = ['bench_search.py', '--one', '{n}', '--mode', '{mode}']; "
                f"sys.path.insert(0, {str(ROOT / 'bench')!r}); import bench_search; bench_search.main()")
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=max_min * 60,
                               cwd=ROOT)
        except subprocess.TimeoutExpired:
            print(f"{n:>9,} requests: not done in {max_min:g} min", flush=True)
            out.append({"n": n, "timeout_min": max_min})
            continue
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            lines = p.stderr.strip().splitlines()
            why = "MemoryError" if "MemoryError" in p.stderr else (lines[-1] if lines else f"exit {p.returncode}")
            last = next((ln for ln in reversed(lines) if "simulated in" in ln or "requests done after" in ln),
                        "no progress line")
            print(f"{n:>9,} requests: failed after {wall:.0f} s ({why}; address space capped at {max_gb:g} GB); "
                  f"the last progress: {last}", flush=True)
            out.append({"n": n, "failed": str(why), "wall_s": wall})
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["mode"] = mode
        rows = (f"{r['batch_rows']:,} batch rows, {r['kv_rows']:,} KV rows" if mode == "trace"
                else "no batch rows or KV log")
        print(f"{n:>9,} requests: generate {r['gen_s']:.1f} s, simulate {r['sim_s']:.1f} s wall "
              f"({r['sim_cpu_s']:.1f} s CPU), the search's row {r['row_s']:.1f} s ({r['row_cpu_s']:.1f} s CPU); "
              f"{r['steps']:,} steps, {rows}; "
              f"peak RSS {r['rss_peak_mb']:,.0f} MB (workload {r['rss_workload_mb']:,.0f}, after simulate "
              f"{r['rss_after_sim_mb']:,.0f})", flush=True)
        out.append(r)
    return out


def bench_grid() -> float:
    with tempfile.TemporaryDirectory() as d:
        wl = Path(d, "w.json")
        wl.write_text(json.dumps(big_workload(100_000).to_json()))
        grid = Path(d, "g.json")
        grid.write_text(json.dumps(GRID24))
        t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([sys.executable, "-m", "sim", "search", str(wl), "--grid", str(grid), "--slo", json.dumps(SLO),
                            "-o", str(Path(d, "out.csv")), "--workers", "2", "--quiet"], cwd=ROOT,
                           capture_output=True, text=True)
        wall = time.perf_counter() - t0
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
        assert p.returncode == 0, p.stderr
        lines = Path(d, "out.csv").read_text().splitlines()
        print(f"100,000 requests x 24 configs, `python -m sim search --workers 2`: {wall:.0f} s end to end "
              f"({60 * 24 / wall:.2f} configs/min; {cpu:.0f} s CPU in all its processes); {len(lines) - 1} rows; {p.stdout.strip().splitlines()[-1]}",
              flush=True)
        return wall


def bench_profile(n: int = 10_000) -> None:
    import cProfile
    import pstats

    from sim.simulate import simulate
    wl = big_workload(n)
    prof = cProfile.Profile()
    prof.enable()
    rc = simulate(wl, columns=True)   # the run loop and its recorder, without the pandas tables
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt
    print(f"cProfile, one {n:,}-request run loop (columns=True; profiled, so ~2x slower): {total:.1f} s; "
          f"by own time:")
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:14]
    for (file, line, fn), (cc, nc, tt, ct, _) in rows:
        print(f"  {100 * tt / total:5.1f}%  {tt:6.2f} s own  {ct:6.2f} s cum  {nc:>10,} calls  "
              f"{Path(file).name}:{line} {fn}")
    # memory: what the recorder holds per batch row, against the Trace's table
    import sys as _sys
    from sim.simulate import simulate as sim2
    tr = sim2(wl)
    nb = len(tr.batch)
    deep = tr.batch.memory_usage(deep=True).sum()
    print(f"memory: {nb:,} batch rows; the Trace's batch table {deep / nb:.0f} B a row "
          f"({deep / 2**20:.0f} MB, object columns counted deep), its KV table "
          f"{tr.kv.memory_usage(deep=True).sum() / 2**20:.0f} MB for {len(tr.kv):,} rows, events "
          f"{tr.events.memory_usage(deep=True).sum() / 2**20:.0f} MB for {len(tr.events):,}; a recorder tuple "
          f"{_sys.getsizeof((1,) * 7)} B + its fresh ints; columns=True lists {sum(len(v) for v in rc.batch.values()):,} "
          f"cells")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="workers,ray,overhead,scale,grid,profile")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--max-gb", type=float, default=8.0, help="address-space cap of a scale child")
    ap.add_argument("--max-min", type=float, default=20.0, help="time cap of a scale child")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="digest", choices=("digest", "trace"), help=argparse.SUPPRESS)
    ap.add_argument("--modes", default="digest,trace", help="scale: digest (the search's run), trace (the full Trace)")
    args = ap.parse_args()
    if args.one:
        one_size(args.one, args.mode == "digest")
        return
    only = set(args.only.split(","))
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    if "workers" in only:
        bench_backends("ray" in only)
    if "overhead" in only:
        bench_overhead("ray" in only)
    if "scale" in only:
        bench_scale([int(s) for s in args.sizes.split(",")], args.max_gb, args.max_min, args.modes.split(","))
    if "grid" in only:
        bench_grid()
    if "profile" in only:
        bench_profile()
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)


if __name__ == "__main__":
    main()
