"""Re-simulate a llama-server log's workload, on the model-call clock or on the log's own clock.

    runs = resimulate(trace, {"slots": {...}, "vLLM": {...}})                  # model calls
    cost = call_cost(trace)                                                     # ms per call, fitted
    runs = resimulate(trace, configs, wall_clock=True)                         # milliseconds
    resim_table({"Real log": trace, **runs}, "ms")                             # side by side

On the model-call clock the simulator needs no cost model: a task queued after call a arrives
at step a, and every number is counted in calls. A log with timestamps also says what each call
cost, so the simulator can run in milliseconds: call_cost fits sim.calibrate's linear model
(ms = per_step + per_token × tokens + per_context_token × context tokens) to the logged calls,
each counted from its first line to the next call's first line when the server went straight on
(its duration plus the median pause between calls: sampling, sending results, the HTTP thread),
and the tasks arrive at their logged times. Every call is kept in the fit: the few long prompt
calls carry the per-token cost, and trimming "outliers" (as the engine's calibration does
against stalls) would drop exactly them (measured on the s2 burst log: per token 1.6 ms with
trimming, 0.30 ms without; a 2,048-token call took 516-671 ms). No constant may be negative:
with cancelled streams a free fit can find a negative cost per call.
"""
from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from sim.calibrate import calibrate
from sim.cost import CalibratedCost
from sim.metrics import per_request, summary
from sim.simulate import simulate
from sim.trace import Trace

from .summary import workload_from_trace


def has_call_times(trace: Trace) -> bool:
    """Whether the log's calls carry real times (it had timestamps) rather than call indices."""
    return trace.time_unit == "ms"


def call_periods(trace: Trace) -> np.ndarray:
    """Per call: its logged duration plus the median pause between one call's end and the next
    call's start (what an iteration of the server's loop costs beyond the model call)."""
    s = trace.steps
    start, end = s["start"].to_numpy(dtype=float), s["end"].to_numpy(dtype=float)
    gaps = start[1:] - end[:-1]
    gaps = gaps[np.isfinite(gaps) & (gaps >= 0)]
    pause = float(np.median(gaps)) if len(gaps) else 0.0
    return end - start + pause


def call_cost(trace: Trace) -> CalibratedCost:
    """A cost model in ms fitted to the log's calls (see the module doc). ValueError when the
    log has no timestamps or fewer than 3 calls with tokens."""
    if not has_call_times(trace):
        raise ValueError("the log has no timestamps, so its calls have no durations to fit")
    t = copy.copy(trace)
    s = trace.steps.copy()
    s["end"] = s["start"].to_numpy(dtype=float) + call_periods(trace)
    t.steps = s
    cost, _ = calibrate(t, trim=0, nonnegative=True)
    return cost


def resimulate(trace: Trace, configs: dict[str, dict], *, wall_clock: bool = False,
               cost: CalibratedCost | None = None, max_steps: int | None = None) -> dict[str, Trace]:
    """The log's workload (summary.workload_from_trace) through the simulator once per
    config. wall_clock: tasks arrive at their logged times and steps cost `cost` ms (default
    call_cost(trace))."""
    wl = workload_from_trace(trace, timed=wall_clock)
    if not wall_clock:
        cost = None
    elif cost is None:
        cost = call_cost(trace)
    kw = {"max_steps": max_steps} if max_steps else {}
    return {label: simulate(wl, cfg, cost=cost, **kw) for label, cfg in configs.items()}


# ---------------------------------------------------------------------------------------------
# The log against its re-simulations, in numbers
# ---------------------------------------------------------------------------------------------

def step_clock(trace: Trace) -> Trace:
    """A copy of `trace` whose clock is the model call: call k runs from k-1 to k, a task queued
    after call a arrives at a, its first token comes at the end of its first-token call. Puts a
    log (ms or call index) and a simulation (cost units) on one scale for sim.metrics."""
    t = copy.copy(trace)
    s = trace.steps.copy()
    step = s["step"].to_numpy(dtype=float)
    s["start"], s["end"] = step - 1.0, step
    r = trace.requests.copy()

    def f(col):
        return r[col].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    r["arrival_time"] = f("arrival_step")
    r["first_scheduled_time"] = f("first_scheduled_step") - 1.0
    r["first_token_time"] = f("first_token_step")
    r["finish_time"] = f("finish_step")
    e = trace.events.copy()
    e["time"] = e["step"].to_numpy(dtype=float)
    t.steps, t.requests, t.events = s, r, e
    t.meta = {**trace.meta, "time_unit": "model calls"}
    return t


RESIM_ROWS = [("steps", "model calls", "Calls to the model (scheduler iterations that ran a batch)."),
              ("finished", "tasks finished", ""),
              ("ttft_mean", "mean TTFT (calls)", "Calls from the call a task was queued after to the call that "
                                                 "sampled its first token."),
              ("ttft_p99", "p99 TTFT (calls)", ""),
              ("wait_mean", "mean queue wait (calls)", "Calls a task waited before its first call."),
              ("e2e_mean", "mean end-to-end (calls)", ""),
              ("itl_worst", "worst token gap (calls)", "Longest stretch between two tokens of one task."),
              ("tokens_per_step", "tokens per call", "Mean tokens in a model call."),
              ("preemptions", "preemptions", "")]


# the same numbers on the log's clock (a log with timestamps, simulations with a cost model fitted to it)
WALL_ROWS = [("steps", "model calls", RESIM_ROWS[0][2]),
             ("finished", "tasks finished", ""),
             ("ttft_mean", "mean TTFT (ms)", "From the moment a task was queued to its first token."),
             ("ttft_p99", "p99 TTFT (ms)", ""),
             ("wait_mean", "mean queue wait (ms)", "From queued to its first call."),
             ("e2e_mean", "mean end-to-end (ms)", ""),
             ("itl_worst", "worst token gap (ms)", "Longest stretch between two tokens of one task."),
             ("duration", "duration (ms)", "First call's start to last call's end."),
             ("tokens_per_step", "tokens per call", "Mean tokens in a model call."),
             ("preemptions", "preemptions", "")]


def _on_clock(trace: Trace, clock: str) -> Trace:
    return trace if clock == "ms" else step_clock(trace)


def resim_table(runs: dict[str, Trace], clock: str = "calls") -> pd.DataFrame:
    """Headline numbers of each run (sim.metrics.summary): on the model-call clock (step_clock)
    or, clock="ms", on the log's own clock (every run in ms). One row per metric, one column per
    run, then "<run> − <first>" for the others."""
    rows = WALL_ROWS if clock == "ms" else RESIM_ROWS
    sums = {k: summary(_on_clock(t, clock)) for k, t in runs.items()}
    labels = list(runs)
    out = pd.DataFrame({"metric": [w for _, w, _ in rows]})
    for k in labels:
        out[k] = [float(sums[k][m]) for m, _, _ in rows]
    for k in labels[1:]:
        out[f"{k} − {labels[0]}"] = out[k] - out[labels[0]]
    return out


def ttft_table(runs: dict[str, Trace], clock: str = "calls") -> pd.DataFrame:
    """Per task: TTFT in model calls (or ms, clock="ms") in each run (tasks of the first run;
    blank where a run lacks it)."""
    labels = list(runs)
    base = per_request(_on_clock(runs[labels[0]], clock)).set_index("request")
    out = pd.DataFrame({"task": base.index.astype(str)})
    for k in labels:
        pr = per_request(_on_clock(runs[k], clock)).set_index("request")
        out[f"TTFT · {k}"] = pr["ttft"].reindex(base.index).to_numpy(dtype=float)
    return out
