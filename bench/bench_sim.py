"""Simulator speed: steps/s and requests/s.

  python bench/bench_sim.py            # random_fcfs_500 and a generated 100,000-request run
  python bench/bench_sim.py --quick    # 10,000 requests instead of 100,000

The 500-request case is the vLLM conformance case (tests/fixtures/vllm/random_fcfs_500).
The lesson's Example 7 (the Admission page): its two 20,000-tick runs through the scheduler and
through sim.lessons.admission.slotted_run, which counts the same queue tick by tick up to the last tick
the page shows (the scheduler runs on until the last request finishes); best of 3 each,
alternated in one process: compare the ratio, not the seconds.
The 100k workload: Poisson arrivals (2 per step), lognormal prompts (median 128, capped 2048)
and outputs (median 32, capped 512), 8,192 blocks of 16, budget 2,048, 256 sequences, FCFS.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.simulate import simulate  # noqa: E402
from sim.workload import Workload, generate  # noqa: E402


def big_workload(n: int) -> Workload:
    return generate(n, seed=2026, arrival="poisson", rate=2.0,
                    prompt={"dist": "lognormal", "median": 128, "sigma": 1.0, "max": 2048},
                    output={"dist": "lognormal", "median": 32, "sigma": 1.0, "max": 512},
                    config={"num_gpu_blocks": 8192, "block_size": 16, "max_num_batched_tokens": 2048,
                            "max_num_seqs": 256})


def run(name: str, wl: Workload, repeat: int = 1) -> None:
    best = None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        tr = simulate(wl)
        dt = time.perf_counter() - t0
        cpu = time.process_time() - c0
        best = dt if best is None else min(best, dt)
    entries = len(tr.batch)
    print(f"{name:>18}: {len(wl.requests):>7} requests  {tr.num_steps:>7} steps  {entries:>9} batch entries  "
          f"{best:7.3f} s wall ({cpu:.3f} s CPU)  {tr.num_steps / best:>9.0f} steps/s  {len(wl.requests) / best:>8.0f} requests/s")


def littles_law_runs(repeat: int = 3) -> None:
    from sim.lessons.admission import QueueSetup, slotted_run
    for limit in (0, 16):
        setup = QueueSetup(p=0.44, queue_limit=limit)
        wl = setup.workload()
        sched = fast = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            steps = simulate(wl, setup.config()).num_steps
            sched = min(sched, time.perf_counter() - t0)
            t0 = time.perf_counter()
            slotted_run(setup, wl)
            fast = min(fast, time.perf_counter() - t0)
        print(f"{'example7_limit' + str(limit):>18}: {len(wl.requests):>7} requests  scheduler {steps:>6} steps "
              f"{sched:6.3f} s  slotted_run (to tick {setup.ticks:,}) {fast:6.4f} s  ({sched / fast:.0f}x)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    run("random_fcfs_500", Workload.load(str(ROOT / "tests/fixtures/vllm/random_fcfs_500.workload.json")), repeat=3)
    littles_law_runs()
    n = 10_000 if args.quick else 100_000
    t0 = time.perf_counter()
    wl = big_workload(n)
    print(f"(generated {n} requests in {time.perf_counter() - t0:.2f} s)")
    run(f"generated_{n // 1000}k", wl)


if __name__ == "__main__":
    main()
