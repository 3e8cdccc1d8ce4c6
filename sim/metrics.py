"""Metrics from any Trace, whatever produced it (simulator, engine, llama-server log).

Times are in the trace's time unit (meta["time_unit"]). A token is "delivered" at the end of
the step that sampled it. Values a trace cannot support (no timestamps, no tenants) come out
as NaN rather than guesses.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .digest import Digest
from .trace import Trace, codes_of


def token_gaps(trace: Trace | Digest) -> pd.DataFrame:
    """Per request with two or more delivered tokens (index: request): the mean and the worst
    time between consecutive tokens, a token being delivered at the end of the step that sampled
    it (a Digest carries them ready).

    In numpy on the sampled rows' columns, the requests as integer codes: a copy of the batch
    table and a sort on its text ids took gigabytes at a million requests. The gaps are summed per
    request in step order, as a groupby over the sorted rows sums them."""
    if isinstance(trace, Digest):
        return trace.gaps
    b, s = trace.batch, trace.steps
    mask = b["sampled"].to_numpy(dtype=bool)
    codes, names = codes_of(b["request"])   # a compact column's own codes (names sorted), no text copy
    if not mask.any():
        return pd.DataFrame({"mean": pd.Series(dtype=float), "max": pd.Series(dtype=float)},
                            index=pd.Index([], dtype=object, name="request"))
    step = b["step"].to_numpy()
    ordered = _ordered(step)
    # requests a block of codes at a time, each block's sampled rows about GAP_CHUNK_ROWS: the
    # sort's and the groupby's temporaries are a block's (a million-request run samples 52M
    # rows). A request's gaps all fall in its block, in step order: the sums of one pass over all rows.
    parts = []
    for c0, c1 in _code_blocks(codes, mask, GAP_CHUNK_ROWS):
        sel = mask.copy()
        if c0 is not None:
            sel &= codes >= c0
            sel &= codes < c1
        parts.append(_gaps_of(s, codes[sel], step[sel], ordered))
        del sel
    agg = pd.concat(parts) if len(parts) > 1 else parts[0]
    agg.index = pd.Index(np.asarray(names, dtype=object)[agg.index.to_numpy()], name="request")
    return agg


GAP_CHUNK_ROWS = 1 << 22


def _code_blocks(codes: np.ndarray, mask: np.ndarray, rows: int) -> list[tuple]:
    """[c0, c1) ranges of codes, each holding about `rows` of the rows `mask` picks (one range,
    (None, None), when they are few)."""
    if int(mask.sum()) <= rows:
        return [(None, None)]
    lo = min(int(codes.min()), 0)
    counts = np.bincount(codes - lo if lo < 0 else codes, weights=mask)
    cum = np.cumsum(counts)
    cuts = np.searchsorted(cum, np.arange(rows, cum[-1], rows), side="left") + 1 + lo
    edges = np.unique(np.concatenate([[lo], cuts, [lo + len(counts)]]))
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def _gaps_of(s: pd.DataFrame, codes: np.ndarray, step: np.ndarray, ordered: bool) -> pd.DataFrame:
    time = _time_of_steps(s, step)
    # by request, then step (stable); rows already in step order need only the stable sort by request
    order = np.argsort(codes, kind="stable") if ordered else np.lexsort((step, codes))
    codes, time = codes[order], time[order]
    del order
    same = codes[1:] == codes[:-1]
    gap = np.diff(time)[same]
    del time
    who = codes[1:][same]
    known = ~np.isnan(gap)   # a step the steps table lacks has no time
    return pd.DataFrame({"who": who[known], "gap": gap[known]}).groupby("who")["gap"].agg(["mean", "max"])


def _ordered(a: np.ndarray) -> bool:
    return bool(len(a) < 2 or np.all(a[1:] >= a[:-1]))


def _time_of_steps(s: pd.DataFrame, step: np.ndarray) -> np.ndarray:
    """The end time of each of `step` (NaN for a step the steps table lacks): a search when the
    steps table is in order with no step twice (every source's), else a reindex."""
    st, end = s["step"].to_numpy(), s["end"].to_numpy(dtype=float)
    if not len(st) or not (len(st) < 2 or np.all(st[1:] > st[:-1])):
        return pd.Series(end, index=st).reindex(step).to_numpy()
    i = np.minimum(np.searchsorted(st, step), len(st) - 1)
    out = end[i]
    out[st[i] != step] = np.nan
    return out


def per_request(trace: Trace | Digest) -> pd.DataFrame:
    """Per request: wait (arrival -> first scheduled), TTFT, end-to-end latency, inter-token
    gaps (mean and worst), tokens, preemptions."""
    r = trace.requests
    # ids and tenants as text (object), whatever the trace holds them as
    out = pd.DataFrame({"request": pd.Series(r["request"].to_numpy(dtype=object), index=r.index, dtype=object),
                        "tenant": pd.Series(r["tenant"].to_numpy(dtype=object), index=r.index, dtype=object)})
    arr = r["arrival_time"].to_numpy(dtype=float)
    out["wait"] = r["first_scheduled_time"].to_numpy(dtype=float) - arr
    out["ttft"] = r["first_token_time"].to_numpy(dtype=float) - arr
    out["e2e"] = r["finish_time"].to_numpy(dtype=float) - arr
    out["wait_steps"] = (r["first_scheduled_step"].astype("Float64") - r["arrival_step"].astype("Float64") - 1
                         ).to_numpy(dtype=float, na_value=np.nan)
    agg = token_gaps(trace)
    out["itl_mean"] = out["request"].map(agg["mean"]).astype(float)
    out["itl_worst"] = out["request"].map(agg["max"]).astype(float)
    out["output_tokens"] = r["output_tokens"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    out["preemptions"] = r["preemptions"].to_numpy(dtype=np.int64)   # as wide as before the compact columns
    out["recomputed_tokens"] = r["recomputed_tokens"].to_numpy(dtype=np.int64)
    out["rejected"] = r["rejected"].to_numpy(dtype=bool)
    return out


def littles_law(trace: Trace) -> dict:
    """L (time-average requests in the system), λ (completions per time unit), W (mean time in
    system of completed requests) and λW. They agree when the run is long and stable."""
    r = trace.requests
    ok = ~r["rejected"].to_numpy(dtype=bool)
    a = r["arrival_time"].to_numpy(dtype=float)[ok]
    f = r["finish_time"].to_numpy(dtype=float)[ok]
    done = ~np.isnan(f)
    if trace.steps.empty or not done.any():
        return {"L": math.nan, "lambda": math.nan, "W": math.nan, "lambda_W": math.nan}
    t0 = float(np.nanmin(a)) if np.isfinite(a).any() else 0.0
    t1 = float(trace.steps["end"].max())
    span = max(t1 - t0, 1e-12)
    f_eff = np.where(done, f, t1)  # unfinished requests are in the system until the end
    L = float(np.sum(np.clip(f_eff, t0, t1) - np.clip(a, t0, t1)) / span)
    lam = float(done.sum() / span)
    W = float(np.mean(f[done] - a[done]))
    return {"L": L, "lambda": lam, "W": W, "lambda_W": lam * W}


def jain_index(values) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one gets everything."""
    x = np.asarray(list(values), dtype=float)
    if len(x) == 0 or not np.any(x):
        return math.nan
    return float(x.sum() ** 2 / (len(x) * np.sum(x ** 2)))


def tenant_service(trace: Trace, w_in: float = 1.0, w_out: float = 2.0) -> pd.DataFrame:
    """Cumulative weighted service per tenant after each step (steps x tenants): prompt tokens
    count w_in each, generated tokens w_out each (VTC's cost function); recompute is free
    (the server's loss, not the tenant's gain)."""
    steps = trace.steps["step"].to_numpy().astype(np.int64, copy=False)   # an index as wide as before
    if isinstance(trace, Digest):  # already summed per (step, tenant)
        sv = trace.service
        if sv.empty:
            return pd.DataFrame(index=pd.Index(steps, name="step"))
        at = sv["step"].to_numpy()
        who = sv["tenant"].to_numpy()
        w = w_in * sv["prompt_tokens"].to_numpy(dtype=float) + w_out * sv["sampled"].to_numpy(dtype=float)
    else:
        b = trace.batch
        if b.empty:
            return pd.DataFrame(index=pd.Index(steps, name="step"))
        return _batch_service(trace, steps, w_in, w_out)
    # a steps x tenants grid summed with bincount (a pivot table costs ~15 ms a call; pages call
    # this a dozen times); entries of steps or requests the other tables lack are left out
    row = np.searchsorted(steps, at)
    known = (row < len(steps)) & pd.notna(who)
    known[known] &= steps[row[known]] == at[known]
    # hashed, not a sort of a text copy of every row (52M rows at a million requests: 1.4 GB of <U7)
    col, uniq = pd.factorize(who[known], sort=True)
    names = np.asarray(uniq, dtype=str)
    grid = np.bincount(row[known] * len(names) + col, weights=w[known], minlength=len(steps) * len(names))
    return pd.DataFrame(grid.reshape(len(steps), len(names)).cumsum(axis=0), index=pd.Index(steps, name="step"),
                        columns=pd.Index(names, name="tenant"))


SERVICE_CHUNK_ROWS = 1 << 22


def _batch_service(trace: Trace, steps: np.ndarray, w_in: float, w_out: float) -> pd.DataFrame:
    """tenant_service from the batch table, in chunks of whole steps (a chunk's temporaries, not
    the batch's: a million-request run has 52M rows), the tenants as codes. A (step, tenant) sum
    gets all its rows from one chunk, in row order: the sums of one pass over all rows."""
    b = trace.batch
    who_all, tenant_names = _tenant_codes(trace.requests, b["request"])
    at_all = b["step"].to_numpy()
    bounds = _step_chunks(at_all, SERVICE_CHUNK_ROWS)
    kind, tokens, sampled = b["kind"], b["tokens"], b["sampled"]

    def part(lo, hi):
        at, who = at_all[lo:hi], who_all[lo:hi]
        row = np.searchsorted(steps, at)
        known = (row < len(steps)) & (who >= 0)
        known[known] &= steps[row[known]] == at[known]
        return row, who, known

    present = np.zeros(len(tenant_names) + 1, dtype=bool)
    for lo, hi in bounds:
        _, who, known = part(lo, hi)
        present[np.unique(who[known])] = True
    used = np.flatnonzero(present[:len(tenant_names)])   # codes in sorted-name order: the names sorted
    names = np.asarray(tenant_names[used], dtype=str)
    col_of = np.full(len(tenant_names) + 1, -1, dtype=np.int64)
    col_of[used] = np.arange(len(used))
    grid = np.zeros(len(steps) * len(names))
    for lo, hi in bounds:
        row, who, known = part(lo, hi)
        prefill = (kind.iloc[lo:hi] == "prefill").to_numpy(dtype=bool)
        w = np.where(prefill, w_in * tokens.iloc[lo:hi].to_numpy(dtype=float), 0.0)
        w = w + np.where(sampled.iloc[lo:hi].to_numpy(dtype=bool), w_out, 0.0)
        grid += np.bincount(row[known] * len(names) + col_of[who[known]], weights=w[known],
                            minlength=len(steps) * len(names))
    return pd.DataFrame(grid.reshape(len(steps), len(names)).cumsum(axis=0), index=pd.Index(steps, name="step"),
                        columns=pd.Index(names, name="tenant"))


def _step_chunks(at: np.ndarray, rows: int) -> list[tuple[int, int]]:
    """[lo, hi) row ranges of about `rows` rows that cut only between steps; one range when the
    rows are not in step order."""
    n = len(at)
    if n <= rows or not _ordered(at):
        return [(0, n)]
    out, lo = [], 0
    while lo < n:
        hi = min(lo + rows, n)
        if hi < n:
            hi = int(np.searchsorted(at, at[hi], side="left"))   # back to the start of that step
            if hi <= lo:
                hi = int(np.searchsorted(at, at[lo], side="right"))
        out.append((lo, hi))
        lo = hi
    return out


def _tenant_codes(requests: pd.DataFrame, batch_request: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each batch row's tenant as a code into the sorted tenant names (-1: its request is not in
    the requests table, or its tenant unknown), from the columns' codes: no per-row text."""
    rc, rnames = codes_of(batch_request)
    tc, tnames = codes_of(requests["tenant"])
    ids = pd.Index(requests["request"].to_numpy(dtype=object))
    if not ids.is_unique:
        raise ValueError("cannot reindex on an axis with duplicate labels")   # as a reindex by request says
    pos = ids.get_indexer(rnames)
    lut = np.where(pos >= 0, tc[np.maximum(pos, 0)] if len(tc) else -1, -1)
    return np.where(rc >= 0, lut[rc] if len(lut) else -1, -1), tnames


def backlogged(trace: Trace) -> pd.DataFrame:
    """Steps x tenants: True where the tenant has a request arrived and not yet finished."""
    r = trace.requests
    steps = trace.steps["step"].to_numpy().astype(np.int64, copy=False)   # an index as wide as before
    out = {}
    for t, g in r.groupby("tenant", sort=True):
        arr = g["arrival_step"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) + 1
        fin = g["finish_step"].astype("Float64").to_numpy(dtype=float, na_value=np.inf)
        fin = np.where(g["rejected"].to_numpy(dtype=bool), arr - 1, fin)
        delta = np.zeros(len(steps) + 2)
        idx_a = np.searchsorted(steps, arr[~np.isnan(arr)])
        idx_f = np.searchsorted(steps, fin[~np.isnan(arr)], side="right")
        np.add.at(delta, idx_a, 1)
        np.add.at(delta, idx_f, -1)
        out[t] = np.cumsum(delta)[: len(steps)] > 0
    return pd.DataFrame(out, index=pd.Index(steps, name="step"))


def max_service_gap(trace: Trace, w_in: float = 1.0, w_out: float = 2.0) -> float:
    """Largest difference in service two tenants received over an interval in which both
    were backlogged (the quantity VTC bounds)."""
    svc = tenant_service(trace, w_in, w_out)
    bl = backlogged(trace)
    names = [t for t in svc.columns if t in bl.columns]
    S = svc[names].to_numpy(dtype=float)
    B = bl[names].to_numpy(dtype=bool)
    k = np.arange(len(S))[:, None]
    worst = 0.0
    for i in range(len(names) - 1):  # tenant i against every later one at once (steps x others)
        both = B[:, i:i + 1] & B[:, i + 1:]
        if not both.any():
            continue
        diff = S[:, i:i + 1] - S[:, i + 1:]
        prev = np.vstack([np.zeros((1, diff.shape[1])), diff[:-1]])  # service difference before each step
        # per backlogged interval: the running difference's farthest move from its value at the
        # interval's start (numpy, not a Python loop per step: that took 34 s for 300 tenants)
        opens = both & ~np.vstack([np.zeros((1, both.shape[1]), dtype=bool), both[:-1]])
        first = np.maximum.accumulate(np.where(opens, k, 0), axis=0)
        start = np.take_along_axis(prev, first, axis=0)
        worst = max(worst, float(np.abs(diff - start)[both].max()))
    return float(worst)


def useful_slot_steps(trace: Trace | Digest) -> int:
    """Slot-steps that did work (padding rows of static batching hold a slot and do none)."""
    if isinstance(trace, Digest):
        return int(trace.useful_slot_steps)
    return int((trace.batch["kind"] != "padding").to_numpy(dtype=bool).sum())


def cached_prompt_tokens(trace: Trace) -> float:
    """Prompt tokens served from the prefix cache: the KV each request found already computed
    when it was first scheduled (the requests' cached_tokens; a resume after preemption is
    recompute, not counted), summed: 0 with no request (an idle replica of a fleet). NaN when the
    trace knows it for none of its requests."""
    c = trace.requests["cached_tokens"] if "cached_tokens" in trace.requests else None
    if c is not None and not len(c):
        return 0
    if c is None or not c.notna().any():
        return math.nan
    return int(c.astype("Float64").sum())


def summary(trace: Trace, slo=None) -> dict:
    """The headline numbers of a run, as a flat dict (NaN where the trace cannot say). With
    `slo` (a sim.slo.SLO), its attainment and goodput too (sim.slo.slo_summary; duck-typed,
    since sim.slo builds on this module)."""
    pr = per_request(trace)
    s = trace.steps
    done = pr[~pr["rejected"] & pr["e2e"].notna()]
    busy = s[~s["idle"].to_numpy(dtype=bool)] if len(s) else s
    span = float(s["end"].max() - s["start"].min()) if len(s) else math.nan
    out_tokens = float(np.nansum(pr["output_tokens"].to_numpy()))
    max_seqs = (trace.meta.get("config") or {}).get("max_num_seqs") or trace.meta.get("slots")
    ll = littles_law(trace)
    svc = tenant_service(trace)
    per_tenant = svc.iloc[-1] if len(svc) and len(svc.columns) else pd.Series(dtype=float)

    def q(col, p):
        v = done[col].dropna().to_numpy()
        return float(np.percentile(v, p)) if len(v) else math.nan

    def m(col, frame=done):
        v = frame[col].dropna().to_numpy()
        return float(v.mean()) if len(v) else math.nan

    return {
        "requests": int(len(pr)),
        "finished": int(len(done)),
        "rejected": int(pr["rejected"].sum()),
        "steps": int(len(s)),
        "busy_steps": int(len(busy)),
        "duration": span,
        "time_unit": trace.time_unit,
        "ttft_mean": m("ttft"), "ttft_p50": q("ttft", 50), "ttft_p99": q("ttft", 99),
        "itl_mean": m("itl_mean"),
        "itl_worst": float(done["itl_worst"].max()) if done["itl_worst"].notna().any() else math.nan,
        "e2e_mean": m("e2e"), "wait_mean": m("wait"),
        "output_tokens": out_tokens,
        "throughput": out_tokens / span if span and span > 0 else math.nan,
        "tokens_per_step": float(busy["num_tokens"].mean()) if len(busy) else math.nan,
        "slot_utilization": (useful_slot_steps(trace) / (len(busy) * max_seqs)
                             if max_seqs and len(busy) else math.nan),
        "preemptions": int(pr["preemptions"].sum()),
        "recomputed_tokens": int(pr["recomputed_tokens"].sum()),
        "cached_prompt_tokens": cached_prompt_tokens(trace),
        "L": ll["L"], "lambda": ll["lambda"], "W": ll["W"], "lambda_W": ll["lambda_W"],
        "tenants": int(trace.requests["tenant"].nunique()),
        "jain_index": jain_index(per_tenant.to_numpy()) if len(per_tenant) > 1 else math.nan,
        "max_service_gap": max_service_gap(trace) if len(per_tenant) > 1 else math.nan,
        **(_slo_part(trace, slo) if slo is not None else {}),
    }


def _slo_part(trace: Trace, slo) -> dict:
    if not hasattr(slo, "summarize"):
        raise TypeError("summary(slo=...) takes a sim.slo.SLO; build one with SLO.parse(dict or JSON)")
    return slo.summarize(trace)


def digest_of(trace) -> Digest:
    """A Trace's digest (what the metrics would read from it)."""
    b = trace.batch
    tenants = trace.requests.set_index("request")["tenant"]
    kind = b["kind"].to_numpy()
    parts = pd.DataFrame({"step": b["step"].to_numpy(), "tenant": tenants.reindex(b["request"]).to_numpy(),
                          "prompt_tokens": np.where(kind == "prefill", b["tokens"].to_numpy(dtype=np.int64), 0),
                          "sampled": b["sampled"].to_numpy(dtype=np.int64)})
    parts = parts[parts["tenant"].notna()]
    service = parts.groupby(["step", "tenant"], sort=True, as_index=False)[["prompt_tokens", "sampled"]].sum()
    return Digest(requests=trace.requests, steps=trace.steps, gaps=token_gaps(trace), service=service,
                  useful_slot_steps=useful_slot_steps(trace), meta=dict(trace.meta))
