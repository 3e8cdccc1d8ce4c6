"""Peak memory and time of a simulated run's full Trace (every token row and KV change: what
Playback draws), the compact Trace against the code before it, in the same run.

  python bench/bench_trace_memory.py                              # 1,000,000 requests, this code
  python bench/bench_trace_memory.py --sizes 100000,300000 --old /tmp/old-A   # and the old code beside it

Each (code, size) runs in a fresh process (peak = that process's ru_maxrss): generate the
workload (bench_sim.big_workload, as bench_search.py's scale runs: Poisson arrivals, lognormal
lengths, 8,192 blocks), simulate it to the full Trace, compute the metrics' summary (what the
Choosing settings row and Playback's headline read), then time the playback calls on it
(Trace.block_map and batch_at at a few steps). A child is capped at --max-gb of address space.
The old code: a read-only copy (mkdir /tmp/old-A && git archive HEAD | tar -x -C /tmp/old-A).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(n: int) -> None:
    """Child: one size with the code on sys.path; prints a JSON line."""
    sys.path.insert(0, os.getcwd())
    sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
    from bench_sim import big_workload
    from sim.metrics import summary
    from sim.simulate import simulate
    t0 = time.perf_counter()
    wl = big_workload(n)
    t_gen, peak_wl = time.perf_counter() - t0, _peak_mb()
    t0 = time.perf_counter()
    tr = simulate(wl)
    t_sim, peak_sim, rss_built = time.perf_counter() - t0, _peak_mb(), _rss_mb()
    tables_mb = sum(int(getattr(tr, k).memory_usage(index=True, deep=False).sum())
                    for k in ("requests", "steps", "batch", "events", "kv", "counters")) / 2**20
    t0 = time.perf_counter()
    row = summary(tr)
    t_row, peak_row = time.perf_counter() - t0, _peak_mb()
    steps = tr.num_steps
    picks = [max(1, steps // 4), steps // 2, (3 * steps) // 4, steps]
    t0 = time.perf_counter()
    held = [int(tr.block_map(s)[0].sum()) for s in picks]
    t_bm_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s in picks:
        tr.block_map(s + 1 if s < steps else s)
    t_bm = (time.perf_counter() - t0) / len(picks)
    t0 = time.perf_counter()
    rows = [len(tr.batch_at(s)) for s in picks]
    t_ba = (time.perf_counter() - t0) / len(picks)
    print(json.dumps({"n": n, "steps": steps, "batch_rows": len(tr.batch), "kv_rows": len(tr.kv),
                      "events": len(tr.events), "gen_s": t_gen, "sim_s": t_sim, "summary_s": t_row,
                      "peak_workload_mb": peak_wl, "peak_sim_mb": peak_sim, "rss_built_mb": rss_built,
                      "tables_mb": tables_mb, "peak_mb": max(peak_row, _peak_mb()),
                      "block_map_first_4_s": t_bm_first, "block_map_s": t_bm, "batch_at_s": t_ba,
                      "held_blocks": held, "batch_rows_at": rows, "goodput_check": row["throughput"],
                      "ttft_p99": row["ttft_p99"]}))


def run(root: str, n: int, max_gb: float, max_min: float) -> dict:
    code = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({int(max_gb * 2**30)}, "
            f"{int(max_gb * 2**30)})); sys.argv = ['x', '--one', '{n}']; sys.path.insert(0, {str(ROOT / 'bench')!r}); "
            f"import bench_trace_memory as b; b.main()")
    env = dict(os.environ, PYTHONPATH=root)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=env,
                           timeout=max_min * 60)
    except subprocess.TimeoutExpired:
        return {"n": n, "failed": f"not done in {max_min:g} min"}
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        why = "MemoryError" if "MemoryError" in p.stderr else (lines[-1] if lines else f"exit {p.returncode}")
        return {"n": n, "failed": f"{why} (address space capped at {max_gb:g} GB) after {time.perf_counter() - t0:.0f} s"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _load() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000", help="request counts for this code (comma-separated)")
    ap.add_argument("--old", help="a copy of the old code to run beside it")
    ap.add_argument("--old-sizes", default="100000,300000", help="request counts for the old code")
    ap.add_argument("--max-gb", type=float, default=8.0, help="address-space cap per child")
    ap.add_argument("--max-min", type=float, default=30.0)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one)
        return
    plan = [("new", str(ROOT), int(n)) for n in args.sizes.split(",") if n]
    if args.old:
        plan += [("old", args.old, int(n)) for n in args.old_sizes.split(",") if n]
    plan.sort(key=lambda p: (p[2], p[0]))
    for label, root, n in plan:
        load0 = _load()
        r = run(root, n, args.max_gb, args.max_min)
        r.update(code=label, load_before=load0, load_after=_load())
        if "failed" in r:
            print(f"{label:>3} {n:>9,} requests: FAILED {r['failed']} (load {load0} -> {r['load_after']})", flush=True)
        else:
            print(f"{label:>3} {n:>9,} requests: {r['steps']:,} steps, {r['batch_rows']:,} batch rows, "
                  f"{r['kv_rows']:,} KV rows; simulate {r['sim_s']:.1f} s, summary {r['summary_s']:.1f} s; "
                  f"peak RSS {r['peak_mb']:,.0f} MB (workload {r['peak_workload_mb']:,.0f}, after simulate "
                  f"{r['peak_sim_mb']:,.0f}; tables {r['tables_mb']:,.0f} MB); block_map {1000 * r['block_map_s']:.1f} ms "
                  f"a call (first four {r['block_map_first_4_s']:.2f} s), batch_at {1000 * r['batch_at_s']:.2f} ms "
                  f"(load {load0} -> {r['load_after']})", flush=True)
        print("  " + json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
