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

import io
import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim import versions
from sim.async_sched import per_schedule
from sim.calibrate import calibrate, predict_steps, step_samples
from sim.cost import CalibratedCost, CostModel, ScaledCost
from sim.simulate import simulate
from sim.trace import Trace

from .recording import Recording, first_difference, iter_oracle_lines, to_trace, to_workload


def _finite_median(x: np.ndarray) -> float:
    """The median of x's finite values; NaN when it has none (no request got that far: numpy's
    nanmedian warns on the terminal then)."""
    x = x[np.isfinite(x)]
    return float(np.median(x)) if len(x) else math.nan


def decisions(rec: Recording) -> dict:
    """Whether the simulator makes the recorded decisions at every step, and where it parts.
    Sync: each simulated line is compared with the recorded one as the simulator writes it
    (neither side's lines are held: on a 350,000-step recording they took gigabytes); async
    recordings pair the simulator's engine calls into schedule() steps first (per_schedule)."""
    # without prefix caching (said so: vLLM's default is on) the simulator reads no prompt ids
    wl = to_workload(rec, ids=rec.config.get("enable_prefix_caching") is not False)
    waiting_n = (iter(rec.steps.waiting_n) if getattr(rec.steps, "summarized", False)   # noted as read
                 else (s.get("waiting_n", 0) for s in rec.steps))
    capped = [False]

    def recorded():
        for x, n in zip(iter_oracle_lines(rec), waiting_n):
            if len(x["waiting"]) < n:
                capped[0] = True
            yield x

    # The simulator may stop on the recording's workload where the server went on (a damaged or
    # spliced recording: requests a pool of this size cannot hold, the step cap): a RuntimeError
    # from simulate. That is a verdict too: the decisions compared up to there, and where they
    # part (the recording goes on, the simulation does not), with the reason in "stopped".
    stopped = None
    if wl.config.get("async_scheduling"):   # the recorder writes each step with its own update
        buf = io.StringIO()
        try:
            simulate(wl, oracle_out=buf)   # oracle_jsonl(wl), keeping the lines written before a stop
        except RuntimeError as e:
            stopped = str(e)
        simulated = per_schedule([json.loads(line) for line in buf.getvalue().splitlines()])
        rec_lines = list(recorded())
        diff, n_rec, n_sim = first_difference(rec_lines, simulated), len(rec_lines), len(simulated)
    else:
        cmp = _Compare(recorded())
        try:
            simulate(wl, oracle_out=cmp)
        except RuntimeError as e:
            stopped = str(e)
        diff, n_rec, n_sim = cmp.result()
    if stopped and diff is None:   # the recording ended where the simulation stopped: still not the same run
        diff = {"step": n_sim + 1, "field": "steps", "recorded": n_rec, "simulated": n_sim}
    out = {"equal": diff is None, "steps": n_rec, "simulated_steps": n_sim,
           "first_difference": diff, "waiting_capped": capped[0],
           "simulated_as": {"vllm_version": wl.config.get("vllm_version", versions.NEWEST),
                            "async_scheduling": bool(wl.config.get("async_scheduling"))}}
    if stopped:
        out["stopped"] = stopped
    return out


class _Compare:
    """A text file the simulator writes its oracle lines to, each compared with the next recorded
    line as it comes (first_difference, one pair at a time)."""

    def __init__(self, recorded):
        self.recorded = recorded
        self.part = ""
        self.n_sim = self.n_rec = 0
        self.diff = None

    def write(self, text: str) -> int:
        lines = (self.part + text).split("\n")
        self.part = lines.pop()
        for line in lines:
            if line:
                self._one(json.loads(line))
        return len(text)

    def line(self, sim: dict) -> None:
        """A simulated line as the simulator made it (sim/simulate.py _oracle_write), not as text."""
        self._one(sim)

    def _one(self, sim: dict) -> None:
        self.n_sim += 1
        if self.n_rec < self.n_sim - 1:   # the recording ran out before
            return
        a = next(self.recorded, None)
        if a is None:
            return
        self.n_rec += 1
        if self.diff is None:
            self.diff = first_difference([a], [sim])
            if self.diff is not None and self.diff["field"] == "steps":
                self.diff = None

    def result(self) -> tuple[dict | None, int, int]:
        if self.part:
            self._one(json.loads(self.part))
            self.part = ""
        self.n_rec += sum(1 for _ in self.recorded)
        diff = self.diff
        if diff is None and self.n_rec != self.n_sim:
            n = min(self.n_rec, self.n_sim) + 1
            diff = {"step": n, "field": "steps", "recorded": self.n_rec, "simulated": self.n_sim}
        return diff, self.n_rec, self.n_sim


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


