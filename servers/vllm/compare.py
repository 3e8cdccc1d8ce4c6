"""A vLLM recording beside the simulator: are the decisions the same, and how well does a cost
model fitted on a recording predict the times?

    verdict = decisions(rec)              # {"equal": bool, "steps": n, "first_difference": {...} | None}
    pred = predict(rec, calibration_rec)  # the simulator on rec's arrivals, on the wall clock

Decisions: the recording's workload (requests arriving right before the step they were added
in, the server's settings) through the simulator, both as oracle lines, compared field by field.
Times: a CalibratedCost (sim.calibrate: ms = per step + per token x tokens + per context token
x context) fitted on the calibration recording's busy steps, each counted from its schedule()
to the next one's (the engine's own work between steps included), then the recording's requests
replayed at the times the scheduler got them. The recording's times are the scheduler's: from
add to the end of the step that sampled the first token / finished the request; the front end's
time (received -> added, and after the last step) is outside both, and reported apart.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim import versions
from sim.async_sched import per_schedule
from sim.calibrate import calibrate, step_samples
from sim.cost import CalibratedCost
from sim.simulate import oracle_jsonl, simulate
from sim.trace import Trace

from .recording import Recording, first_difference, oracle_lines, to_trace, to_workload


def decisions(rec: Recording) -> dict:
    """Whether the simulator makes the recorded decisions at every step, and where it parts."""
    recorded = oracle_lines(rec)
    wl = to_workload(rec)
    simulated = [json.loads(line) for line in oracle_jsonl(wl).splitlines()]
    if wl.config.get("async_scheduling"):   # the recorder writes each step with its own update
        simulated = per_schedule(simulated)
    diff = first_difference(recorded, simulated)
    capped = any(len(x["waiting"]) < n for x, n in zip(recorded, (s.get("waiting_n", 0) for s in rec.steps)))
    return {"equal": diff is None, "steps": len(recorded), "simulated_steps": len(simulated),
            "first_difference": diff, "waiting_capped": capped,
            "simulated_as": {"vllm_version": wl.config.get("vllm_version", versions.NEWEST),
                             "async_scheduling": bool(wl.config.get("async_scheduling"))}}


def busy_periods(trace: Trace) -> Trace:
    """The trace with each busy step lasting until the next step's schedule() (when the next one
    follows within 3x the median period: the server did not wait for requests in between)."""
    s = trace.steps.copy()
    period = s["period_ms"].to_numpy(dtype=float)
    busy = ~s["idle"].to_numpy(dtype=bool)
    ok = np.isfinite(period) & busy
    if ok.any():
        ok &= period <= 3.0 * float(np.median(period[ok]))
    s["end"] = np.where(ok, s["start"].to_numpy(dtype=float) + period, s["end"].to_numpy(dtype=float))
    return Trace(requests=trace.requests, steps=s, batch=trace.batch, events=trace.events, kv=trace.kv,
                 counters=trace.counters, meta=dict(trace.meta))


def fit_cost(rec: Recording) -> CalibratedCost:
    cost, _ = calibrate(busy_periods(to_trace(rec)))
    return cost


def request_times(trace: Trace) -> pd.DataFrame:
    """Per request: ttft, tpot (mean time per output token after the first) and e2e, in ms from
    its arrival_time."""
    r = trace.requests
    arr = r["arrival_time"].to_numpy(dtype=float)
    first = r["first_token_time"].to_numpy(dtype=float)
    fin = r["finish_time"].to_numpy(dtype=float)
    out = r["output_tokens"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    tpot = np.where(out > 1, (fin - first) / np.maximum(out - 1, 1), np.nan)
    return pd.DataFrame({"id": r["request"].astype(str).to_numpy(), "ttft_ms": first - arr, "tpot_ms": tpot,
                         "e2e_ms": fin - arr})


@dataclass
class Prediction:
    cost: CalibratedCost
    sim_trace: Trace
    requests: pd.DataFrame   # id, ttft_ms, tpot_ms, e2e_ms, predicted_ttft_ms, predicted_tpot_ms, predicted_e2e_ms
    errors: dict             # per metric: mean absolute % error, p90, n

    def to_json(self) -> dict:
        rows = self.requests.replace({np.nan: None}).to_dict(orient="records")
        c = self.cost
        return {"cost": {"per_step_ms": c.per_step, "per_token_ms": c.per_token,
                         "per_context_token_ms": c.per_context_token, "r2": c.fit_info.get("r2")},
                "errors": self.errors, "requests": rows}


def predict(rec: Recording, calibration: Recording) -> Prediction:
    """The simulator on rec's arrivals (wall clock), with the cost fitted on `calibration`."""
    cost = fit_cost(calibration)
    sim = simulate(to_workload(rec, timed=True), cost=cost)
    real = request_times(to_trace(rec))
    guess = request_times(sim).set_index("id")
    out = real.copy()
    for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
        out[f"predicted_{m}"] = guess[m].reindex(out["id"]).to_numpy(dtype=float)
    errors = {}
    for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
        a, b = out[m].to_numpy(dtype=float), out[f"predicted_{m}"].to_numpy(dtype=float)
        ok = np.isfinite(a) & np.isfinite(b) & (a > 0)
        pct = np.abs(b[ok] - a[ok]) / a[ok] * 100.0
        errors[m] = {"mape": float(pct.mean()) if len(pct) else math.nan,
                     "p90": float(np.percentile(pct, 90)) if len(pct) else math.nan, "n": int(ok.sum())}
    return Prediction(cost, sim, out, errors)


def step_predictions(trace: Trace, cost: CalibratedCost) -> pd.DataFrame:
    """Per busy step of a recording: step, num_tokens, num_seqs, context_tokens, measured (its
    schedule() to the next one's, ms), predicted (the cost model's ms for that batch), in_fit."""
    steps = step_samples(busy_periods(trace))
    pred = [cost.step_time_totals(int(n), int(c)) for n, c in zip(steps["num_tokens"], steps["context_tokens"])]
    return steps.assign(predicted=np.asarray(pred, dtype=float), in_fit=True)
