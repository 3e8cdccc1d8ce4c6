"""Re-simulate a llama-server log's workload, on the model-call clock or on the log's own clock.

    runs = resimulate(trace, {"slots": {...}, "vLLM": {...}})                  # model calls
    cost = call_cost(trace)                                                     # ms per call, fitted
    runs = resimulate(trace, configs, wall_clock=True)                         # milliseconds

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

from .calibrate import calibrate
from .cost import CalibratedCost
from .llamalog import workload_from_trace
from .simulate import simulate
from .trace import Trace


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
    """The log's workload (sim.llamalog.workload_from_trace) through the simulator once per
    config. wall_clock: tasks arrive at their logged times and steps cost `cost` ms (default
    call_cost(trace))."""
    wl = workload_from_trace(trace, timed=wall_clock)
    if not wall_clock:
        cost = None
    elif cost is None:
        cost = call_cost(trace)
    kw = {"max_steps": max_steps} if max_steps else {}
    return {label: simulate(wl, cfg, cost=cost, **kw) for label, cfg in configs.items()}
