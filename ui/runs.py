"""The cached simulation call every page uses.

    from ui.runs import run_trace, run_key
    try:
        trace = run_trace(workload, config, cost_key)   # cached; a progress bar on long runs
    except Exception as e:                               # a config that cannot run: say so
        st.error(f"This configuration cannot run: {e}"); st.stop()
    if ss.get("my_run") != run_key(workload, config, cost_key): ...   # "did the run change?"

The cache (st.cache_data) is keyed on the workload JSON, the config JSON (sorted keys) and the
cost preset key (sim.cost.COST_PRESETS), so the same settings never simulate twice. `config`
overrides the workload's own config (simulate's rule); "scheduler" may be one of its keys.
"""
from __future__ import annotations

import hashlib
import json

import streamlit as st

from sim.cost import cost_from_preset
from sim.simulate import simulate
from sim.trace import Trace
from sim.workload import Workload

# What limits a run on the pages is memory: a run's peak grows with its steps and its batch rows
# (a batch entry per request per step). `python bench/bench_window.py --peak` measures both on
# the compact Trace: 539 bytes a step (an idle run of 1,000,000 steps) and, beyond its steps, 219
# bytes a batch row (a busy run of 360,033 steps and 1,242,000 rows, 445 MB). Each cap takes half
# of one run's budget, so a run at both caps peaks at about the budget. Long runs are fine to look
# at: the pages open them on an overview and draw a window (ui/window.py).
RUN_MEMORY_BYTES = 3_600_000_000   # one run's peak: a few sessions' runs at once fit a 16 GB server
BYTES_PER_STEP = 539
BYTES_PER_BATCH_ROW = 219
MAX_STEPS = RUN_MEMORY_BYTES // 2 // BYTES_PER_STEP             # 3,339,517 steps (~6 s of idle steps, ~70 s busy)
MAX_BATCH_ROWS = RUN_MEMORY_BYTES // 2 // BYTES_PER_BATCH_ROW   # 8,219,178 token rows


def _texts(workload: Workload, config: dict) -> tuple[str, str]:
    return json.dumps(workload.to_json(), sort_keys=True), json.dumps(config, sort_keys=True)


def run_key(workload: Workload, config: dict, cost_key: str) -> str:
    """A short digest naming this run (same settings, same key)."""
    w, c = _texts(workload, config)
    return hashlib.sha256(f"{w}\0{c}\0{cost_key}".encode()).hexdigest()[:16]


class ProgressBar:
    """progress(done, total) for a simulation: a bar drawn on the first call (inside a cached
    function, so a cache hit replays it), redrawn when the whole percent changes, gone on close()."""

    def __init__(self, what: str):
        self.what, self.bar, self.shown = what, None, -1

    def __call__(self, done: int, total: int) -> None:
        pct = min(100, int(100 * done / max(total, 1)))
        if pct != self.shown:
            self.shown = pct
            text = f"{self.what} {done:,} of {total:,} requests done"
            if self.bar is None:
                self.bar = st.progress(pct, text=text)
            else:
                self.bar.progress(pct, text=text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.empty()


@st.cache_data(max_entries=32, show_spinner="Simulating…")
def _cached_run(workload_json: str, config_json: str, cost_key: str, name: str) -> Trace:
    wl = Workload.from_json(json.loads(workload_json), name=name)
    bar = ProgressBar("Simulating…")
    try:
        return simulate(wl, json.loads(config_json), cost=cost_from_preset(cost_key), max_steps=MAX_STEPS,
                        progress=bar, max_batch_rows=MAX_BATCH_ROWS)
    finally:
        bar.close()


def run_trace(workload: Workload, config: dict, cost_key: str) -> Trace:
    """The Trace of `workload` under `config` and the cost preset `cost_key` (cached).

    Raises what simulate raises (ValueError / RuntimeError with a plain message) for a run
    that cannot finish, e.g. a KV pool too small, or past the MAX_STEPS / MAX_BATCH_ROWS caps.
    """
    w, c = _texts(workload, config)
    return _cached_run(w, c, cost_key, workload.name)
