"""Derived views of a Trace that pages draw: per-step matrices and comparisons.

Everything here is computed from the Trace's tables alone (no re-run of the source), so it
works the same for simulator, engine and log traces.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .metrics import per_request, summary
from .trace import Trace

FREE, CACHED_FREE, NULL = -1, -2, -3  # block-map codes besides request indices


def request_index(trace: Trace) -> dict[str, int]:
    """A stable small integer per request (its row in the requests table)."""
    return {r: i for i, r in enumerate(trace.requests["request"].tolist())}


def block_owner_frames(trace: Trace, steps) -> np.ndarray:
    """Block map codes at the end of each of `steps` (ascending): shape (len(steps), blocks).

    Code >= 0: index of a request holding the block (the first holder if shared);
    FREE / CACHED_FREE: unheld, without / with a reusable prefix; NULL: vLLM's block 0.
    One pass over the kv log, snapshotting as it goes.
    """
    steps = np.asarray(sorted(steps), dtype=np.int64)
    n = trace.num_blocks
    out = np.empty((len(steps), n), dtype=np.int32)
    if n == 0:
        return out
    idx = request_index(trace)
    holders: list[list[int]] = [[] for _ in range(n)]
    cached = np.zeros(n, dtype=bool)
    kv = trace.kv
    ks = kv["step"].to_numpy()
    kb = kv["block"].to_numpy()
    kr = kv["request"].to_numpy()
    ko = kv["op"].to_numpy()
    j = 0
    for f, step in enumerate(steps):
        while j < len(ks) and ks[j] <= step:
            b, op = int(kb[j]), ko[j]
            if op == "acquire":
                holders[b].append(idx.get(kr[j], -1))
            elif op == "release":
                code = idx.get(kr[j], -1)
                if code in holders[b]:
                    holders[b].remove(code)
            elif op == "cached":
                cached[b] = True
            elif op == "evicted":
                cached[b] = False
            j += 1
        row = out[f]
        for b in range(n):
            row[b] = holders[b][0] if holders[b] else (CACHED_FREE if cached[b] else FREE)
        row[0] = NULL if trace.meta.get("null_block", True) else row[0]
    return out


def waiting_ages(trace: Trace, max_steps: int | None = None) -> pd.DataFrame:
    """Requests x steps: steps a request has gone unserved, counted from its arrival or the
    last step it was in a batch; NaN while it is served, before it arrives and after it ends.
    The starvation heatmap: a row that keeps growing is a request the policy never picks."""
    steps = trace.steps["step"].to_numpy()
    if max_steps is not None:
        steps = steps[:max_steps]
    reqs = trace.requests["request"].tolist()
    ages = np.full((len(reqs), len(steps)), np.nan)
    if not len(steps):
        return pd.DataFrame(ages, index=pd.Index(reqs, name="request"))
    first, last = int(steps[0]), int(steps[-1])
    served = trace.batch.groupby("request")["step"].apply(lambda x: np.unique(x.to_numpy())).to_dict()
    for i, row in enumerate(trace.requests.itertuples(index=False)):
        if row.rejected or pd.isna(row.arrival_step):
            continue
        lo = int(row.arrival_step) + 1  # present from the step after its arrival step
        hi = last if pd.isna(row.finish_step) else min(int(row.finish_step), last)
        if hi < lo:
            continue
        span = np.arange(max(lo, first), hi + 1)
        got = served.get(row.request, np.array([], dtype=np.int64))
        # last step served before each step of the span (or the step before arrival)
        k = np.searchsorted(got, span, side="left") - 1
        prev = np.where(k >= 0, got[np.maximum(k, 0)], lo - 1)
        prev = np.maximum(prev, lo - 1)
        age = (span - prev - 1).astype(float)
        age[np.isin(span, got)] = np.nan
        ages[i, span - first] = age
    return pd.DataFrame(ages, index=pd.Index(reqs, name="request"), columns=pd.Index(steps, name="step"))


def littles_law_over_time(trace: Trace, clock: str = "time") -> pd.DataFrame:
    """Per step: requests in the system (arrived, not finished or rejected), and the running
    estimates L (time-average in system so far), λ (completions per time unit so far),
    W (mean time in system of those completed so far) and λW.

    clock="time" measures on the trace's clock from the first arrival. clock="step" counts
    steps as time from 0 (step s spans (s-1, s]; a request arriving before step a+1 enters at
    a, one finishing in step f leaves at f): the ticks of a slotted queueing model, as the
    lesson's Example 7 counts them, whatever a step costs and even where a step costs nothing.
    """
    if clock not in ("time", "step"):
        raise ValueError(f"clock must be 'time' or 'step', not {clock!r}")
    s = trace.steps
    r = trace.requests[~trace.requests["rejected"].to_numpy(dtype=bool)]
    if clock == "step":
        return littles_law_on_steps(s["step"].to_numpy(), r["arrival_step"].to_numpy(dtype=float, na_value=np.nan),
                                    r["finish_step"].to_numpy(dtype=float, na_value=np.nan))
    arr = r["arrival_time"].to_numpy(dtype=float)
    t0 = float(np.nanmin(arr)) if np.isfinite(arr).any() else 0.0
    return _littles_law(s["step"].to_numpy(), s["start"].to_numpy(dtype=float), s["end"].to_numpy(dtype=float),
                        arr, r["finish_time"].to_numpy(dtype=float), t0)


def littles_law_on_steps(steps: np.ndarray, arrival_step: np.ndarray, finish_step: np.ndarray) -> pd.DataFrame:
    """littles_law_over_time(clock="step") from the arrays it reads: the steps, and each admitted
    request's arrival_step and finish_step (NaN: unknown, or not finished)."""
    end = np.asarray(steps, dtype=float)
    return _littles_law(steps, end - 1, end, np.asarray(arrival_step, dtype=float),
                        np.asarray(finish_step, dtype=float), 0.0)


