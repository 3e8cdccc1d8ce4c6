"""Calibrate the simulator from a measured run, and lay its prediction beside the measurement.

    cmp = compare_with_simulator(engine_trace, requests)   # requests: the Request objects sent
    cmp.cost        # CalibratedCost fitted to the run's step times (ms)
    cmp.steps       # per measured step: tokens, context, measured ms, the fitted model's ms
    cmp.ttft        # per request: measured and simulated time to first token
    cmp.metrics     # run-level numbers side by side
    cmp.sim_trace   # the simulator's run of the same requests (same arrival times, same config)

Two questions, two tables. "Does the cost model describe a step?" compares each measured step
with what the fitted model says that very batch costs. "Does the simulator predict the run?"
replays the same requests at the same arrival times through the simulator with that cost
model and compares request latencies, because the simulator's steps need not line up with the
engine's one for one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .cost import CalibratedCost, CostModel, FormCost, form_terms
from .metrics import per_request, summary
from .simulate import simulate
from .trace import Trace
from .workload import Request, Workload


def step_samples(trace: Trace) -> pd.DataFrame:
    """The busy steps of a run: step, num_tokens, num_seqs, context_tokens (each entry's computed_before
    + tokens, summed: the KV its attention reads) and the measured step time."""
    s = trace.steps
    busy = s[~s["idle"].to_numpy(dtype=bool) & (s["num_tokens"].to_numpy() > 0)]
    b = trace.batch
    ctx = (b["computed_before"].astype("Float64").fillna(0).to_numpy(dtype=float)
           + b["tokens"].to_numpy(dtype=float))
    context = pd.Series(ctx).groupby(b["step"].to_numpy()).sum()
    steps = busy["step"].to_numpy(dtype=np.int64)
    decode = busy["decode_tokens"].to_numpy(dtype=np.int64) if "decode_tokens" in busy else np.zeros(len(busy), np.int64)
    return pd.DataFrame({"step": steps, "num_tokens": busy["num_tokens"].to_numpy(dtype=np.int64),
                         "num_seqs": busy["num_seqs"].to_numpy(dtype=np.int64),
                         "decode_tokens": decode,
                         "context_tokens": context.reindex(steps, fill_value=0).to_numpy(dtype=np.int64),
                         "measured": (busy["end"] - busy["start"]).to_numpy(dtype=float)})


def _fit(samples: pd.DataFrame, unit: str, nonnegative: bool = False, form: str = "linear") -> CostModel:
    if form == "linear":
        return CalibratedCost.fit(zip(samples["num_tokens"], ([c] for c in samples["context_tokens"]),
                                      samples["measured"]), unit=unit, nonnegative=nonnegative)
    form_terms(form)   # an unknown form: one plain sentence
    d = samples["decode_tokens"].to_numpy(dtype=float)
    rows = np.column_stack([samples["num_tokens"].to_numpy(dtype=float) - d, d,
                            samples["context_tokens"].to_numpy(dtype=float), samples["num_seqs"].to_numpy(dtype=float),
                            samples["measured"].to_numpy(dtype=float)])
    return FormCost.fit(rows, form=form, unit=unit, nonnegative=nonnegative)


def predict_steps(cost: CostModel, samples: pd.DataFrame) -> np.ndarray:
    """The cost model's time for each step_samples row (by its make-up when the model prices that)."""
    if isinstance(cost, FormCost):
        d = samples["decode_tokens"].to_numpy(dtype=float)
        return np.asarray([cost.step_time_shape(n - dd, dd, c, q) for n, dd, c, q in zip(
            samples["num_tokens"].to_numpy(dtype=float), d, samples["context_tokens"].to_numpy(dtype=float),
            samples["num_seqs"].to_numpy(dtype=float))], dtype=float)
    return np.asarray([cost.step_time_totals(int(n), int(c))
                       for n, c in zip(samples["num_tokens"], samples["context_tokens"])], dtype=float)


_predict = predict_steps


def calibrate(trace: Trace, trim: float = 4.0, max_drop: float = 0.1,
              nonnegative: bool = False, form: str = "linear") -> tuple[CostModel, np.ndarray]:
    """A cost model (time unit of the trace) fitted to the run's busy steps, and which steps
    the fit used (a bool per step_samples row). form: sim.cost.COST_FORMS; "linear" (the
    default) is a CalibratedCost, the others a FormCost.

    A measured step can be stalled by things the model does not know (the first pass
    allocating its buffers, another thread holding the GIL, another process on the core); one
    such step would pull every constant. So with trim > 0 the steps whose residual is more than
    `trim` robust standard deviations (1.4826 x the median absolute deviation, at least 1% of
    the median step) from the median residual are left out and the rest refitted, twice at
    most, the worst first and never more than `max_drop` of the steps: when many steps are
    slow, slowness is the machine's normal state and the fit keeps it (the simulator's total
    time then stays close to the measured one). fit_info gains "outliers" (steps left out)."""
    samples = step_samples(trace)
    if len(samples) < 3:
        raise ValueError(f"the run has {len(samples)} busy steps; calibrating needs at least 3")
    unit = trace.time_unit or "ms"
    keep = np.ones(len(samples), dtype=bool)
    cost = _fit(samples, unit, nonnegative, form)
    measured = samples["measured"].to_numpy(dtype=float)
    budget = min(int(max_drop * len(samples)), len(samples) - 3)
    for _ in range(2 if trim > 0 else 0):
        resid = measured - _predict(cost, samples)
        centre = np.median(resid[keep])
        spread = max(1.4826 * np.median(np.abs(resid[keep] - centre)), 0.01 * float(np.median(measured)))
        dev = np.abs(resid - centre)
        worst = np.argsort(-dev, kind="stable")[:budget]
        new = np.ones(len(samples), dtype=bool)
        new[worst[dev[worst] > trim * spread]] = False
        if (new == keep).all():
            break
        keep = new
        cost = _fit(samples[keep], unit, nonnegative, form)
    cost.fit_info["outliers"] = int((~keep).sum())
    return cost, keep


