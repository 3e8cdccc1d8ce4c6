"""Windowed playback on a long run: the overview, a window, and the figures of a 5,000-step window.

    python bench/bench_window.py                 # a 360,000-step simulated run (36,000 requests)
    python bench/bench_window.py --requests 6000 # a shorter one

Prints, for a simulated run on a seeded workload (requests every 10 steps into 4 slots and a
24-block KV pool, prefix caching on: busy, with preemptions):
- the run's size: steps, batch rows, KV log rows, and the Trace's bytes per batch row (the deep
  memory of all its tables over its batch rows: what ui.runs' memory budget divides by);
- sim.overview.overview: best of 3, and its bucket count;
- sim.window.window for a 5,000-step window in the middle: best of 3;
- that window's figures (slot lanes, tokens per step, KV block map, step inspector tables,
  overview chart): best of 3, and the same figures of the whole run for the ratio;
- the load average beside them (the machine is shared: compare ratios from one run).

    python bench/bench_window.py --recording REC.jsonl.gz   # a real vLLM recording instead

the same on a recording of a real vLLM server's steps (bench/make_long_recording.py makes one of
~150,000 or ~360,000 steps with vLLM's own scheduler class), read by servers.vllm.recording, the
overview on both clocks (steps and ms), and the window's block map checked against the whole
trace's at 20 steps.

    python bench/bench_window.py --page           # the Playback page on that run (AppTest)

times the page (Streamlit's AppTest, no browser) on the uploaded workload: the first run
(simulating it, the overview, the default window's views) and the rerun after typing a new
5,000-step window (the run cached), best of 3 reruns.

    python bench/bench_window.py --peak           # what ui.runs' limits divide by

runs two simulations, each in a fresh process: the busy run above and an idle one (two requests
1,000,000 steps apart: steps with no batch rows), and prints each one's peak memory over its
resident size before simulate() (ru_maxrss) per batch row and per step.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from figures.overview import overview_figure  # noqa: E402
from figures.playback import inspector_tables, kv_map_figure, occupancy_figure, step_tokens_figure  # noqa: E402
from sim.overview import overview  # noqa: E402
from sim.simulate import simulate  # noqa: E402
from sim.window import window  # noqa: E402
from sim.workload import Workload  # noqa: E402

WINDOW = 5_000


def long_workload(n: int) -> Workload:
    """n requests, one every 10 steps (about 10 steps of run per request)."""
    reqs = [{"id": f"r{i}", "arrival_step": 10 * i, "prompt_len": 40 + 8 * (i % 5), "max_tokens": 20 + (i * 7) % 30,
             "prompt_seed": i % 3} for i in range(n)]
    return Workload.from_json({"config": {"max_num_seqs": 4, "max_num_batched_tokens": 64, "num_gpu_blocks": 24,
                                          "block_size": 16, "enable_prefix_caching": True}, "requests": reqs})


def best(fn, n: int = 3) -> tuple[float, object]:
    out, t = None, float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - t0)
    return t, out


def trace_bytes(tr) -> int:
    return sum(int(getattr(tr, name).memory_usage(deep=True, index=True).sum())
               for name in ("requests", "steps", "batch", "events", "kv", "counters"))


def figures(tr, step: int) -> None:
    occupancy_figure(tr)
    step_tokens_figure(tr)
    kv_map_figure(tr, step)
    inspector_tables(tr, step)


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def idle_workload(gap: int) -> Workload:
    reqs = [{"id": "a", "arrival_step": 0, "prompt_len": 16, "max_tokens": 4},
            {"id": "b", "arrival_step": gap, "prompt_len": 16, "max_tokens": 4}]
    return Workload.from_json({"config": {"max_num_seqs": 4, "num_gpu_blocks": 64}, "requests": reqs})


def _rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def one_peak(kind: str, n: int) -> None:
    """(in its own process) simulate one run and print its peak over the resident size before."""
    wl = long_workload(n) if kind == "busy" else idle_workload(1_000_000)
    before = _rss_kb()
    t0 = time.perf_counter()
    tr = simulate(wl)
    secs = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    rows, steps = len(tr.batch), tr.num_steps
    print(f"{kind}: {steps:,} steps, {rows:,} batch rows, peak +{peak / 1024:,.0f} MB over the start, "
          f"{peak * 1024 / max(rows, 1):,.0f} bytes per batch row, {peak * 1024 / max(steps, 1):,.0f} bytes per step; "
          f"{secs:.1f} s ({steps / secs:,.0f} steps/s)  (load {load()})")


def page(n: int) -> None:
    import json

    from streamlit.testing.v1 import AppTest
    wl = long_workload(n).to_json()
    at = AppTest.from_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "app.py"),
                           default_timeout=600)
    at.run()
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="pb_upload").upload("long.workload.json", json.dumps(wl).encode(), "application/json")
    t0 = time.perf_counter()
    at.run()
    first = time.perf_counter() - t0
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    print(f"page, first run (simulate + overview + the default window's views): {first:.1f} s  (load {load()})")
    times = []
    for k in range(3):
        a0 = 20_000 + 50_000 * k
        at.number_input(key="pb_win_first").set_value(a0)
        t0 = time.perf_counter()
        at.number_input(key="pb_win_last").set_value(a0 + WINDOW - 1).run()
        times.append(time.perf_counter() - t0)
        assert at.query_params["pb_win"] == f"{a0}-{a0 + WINDOW - 1}", at.query_params.get("pb_win")
    print(f"page, a new {WINDOW:,}-step window (the run cached): best {min(times):.2f} s of "
          f"{', '.join(f'{t:.2f}' for t in times)}  (load {load()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=36_000)
    ap.add_argument("--no-whole", action="store_true", help="skip the whole run's figures (the slow part)")
    ap.add_argument("--peak", action="store_true", help="peak memory per batch row and per step (two processes)")
    ap.add_argument("--one-peak", choices=("busy", "idle"), help=argparse.SUPPRESS)
    ap.add_argument("--page", action="store_true", help="time the Playback page on the run (AppTest)")
    ap.add_argument("--recording", help="a vLLM recording (servers/vllm/recorder.py) instead of a simulated run")
    a = ap.parse_args()
    if a.page:
        return page(a.requests)
    if a.one_peak:
        return one_peak(a.one_peak, a.requests)
    if a.peak:
        for kind in ("busy", "idle"):
            subprocess.run([sys.executable, __file__, "--one-peak", kind, "--requests", str(a.requests)], check=True)
        return
    print(f"load average before: {load()}")
    t0 = time.perf_counter()
    if a.recording:
        from servers.vllm.recording import read_recording, to_trace
        tr = to_trace(read_recording(a.recording))
        what = f"recording {os.path.basename(a.recording)}: {len(tr.requests):,} requests"
    else:
        tr = simulate(long_workload(a.requests))
        what = f"run: {a.requests:,} requests"
    sim_s = time.perf_counter() - t0
    nbytes = trace_bytes(tr)
    print(f"{what}, {tr.num_steps:,} steps, {len(tr.batch):,} batch rows, {len(tr.kv):,} "
          f"KV rows, {len(tr.events):,} events; {'read' if a.recording else 'simulated'} in {sim_s:.1f} s")
    print(f"trace memory: {nbytes / 1e6:,.1f} MB = {nbytes / max(len(tr.batch), 1):,.0f} bytes per batch row, "
          f"{nbytes / max(tr.num_steps, 1):,.0f} bytes per step")
    for clock in ("steps", "time") if a.recording else ("steps",):
        t_ov, ov = best(lambda: overview(tr, clock))
        print(f"overview ({clock} clock): {t_ov * 1000:,.0f} ms, {len(ov):,} buckets of {ov.attrs['width']:g} "
              f"{ov.attrs['unit']}  (load {load()})")
    t_of, _ = best(lambda: overview_figure(ov, (0, WINDOW)))
    print(f"overview chart: {t_of * 1000:,.0f} ms")
    mid = tr.num_steps // 2
    t_w, w = best(lambda: window(tr, mid, mid + WINDOW - 1))
    print(f"window of {WINDOW:,} steps: {t_w * 1000:,.0f} ms ({len(w.batch):,} batch rows, {len(w.kv):,} KV rows)"
          f"  (load {load()})")
    checked = range(mid, mid + WINDOW, WINDOW // 20)
    same = sum(all(np.array_equal(x, y) for x, y in zip(tr.block_map(s)[:2], w.block_map(s)[:2])) for s in checked)
    print(f"the window's block map equals the whole trace's at {same} of {len(checked)} steps checked")
    t_fw, _ = best(lambda: figures(w, mid + WINDOW // 2))
    print(f"the window's figures (lanes, tokens, KV map, inspector): {t_fw * 1000:,.0f} ms  (load {load()})")
    if not a.no_whole:
        t_fa, _ = best(lambda: figures(tr, mid + WINDOW // 2), 1)
        print(f"the whole run's figures: {t_fa * 1000:,.0f} ms = {t_fa / t_fw:,.1f}x the window's  (load {load()})")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