def fit_cost(rec: Recording, form: str = "linear") -> CostModel:
    """The cost model fitted on rec's busy steps (form: sim.cost.COST_FORMS; "linear" a CalibratedCost)."""
    return fit_cost_trace(to_trace(rec), form)


def fit_cost_trace(trace: Trace, form: str = "linear") -> CostModel:
    """fit_cost on a recording's Trace (to_trace, on the recording's own clock)."""
    cost, _ = calibrate(busy_periods(trace), form=form)
    return cost


# the prediction band: these quantiles of how much slower or faster than the model the run went
BAND = (0.1, 0.9)


def band_factors(measured, predicted, window: int, q: tuple[float, float] = BAND) -> tuple[float, float]:
    """(low, high) step-time factors: the q quantiles, over every stretch of `window` consecutive
    busy steps, of the stretch's measured time over the model's, widened to hold 1 (the point
    prediction). One step (window 1) gives the spread of single steps' residuals; a request that
    lives many steps sums them, and how much of a step's noise survives the sum depends on
    whether slow steps come together (another process on the core for a second) or alone; the
    stretches of the run itself say which, instead of assuming either."""
    m, p = np.asarray(measured, dtype=float), np.asarray(predicted, dtype=float)
    ok = np.isfinite(m) & np.isfinite(p) & (p > 0)
    m, p = m[ok], p[ok]
    if not len(m):
        return 1.0, 1.0
    w = max(1, min(int(window), len(m)))
    cm, cp = np.concatenate([[0.0], np.cumsum(m)]), np.concatenate([[0.0], np.cumsum(p)])
    ratio = (cm[w:] - cm[:-w]) / (cp[w:] - cp[:-w])
    lo, hi = np.quantile(ratio, q)
    return min(float(lo), 1.0), max(float(hi), 1.0)


def client_id(request_id: str) -> str:
    """The id the client sent (load.send's request_id) from vLLM's `cmpl-<id>-<n>-<hash>`."""
    s = str(request_id)
    return s[len("cmpl-"):].rsplit("-", 2)[0] if s.startswith("cmpl-") and s.count("-") >= 3 else s


def _pct(a: np.ndarray, b: np.ndarray) -> dict:
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0)
    pct = np.abs(b[ok] - a[ok]) / a[ok] * 100.0
    return {"mape": float(pct.mean()) if len(pct) else math.nan,
            "p90": float(np.percentile(pct, 90)) if len(pct) else math.nan, "n": int(ok.sum())}


def noise_floor(a: Recording, b: Recording) -> dict:
    """Two recordings of the same requests (the same client ids): per metric the mean and p90 of
    |b - a| / a per request (what the machine alone moves), and n, the requests in both."""
    ta = request_times(to_trace(a)).assign(cid=lambda d: d["id"].map(client_id)).set_index("cid")
    tb = request_times(to_trace(b)).assign(cid=lambda d: d["id"].map(client_id)).set_index("cid")
    ids = [i for i in ta.index if i in tb.index]
    out = {m: _pct(ta.loc[ids, m].to_numpy(dtype=float), tb.loc[ids, m].to_numpy(dtype=float))
           for m in ("ttft_ms", "tpot_ms", "e2e_ms")}
    out["n"] = len(ids)
    return out


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


METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


@dataclass
class Prediction:
    cost: CostModel
    sim_trace: Trace
    # id, ttft_ms, tpot_ms, e2e_ms, predicted_ttft_ms, predicted_tpot_ms, predicted_e2e_ms and, with a
    # band, predicted_<metric>_low / _high
    requests: pd.DataFrame
    errors: dict             # per metric: mean absolute % error, p90, n
    band: dict | None = None  # how the band was made: quantiles, windows (steps), step-time factors

    def band_coverage(self) -> dict:
        """Per metric, the % of requests whose recorded time lies inside the band (NaN without one)."""
        out = {}
        for m in METRICS:
            r = self.requests
            if self.band is None or f"predicted_{m}_low" not in r:
                out[m] = math.nan
                continue
            a, lo, hi = (r[k].to_numpy(dtype=float) for k in (m, f"predicted_{m}_low", f"predicted_{m}_high"))
            ok = np.isfinite(a) & np.isfinite(lo) & np.isfinite(hi)
            out[m] = float(((a[ok] >= lo[ok]) & (a[ok] <= hi[ok])).mean() * 100.0) if ok.any() else math.nan
        return out

    def to_json(self) -> dict:
        rows = self.requests.replace({np.nan: None}).to_dict(orient="records")
        c = self.cost
        if isinstance(c, CalibratedCost):
            cost = {"form": "linear", "per_step_ms": c.per_step, "per_token_ms": c.per_token,
                    "per_context_token_ms": c.per_context_token, "r2": c.fit_info.get("r2")}
        else:
            cost = {"form": c.form, "per_step_ms": c.per_step, **{f"per_{t}_ms": v for t, v in c.coef.items()},
                    "r2": c.fit_info.get("r2")}
        out = {"cost": cost, "errors": self.errors, "requests": rows}
        if self.band is not None:
            out["band"] = {**self.band, "coverage": self.band_coverage()}
        return out