def replay_workload(trace: Trace, requests: list[Request] | None = None) -> Workload:
    """The run's requests as a workload for the simulator: each at its recorded arrival time
    (in the trace's unit), asking for the tokens it actually produced (a request that stopped
    at an end-of-sequence token asks for that many), with its prompt ids when `requests` (the
    Request objects that were sent) are given, so prefix-cache hits land where they landed.
    Requests that never arrived (cancelled before their time) are left out."""
    given = {r.id: r for r in requests or ()}
    r = trace.requests
    out = []
    for row in r.itertuples(index=False):
        if pd.isna(row.arrival_time):
            continue
        base = given.get(row.request) or Request(row.request, int(row.prompt_len), int(row.max_tokens))
        produced = row.output_tokens if row.finish_reason == "stop" and not pd.isna(row.output_tokens) else None
        out.append(replace(base, prompt_len=int(row.prompt_len), tenant=str(row.tenant), priority=int(row.priority),
                           max_tokens=int(produced) if produced else int(row.max_tokens),
                           arrival_step=0, arrival_time=float(row.arrival_time)))
    out.sort(key=lambda q: q.arrival_time)
    cfg = dict(trace.meta.get("config") or {})
    cfg["scheduler"] = trace.meta.get("scheduler", "vllm")
    return Workload(requests=out, config=cfg, name=str(trace.meta.get("workload") or "engine run"))


@dataclass
class SimComparison:
    cost: CalibratedCost
    sim_trace: Trace
    steps: pd.DataFrame  # step, num_tokens, num_seqs, context_tokens, measured, predicted, error, in_fit
    ttft: pd.DataFrame  # request, tenant, measured, simulated, difference
    metrics: pd.DataFrame  # metric, measured, simulated, simulated / measured

    def fit_summary(self) -> dict:
        """The fit in numbers: constants, R², RMSE (over the steps it used), steps left out, and
        the median relative step error over all steps."""
        c = self.cost
        rel = (self.steps["predicted"] - self.steps["measured"]).abs() / self.steps["measured"]
        return {"per_token": c.per_token, "per_context_token": c.per_context_token, "per_step": c.per_step,
                "r2": c.fit_info.get("r2"), "rmse": c.fit_info.get("rmse"), "samples": c.fit_info.get("samples"),
                "outliers": c.fit_info.get("outliers", 0),
                "median_rel_error": float(rel.median()) if len(rel) else math.nan}


# (summary key, label, scale): times stay in the trace's unit (ms); throughput per second
METRICS = (("busy_steps", "Busy steps", 1.0), ("duration", "Duration (ms)", 1.0), ("ttft_mean", "Mean TTFT (ms)", 1.0),
           ("ttft_p99", "p99 TTFT (ms)", 1.0), ("itl_mean", "Mean token gap (ms)", 1.0),
           ("e2e_mean", "Mean end-to-end (ms)", 1.0), ("throughput", "Tokens / s", 1000.0),
           ("preemptions", "Preemptions", 1.0))


def compare_with_simulator(trace: Trace, requests: list[Request] | None = None) -> SimComparison:
    """Fit the cost model to `trace` (a measured run), simulate the same requests with it, and
    compare. Raises ValueError when the run is too short to fit."""
    cost, used = calibrate(trace)
    samples = step_samples(trace)
    pred = _predict(cost, samples)
    steps = samples.assign(predicted=pred, error=pred - samples["measured"].to_numpy(), in_fit=used)
    wl = replay_workload(trace, requests)
    sim = simulate(wl, cost=cost)
    pm, ps = per_request(trace).set_index("request"), per_request(sim).set_index("request")
    ids = [q for q in pm.index if q in ps.index]
    ttft = pd.DataFrame({"request": ids, "tenant": pm.loc[ids, "tenant"].to_numpy(),
                         "measured": pm.loc[ids, "ttft"].to_numpy(dtype=float),
                         "simulated": ps.loc[ids, "ttft"].to_numpy(dtype=float)})
    ttft["difference"] = ttft["simulated"] - ttft["measured"]
    sm, ss = summary(trace), summary(sim)
    rows = []
    for key, label, scale in METRICS:
        a, b = (scale * float(x) if x is not None else math.nan for x in (sm.get(key), ss.get(key)))
        rows.append({"metric": label, "measured": a, "simulated": b,
                     "simulated / measured": b / a if a and not math.isnan(a) else math.nan})
    return SimComparison(cost, sim, steps, ttft, pd.DataFrame(rows))