def _littles_law(steps, start, end, arr, fin, t0: float) -> pd.DataFrame:
    # in the system at a step's start: arrived by then, not yet finished (sorted counts)
    known = ~np.isnan(arr)
    arr_sorted = np.sort(arr[known])
    left_sorted = np.sort(fin[known & ~np.isnan(fin)])
    in_sys = (np.searchsorted(arr_sorted, start, side="right")
              - np.searchsorted(left_sorted, start, side="right")).astype(np.int64)
    done_by = np.sort(fin[~np.isnan(fin)])
    dur = end - start
    area = np.cumsum(in_sys * dur)
    span = np.maximum(end - t0, 1e-12)
    L = area / span
    n_done = np.searchsorted(done_by, end, side="right")
    lam = n_done / span
    fin_order = np.argsort(np.where(np.isnan(fin), np.inf, fin), kind="stable")
    sojourn = (fin - arr)[fin_order]
    cum = np.cumsum(np.where(np.isnan(sojourn), 0.0, sojourn))
    W = np.where(n_done > 0, cum[np.maximum(n_done - 1, 0)] / np.maximum(n_done, 1), np.nan) if len(cum) \
        else np.full(len(end), np.nan)
    return pd.DataFrame({"step": steps, "time": end, "in_system": in_sys, "L": L,
                         "lambda": lam, "W": W, "lambda_W": lam * W})


def compare(a: Trace, b: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two runs of the same requests: (metrics side by side with the difference,
    per-request latency changes b - a, sorted by the change in end-to-end latency)."""
    sa, sb = summary(a), summary(b)
    keys = [k for k, v in sa.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    m = pd.DataFrame({"metric": keys, "A": [sa[k] for k in keys], "B": [sb[k] for k in keys]})
    m["B - A"] = m["B"] - m["A"]
    pa = per_request(a).set_index("request")
    pb = per_request(b).set_index("request")
    common = pa.index.intersection(pb.index)
    d = pd.DataFrame({"tenant": pa.loc[common, "tenant"],
                      "ttft_A": pa.loc[common, "ttft"], "ttft_B": pb.loc[common, "ttft"],
                      "e2e_A": pa.loc[common, "e2e"], "e2e_B": pb.loc[common, "e2e"]})
    d["ttft_change"] = d["ttft_B"] - d["ttft_A"]
    d["e2e_change"] = d["e2e_B"] - d["e2e_A"]
    return m, d.sort_values("e2e_change", kind="stable")