def predict(rec: Recording, calibration: Recording | None, form: str = "linear", band: bool = True,
            cost: CostModel | None = None) -> Prediction:
    """The simulator on rec's arrivals (wall clock), with the cost fitted on `calibration`.

    band: each prediction also gets a low and a high (predicted_<metric>_low / _high), from the
    fit's residuals on the calibration's steps: band_factors, over stretches as long as the
    median request's time to first token (for TTFT) and its life (TPOT, E2E) in the point
    simulation, give how much slower and faster than the model such a stretch of steps went
    (10th and 90th percentiles); the same arrivals are simulated again with every step that
    much slower and faster (sim.cost.ScaledCost), so that queueing carries the difference on as
    it would, and each request's band is the least and most of the three runs. What it cannot
    know: a machine that is slower or faster as a whole on the predicted run than on the
    calibration run (load from elsewhere): that is outside every residual of one run, and the
    bench (bench/bench_vllm_fidelity.py --floor) measures how often the band holds a held run.

    cost: a model fitted already (then `calibration` only makes the band; None without one)."""
    if cost is None:
        cost = fit_cost(calibration, form)
    wl = to_workload(rec, timed=True)

    def run(cost):   # a run the simulator cannot finish (a damaged recording) is a plain ValueError
        try:
            return simulate(wl, cost=cost)
        except RuntimeError as e:
            raise ValueError(f"the simulator cannot run this recording's arrivals to their end ({e})") from None
    sim = run(cost)
    real = request_times(to_trace(rec))
    guess = request_times(sim).set_index("id")
    out = real.copy()
    for m in METRICS:
        out[f"predicted_{m}"] = guess[m].reindex(out["id"]).to_numpy(dtype=float)
    info = None
    if band:
        steps = step_samples(busy_periods(to_trace(calibration)))
        measured, modelled = steps["measured"].to_numpy(dtype=float), predict_steps(cost, steps)
        r = sim.requests
        arrival = r["arrival_step"].to_numpy(dtype=float)
        windows = {"ttft": _finite_median(r["first_token_step"].to_numpy(dtype=float) - arrival),
                   "e2e": _finite_median(r["finish_step"].to_numpy(dtype=float) - arrival)}
        windows = {k: max(1, int(round(v))) if np.isfinite(v) else 1 for k, v in windows.items()}
        factors, runs = {}, {}
        for k, w in windows.items():
            factors[k] = band_factors(measured, modelled, w)
            for f in factors[k]:
                if f not in runs:
                    runs[f] = guess if f == 1.0 else request_times(run(ScaledCost(cost, f))).set_index("id")
        for m in METRICS:
            lo_f, hi_f = factors["ttft" if m == "ttft_ms" else "e2e"]
            vals = np.column_stack([out[f"predicted_{m}"].to_numpy(dtype=float)]
                                   + [runs[f][m].reindex(out["id"]).to_numpy(dtype=float) for f in (lo_f, hi_f)])
            out[f"predicted_{m}_low"] = np.min(vals, axis=1)
            out[f"predicted_{m}_high"] = np.max(vals, axis=1)
        info = {"quantiles": list(BAND), "window_steps": windows,
                "step_factors": {k: list(v) for k, v in factors.items()},
                "method": "calibration residuals over stretches of steps; the arrivals re-simulated with every step "
                          "that much slower / faster"}
    errors = {m: _pct(out[m].to_numpy(dtype=float), out[f"predicted_{m}"].to_numpy(dtype=float)) for m in METRICS}
    return Prediction(cost, sim, out, errors, info)


def step_predictions(trace: Trace, cost: CostModel) -> pd.DataFrame:
    """Per busy step of a recording: step, num_tokens, num_seqs, context_tokens, measured (its
    schedule() to the next one's, ms), predicted (the cost model's ms for that batch), in_fit."""
    steps = step_samples(busy_periods(trace))
    return steps.assign(predicted=predict_steps(cost, steps), in_fit=True)
