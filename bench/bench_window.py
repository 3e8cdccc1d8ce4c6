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

    python bench/bench_window.py --fit            # sim.run_memory's model against measured peaks

runs seven simulations, each in a fresh process, that weigh the model's terms differently (idle
steps; the busy run above; Poisson requests, 100,000 and 1,000,000 of them; 300,000 three-token
requests; long prompts with prefix caching) and prints each one's peak memory over its resident
size before simulate() (ru_maxrss), beside what sim.run_memory.run_bytes says of its size.

    python bench/bench_window.py --page-big 1000000   # the Playback page on a million requests

the Playback page (AppTest) on bench_sim.big_workload(N) uploaded as a workload JSON: the first
run (parse, simulate, the numbers, the overview, the default window), then three typed 5,000-step
windows and three scrubs, with the process's peak memory (the server's: AppTest runs the page in
it) before and after.
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

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


FIT_RUNS = (("idle", 1_000_000), ("busy", 36_000), ("big", 100_000), ("short", 300_000), ("prefix", 3_000),
            ("big", 1_000_000))


def fit_workload(kind: str, n: int) -> Workload:
    from bench_sim import big_workload
    from sim.workload import generate
    if kind == "idle":
        return idle_workload(n)
    if kind == "busy":
        return long_workload(n)
    if kind == "big":
        return big_workload(n)
    if kind == "short":
        return generate(n, seed=7, arrival="poisson", rate=4.0,
                        prompt={"dist": "lognormal", "median": 32, "sigma": 0.5, "max": 256},
                        output={"dist": "lognormal", "median": 3, "sigma": 0.5, "max": 16},
                        config={"num_gpu_blocks": 4096, "block_size": 16, "max_num_batched_tokens": 2048,
                                "max_num_seqs": 64})
    return generate(n, seed=8, arrival="poisson", rate=1.0,
                    prompt={"dist": "lognormal", "median": 512, "sigma": 0.7, "max": 4096},
                    output={"dist": "lognormal", "median": 64, "sigma": 1.0, "max": 512},
                    config={"num_gpu_blocks": 2048, "block_size": 16, "max_num_batched_tokens": 1024,
                            "max_num_seqs": 128, "enable_prefix_caching": True})


def one_fit(kind: str, n: int) -> None:
    """(in its own process) simulate one run; print its peak over the resident size before, and the model's."""
    from sim.run_memory import run_bytes
    wl = fit_workload(kind, n)
    before = _rss_kb()
    t0 = time.perf_counter()
    tr = simulate(wl)
    secs = time.perf_counter() - t0
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    caching = bool(tr.meta.get("config", {}).get("enable_prefix_caching"))
    prompt = sum(r.prompt_len for r in wl.requests) if caching else 0
    said = run_bytes(tr.num_steps, len(tr.batch), len(tr.kv), len(wl.requests), prompt)
    print(f"{kind:>6} {n:>9,}: {tr.num_steps:>9,} steps {len(tr.batch):>11,} rows {len(tr.kv):>11,} KV rows "
          f"{prompt:>10,} cached prompt tokens | peak +{peak / 2**20:7,.0f} MiB, model {said / 2**20:7,.0f} MiB "
          f"({said / peak:.2f}x) | {secs:.0f} s (load {load()})", flush=True)


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


def page_big(n: int) -> None:
    import json

    from bench_sim import big_workload
    from streamlit.testing.v1 import AppTest
    text = json.dumps(big_workload(n).to_json()).encode()
    at = AppTest.from_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "app.py"),
                           default_timeout=1800)
    at.run()
    at.radio(key="keep_pb_source").set_value("Upload a workload JSON").run()
    at.file_uploader(key="pb_upload").upload("big.workload.json", text, "application/json")
    del text
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n:,} requests; before the first run: peak {before:,.0f} MB  (load {load()})", flush=True)
    t0 = time.perf_counter()
    at.run()
    first = time.perf_counter() - t0
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    print(f"page, first run (parse, simulate, numbers, overview, the default window): {first:.1f} s; "
          f"peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB, now {_rss_kb() / 1024:,.0f} MB "
          f"(load {load()})", flush=True)
    times, got = [], []
    for k in range(3):
        a0 = n // 10 * (k + 1)   # big_workload runs about one step per two requests
        at.number_input(key="pb_win_first").set_value(a0)
        t0 = time.perf_counter()
        at.number_input(key="pb_win_last").set_value(a0 + WINDOW - 1).run()
        times.append(time.perf_counter() - t0)
        assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
        got.append(at.query_params.get("pb_win"))
    print(f"page, a new {WINDOW:,}-step window ({', '.join(map(str, got))}): {', '.join(f'{t:.2f}' for t in times)} s  "
          f"(load {load()})", flush=True)
    times = []
    for k in range(3):
        t0 = time.perf_counter()
        at.slider(key="keep_pb_step").set_value(3 * n // 10 + 1_000 * (k + 1)).run()
        times.append(time.perf_counter() - t0)
        assert not at.exception
    print(f"page, a scrub inside the window: {', '.join(f'{t:.2f}' for t in times)} s; peak "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB, now {_rss_kb() / 1024:,.0f} MB "
          f"(load {load()})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=36_000)
    ap.add_argument("--no-whole", action="store_true", help="skip the whole run's figures (the slow part)")
    ap.add_argument("--fit", action="store_true", help="sim.run_memory's model against measured peaks (a process each)")
    ap.add_argument("--one-fit", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--page-big", type=int, metavar="N", help="time the Playback page on N Poisson requests (AppTest)")
    ap.add_argument("--page", action="store_true", help="time the Playback page on the run (AppTest)")
    ap.add_argument("--recording", help="a vLLM recording (servers/vllm/recorder.py) instead of a simulated run")
    a = ap.parse_args()
    if a.page:
        return page(a.requests)
    if a.page_big:
        return page_big(a.page_big)
    if a.one_fit:
        return one_fit(a.one_fit[0], int(a.one_fit[1]))
    if a.fit:
        for kind, n in FIT_RUNS:
            subprocess.run([sys.executable, __file__, "--one-fit", kind, str(n)], check=True)
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
