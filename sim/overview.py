"""The whole run at a glance: a long Trace aggregated per time bucket, for the overview a page
shows before the user picks a window (sim.window) to see in full detail.

    ov = overview(trace)                  # one row per bucket, on the trace's step clock
    ov = overview(trace, clock="time")    # on its time clock (ms for a server or a fleet)
    fo = fleet_overview(fleet)            # every replica on shared ms buckets, a "replica" column

A bucket's width is a round number (1, 2 or 5 x 10^k steps or ms) chosen so the run has at most
MAX_BUCKETS of them: enough to see an hour's shape on a chart a screen wide, few enough to
draw at once. Columns (NaN where a bucket holds no step, or the source does not say):
start / end (the bucket's edges on its clock), steps, first_step / last_step, running and waiting
(mean over its steps), peak_waiting, kv_use (mean fraction of the pool's blocks in use, the null
block left out), prefill / decode / recompute tokens (summed) and their rate per step or per
second (tokens_per), preemptions (summed), arrivals (requests arriving in the bucket) and
ttft_p50 / ttft_p90 of those arrivals. All numpy (bincount, a sort), no loop over steps.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .trace import Trace

MAX_BUCKETS = 1500
PHASES = ("prefill", "decode", "recompute")
_NICE = (1, 2, 5)


def bucket_width(span: float, max_buckets: int = MAX_BUCKETS, whole: bool = True) -> float:
    """The smallest round width (1, 2, 5 x 10^k; at least 1 when `whole`) that cuts `span` into
    at most max_buckets buckets."""
    need = span / max(max_buckets, 1)
    if need <= 0 or not math.isfinite(need):
        return 1.0
    if whole:
        need = max(need, 1.0)
    k = math.floor(math.log10(need))
    for e in (k, k + 1):
        for m in _NICE:
            w = m * 10.0 ** e
            if w >= need * (1 - 1e-12) and (not whole or w >= 1):
                return float(w)
    return float(10.0 ** (k + 1))


def _clock(trace: Trace, clock: str) -> tuple[np.ndarray, str]:
    """The steps' positions on the chosen clock, and that clock's unit."""
    s = trace.steps
    if clock == "time":
        t = s["start"].to_numpy(dtype=float, na_value=np.nan)
        if len(t) and not np.isnan(t).all():
            return t, trace.time_unit
    return s["step"].to_numpy().astype(float), "steps"


def _quantiles(bucket: np.ndarray, value: np.ndarray, n_buckets: int, qs: tuple[float, ...]) -> list[np.ndarray]:
    """Per bucket, each quantile of `value` (linear interpolation, as np.percentile); NaN for an
    empty bucket. One sort, no loop over buckets."""
    ok = ~np.isnan(value)
    b, v = bucket[ok], value[ok]
    order = np.lexsort((v, b))
    b, v = b[order], v[order]
    count = np.bincount(b, minlength=n_buckets)
    offset = np.concatenate([[0], np.cumsum(count)[:-1]])
    out = []
    for q in qs:
        res = np.full(n_buckets, np.nan)
        has = count > 0
        pos = offset[has] + q * (count[has] - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, offset[has] + count[has] - 1)
        res[has] = v[lo] + (v[hi] - v[lo]) * (pos - lo)
        out.append(res)
    return out


def _arrival_clock(trace: Trace, unit: str) -> np.ndarray:
    r = trace.requests
    if unit == "steps":
        return r["arrival_step"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    return r["arrival_time"].to_numpy(dtype=float, na_value=np.nan)


def _span(trace: Trace, x: np.ndarray, unit: str) -> tuple[float, float]:
    """(first, last) on the clock of the steps and the arrivals (a request may arrive before the
    first step is logged)."""
    v = np.concatenate([x, _arrival_clock(trace, unit)])
    v = v[~np.isnan(v)]
    return (float(v.min()), float(v.max())) if len(v) else (0.0, 0.0)


def _edges(lo: float, hi: float, max_buckets: int, whole: bool) -> tuple[float, float, int]:
    width = bucket_width(hi - lo + (1 if whole else 0), max_buckets, whole)
    start = math.floor(lo / width) * width
    n = max(1, int(math.floor((hi - start) / width)) + 1)
    return start, width, n


def overview(trace: Trace, clock: str = "steps", max_buckets: int = MAX_BUCKETS,
             edges: tuple[float, float, int] | None = None) -> pd.DataFrame:
    """The trace per bucket (see the module doc). `edges` = (start, width, count) puts several
    traces on the same buckets (a fleet's replicas); otherwise they come from the trace's span.
    The frame's attrs say the clock, its unit, the bucket width and the rate's unit."""
    s = trace.steps
    x, unit = _clock(trace, clock)
    known = ~np.isnan(x)
    if edges is None:
        lo, hi = _span(trace, x, unit)
        edges = _edges(lo, hi, max_buckets, whole=unit == "steps")
    start, width, n = edges
    b = np.full(len(x), -1, dtype=np.int64)
    b[known] = np.floor((x[known] - start) / width).astype(np.int64)
    inb = (b >= 0) & (b < n)
    bi = b[inb]

    def total(col: str) -> np.ndarray:
        return np.bincount(bi, weights=s[col].to_numpy(dtype=float, na_value=np.nan)[inb], minlength=n)

    def mean(values: np.ndarray) -> np.ndarray:
        ok = ~np.isnan(values[inb])
        c = np.bincount(bi[ok], minlength=n)
        sm = np.bincount(bi[ok], weights=values[inb][ok], minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(c > 0, sm / np.maximum(c, 1), np.nan)

    steps_in = np.bincount(bi, minlength=n)
    empty = steps_in == 0
    step_no = s["step"].to_numpy().astype(np.int64)[inb]
    first = np.full(n, -1, dtype=np.int64)
    last = np.full(n, -1, dtype=np.int64)
    if len(bi):
        big = np.iinfo(np.int64).max
        mn = np.full(n, big, dtype=np.int64)
        np.minimum.at(mn, bi, step_no)
        mx = np.full(n, -1, dtype=np.int64)
        np.maximum.at(mx, bi, step_no)
        first = np.where(mn == big, -1, mn)
        last = mx
    out = {"start": start + width * np.arange(n), "end": start + width * (np.arange(n) + 1),
           "steps": steps_in, "first_step": first, "last_step": last}
    running = s["running"].to_numpy(dtype=float, na_value=np.nan)
    waiting = s["waiting"].to_numpy(dtype=float, na_value=np.nan)
    out["running"] = mean(running)
    out["waiting"] = mean(waiting)
    peak = np.full(n, -np.inf)
    w_in = waiting[inb]
    okw = ~np.isnan(w_in)
    np.maximum.at(peak, bi[okw], w_in[okw])
    out["peak_waiting"] = np.where(np.isinf(peak), np.nan, peak)
    nb = trace.usable_blocks
    free = s["free_blocks"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) if "free_blocks" in s else \
        np.full(len(s), np.nan)
    out["kv_use"] = mean(1.0 - free / nb) if nb > 0 else np.full(n, np.nan)
    # a rate per step on the step clock; per second on a ms clock; per unit otherwise
    per = width / 1000.0 if unit == "ms" else width
    rate_unit = "s" if unit == "ms" else ("step" if unit == "steps" else unit.removesuffix("s"))
    for p in PHASES:
        tok = total(f"{p}_tokens")
        out[f"{p}_tokens"] = np.where(empty, np.nan, tok)
        out[f"{p}_per"] = np.where(empty, np.nan, tok / per)
    out["preemptions"] = np.where(empty, np.nan, total("preempted"))
    out.update(_arrivals(trace, clock, unit, start, width, n))
    for k in ("running", "waiting", "kv_use"):
        out[k] = np.where(empty, np.nan, out[k])
    df = pd.DataFrame(out)
    df.attrs.update({"clock": "steps" if unit == "steps" else "time", "unit": unit, "width": width,
                     "rate_unit": rate_unit, "num_steps": trace.num_steps})
    return df


def _arrivals(trace: Trace, clock: str, unit: str, start: float, width: float, n: int) -> dict:
    """Requests arriving per bucket and the median / p90 TTFT of those that got a first token."""
    r = trace.requests
    at = _arrival_clock(trace, unit)
    if unit == "steps":
        ttft = r["first_token_step"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) - at
    else:
        ttft = r["first_token_time"].to_numpy(dtype=float, na_value=np.nan) - at
    ok = ~np.isnan(at)
    b = np.floor((at[ok] - start) / width).astype(np.int64)
    inb = (b >= 0) & (b < n)
    b, tt = b[inb], ttft[ok][inb]
    p50, p90 = _quantiles(b, tt, n, (0.5, 0.9))
    return {"arrivals": np.bincount(b, minlength=n), "ttft_p50": p50, "ttft_p90": p90}


def fleet_overview(fleet, max_buckets: int = MAX_BUCKETS) -> pd.DataFrame:
    """Every replica of a FleetTrace (sim.fleet.trace) on the same buckets of the fleet's clock,
    stacked with a "replica" column (its index in worker order)."""
    reps = [t for t in fleet.replicas if isinstance(t, Trace)]
    unit = _clock(reps[0], "time")[1] if reps else "ms"
    spans = [_span(t, _clock(t, "time")[0], unit) for t in reps if t.num_steps or len(t.requests)]
    lo = min((a for a, _ in spans), default=0.0)
    hi = max((b for _, b in spans), default=0.0)
    edges = _edges(lo, hi, max_buckets, whole=unit == "steps")
    parts = []
    for i, t in enumerate(fleet.replicas):
        if not isinstance(t, Trace):
            continue
        ov = overview(t, "time", edges=edges)
        attrs = dict(ov.attrs)
        parts.append(ov.assign(replica=i))
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if parts:
        df.attrs.update(attrs)
        df.attrs["replicas"] = len(fleet.replicas)
        df.attrs["num_steps"] = sum(t.num_steps for t in reps)
    return df


def step_span(ov: pd.DataFrame, x0: float, x1: float) -> tuple[int, int] | None:
    """The steps of the buckets that overlap [x0, x1] on the overview's clock (a selection
    dragged on its chart); None when no step lies there."""
    lo, hi = sorted((x0, x1))
    hit = (ov["end"].to_numpy() > lo) & (ov["start"].to_numpy() <= hi) & (ov["steps"].to_numpy() > 0)
    if not hit.any():
        return None
    if ov.attrs.get("clock") == "steps":   # on the step clock the selection itself is in steps
        return int(math.ceil(lo)), int(math.floor(hi))
    return int(ov["first_step"].to_numpy()[hit].min()), int(ov["last_step"].to_numpy()[hit].max())
