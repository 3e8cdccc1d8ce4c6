"""The cached simulation call every page uses.

    from ui.runs import run_trace, run_key
    try:
        trace = run_trace(workload, config, cost_key)   # cached; a progress bar on long runs
    except Exception as e:                               # a config that cannot run: say so
        st.error(f"This configuration cannot run: {e}"); st.stop()
    if ss.get("my_run") != run_key(workload, config, cost_key): ...   # "did the run change?"

Runs are kept once for every session (RunStore, not st.cache_data: a cached value is pickled,
and each script run would unpickle its own copy of a Trace that may hold tens of millions of
rows). The key is the workload JSON, the config JSON (sorted keys) and the cost preset key
(sim.cost.COST_PRESETS), so the same settings never simulate twice; a run that cannot finish is
kept as its error. The pages only read a Trace (pandas copies on write), never change it.
`config` overrides the workload's own config (simulate's rule); "scheduler" may be one of its keys.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Callable

import streamlit as st

from sim.cost import cost_from_preset
from sim.metrics import per_request, summary
from sim.run_memory import steps_within
from sim.simulate import simulate
from sim.trace import Trace
from sim.workload import Workload

# What limits a run on the pages is memory. sim.run_memory says what a run's Trace takes while it
# is made (its steps, token rows, KV changes, requests and cached prompt tokens, each measured:
# `python bench/bench_window.py --fit`); a run that would pass RUN_MEMORY_BYTES stops with a
# sentence. 4 GB holds a million Poisson requests (52.2M token rows, 3.1 GiB measured). The runs
# kept for all sessions together take at most KEPT_MEMORY_BYTES; the least recently used go first.
# Long runs are fine to look at: the pages open them on an overview and draw a window (ui/window.py).
RUN_MEMORY_BYTES = 4_000_000_000
KEPT_MEMORY_BYTES = 8_000_000_000
MAX_STEPS = steps_within(RUN_MEMORY_BYTES)   # 12,500,000 steps of an idle run
MAX_BATCH_ROWS: int | None = None            # a further cap on token rows (tests set one); memory is the cap


def workload_digest(workload: Workload) -> str:
    """A digest of the workload's JSON (sorted keys), made once per Workload object: a page never
    changes a workload it was given, and a million requests' JSON takes seconds to write."""
    digest = workload.__dict__.get("_json_digest")
    if digest is None:
        digest = hashlib.sha256(json.dumps(workload.to_json(), sort_keys=True).encode()).hexdigest()
        workload.__dict__["_json_digest"] = digest
    return digest


def run_key(workload: Workload, config: dict, cost_key: str) -> str:
    """A short digest naming this run (same settings, same key)."""
    return _key(workload, config, cost_key)[:16]


def _key(workload: Workload, config: dict, cost_key: str) -> str:
    c = json.dumps(config, sort_keys=True)
    return hashlib.sha256(f"{workload_digest(workload)}\0{c}\0{cost_key}\0{workload.name}".encode()).hexdigest()


class ProgressBar:
    """progress(done, total) for a simulation: a bar drawn on the first call, redrawn when the
    whole percent changes, gone on close() (a kept run draws none: it is not simulated again)."""

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


def trace_bytes(trace: Trace) -> int:
    """What a Trace's tables hold (their arrays; a categorical's categories once)."""
    return sum(int(getattr(trace, name).memory_usage(index=True, deep=False).sum())
               for name in ("requests", "steps", "batch", "events", "kv", "counters"))


def kept_bytes(value) -> int:
    """What a kept value holds, about: a Trace's tables; a fleet's replicas and routing table;
    the parts of a tuple; 0 for anything else (small)."""
    if isinstance(value, Trace):
        return trace_bytes(value)
    if isinstance(value, tuple):
        return sum(kept_bytes(v) for v in value)
    if hasattr(value, "replicas") and hasattr(value, "routes"):   # a FleetTrace
        return (sum(kept_bytes(t) for t in value.replicas)
                + int(value.routes.memory_usage(index=True, deep=False).sum()))
    return 0


class RunStore:
    """Runs (a Trace, a fleet, ...) by key, shared by every session: each made once (a second session asking for a run
    being made waits for it), kept until the runs kept pass `budget` bytes (least recently used
    out first; the newest always stays). A run that raised is kept as its exception."""

    def __init__(self, budget: int):
        self.budget = budget
        self.lock = threading.Lock()
        self.runs: OrderedDict[str, tuple[object, int]] = OrderedDict()   # key -> (Trace or exception, bytes)
        self.making: dict[str, threading.Lock] = {}

    def _kept(self, key: str):
        with self.lock:
            if key in self.runs:
                self.runs.move_to_end(key)
                return self.runs[key]
            return None

    def get(self, key: str, make: Callable[[], object]):
        kept = self._kept(key)
        if kept is None:
            with self.lock:
                making = self.making.setdefault(key, threading.Lock())
            with making:
                kept = self._kept(key)
                if kept is None:
                    try:
                        value = make()
                        kept = (value, kept_bytes(value))
                    except (ValueError, RuntimeError) as e:   # a run that cannot finish: a sentence, kept
                        kept = (e, 0)
                    self._keep(key, kept)
            with self.lock:
                self.making.pop(key, None)
        value = kept[0]
        if isinstance(value, Exception):
            raise value.with_traceback(None)   # kept: each raise would add its frames
        return value

    def _keep(self, key: str, kept: tuple[object, int]) -> None:
        with self.lock:
            self.runs[key] = kept
            total = sum(size for _, size in self.runs.values())
            while total > self.budget and len(self.runs) > 1:
                _, (_, size) = self.runs.popitem(last=False)
                total -= size

    def clear(self) -> None:
        with self.lock:
            self.runs.clear()


@st.cache_resource(show_spinner=False)
def run_store() -> RunStore:
    """The one store of this server's runs."""
    return RunStore(KEPT_MEMORY_BYTES)


def _simulate(workload: Workload, config: dict, cost_key: str) -> Trace:
    bar = ProgressBar("Simulating…")
    try:
        with st.spinner("Simulating…"):
            return simulate(workload, dict(config), cost=cost_from_preset(cost_key), max_steps=MAX_STEPS,
                            progress=bar, max_batch_rows=MAX_BATCH_ROWS, max_memory=RUN_MEMORY_BYTES)
    finally:
        bar.close()


@st.cache_resource(max_entries=16, show_spinner="Adding up the whole run's numbers…")
def whole_numbers(key: str, _trace: Trace) -> tuple[dict, object]:
    """A run's (or a recording's) metrics and per-request table, once per `key` naming it: a long
    run's window moves without computing them again. Shared, not copied (the pages read them)."""
    return summary(_trace), per_request(_trace)


def run_trace(workload: Workload, config: dict, cost_key: str) -> Trace:
    """The Trace of `workload` under `config` and the cost preset `cost_key` (kept for every session).

    Raises what simulate raises (ValueError / RuntimeError with a plain message) for a run
    that cannot finish, e.g. a KV pool too small, or past the memory or step caps.
    """
    return run_store().get(_key(workload, config, cost_key), lambda: _simulate(workload, config, cost_key))
