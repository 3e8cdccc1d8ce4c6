"""How fast the public-trace readers are: a million synthetic rows in each format.

    .venv/bin/python bench/bench_public_traces.py [--rows 1000000] [--seed 0] [--repeat 3]

Per format (bench/synth_traces.py, seeded: the same bytes every run): the file's size, then the
best of --repeat runs of
- read: sim.public_traces.read_columns, the file's bytes to numpy columns (what the page's
  progress bar follows), and its rows per second;
- requests: to_workload, those columns to one sim.workload.Request per row (no limit).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.synth_traces import azure_csv, burstgpt_csv, mooncake_jsonl  # noqa: E402
from sim.public_traces import _engine, read_columns, sniff, to_workload  # noqa: E402


def best(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    makers = {"Azure CSV": azure_csv, "BurstGPT CSV": burstgpt_csv, "Mooncake JSON lines": mooncake_jsonl}
    print(f"{args.rows:,} rows per format, seed {args.seed}, pandas engine {_engine()!r}, best of {args.repeat}")
    print(f"{'format':22s} {'MB':>7s} {'read s':>8s} {'rows/s':>12s} {'requests s':>11s}")
    for label, make in makers.items():
        data = make(args.rows, seed=args.seed)
        kind = sniff(data)
        read_s, cols = best(lambda: read_columns(data, kind), args.repeat)
        assert len(cols.prompt) == args.rows, (label, len(cols.prompt))
        build_s, wl = best(lambda: to_workload(cols, label), args.repeat)
        print(f"{label:22s} {len(data) / 2**20:7.1f} {read_s:8.2f} {args.rows / read_s:12,.0f} {build_s:11.2f}"
              f"   ({len(wl.requests):,} requests)")
        del wl, cols
    return 0


if __name__ == "__main__":
    sys.exit(main())
