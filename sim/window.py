"""A window of a Trace: its tables cut to the steps first..last, so a long run's slot lanes, KV
block map, step inspector and Chrome export can show a few thousand steps in full detail.

    w = window(trace, 12_000, 17_000)      # a Trace: the same type, every page draws it
    w.block_map(13_000) == trace.block_map(13_000)    # the KV state carries over

What is kept: the steps, batch entries, events and counters of the window; the requests whose
life overlaps it (arrived by its last step and not finished before its first, or seen in it);
the KV log of the window, after a few synthetic rows at step first - 1 that hold the pool's state
at the window's start (one acquire per block a request holds, one "cached" per block that holds
a cached prefix), so Trace.block_map needs no new rule. meta["window"] says which steps these are
out of how many (metrics over a windowed trace are over the window, and a page says so).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .trace import Trace, table_from_columns


def step_range(trace: Trace) -> tuple[int, int]:
    """(first step, last step) of the trace; (0, 0) when it has none."""
    s = trace.steps["step"].to_numpy()
    return (int(s.min()), int(s.max())) if len(s) else (0, 0)


def clamp(trace: Trace, first: int, last: int) -> tuple[int, int]:
    """(first, last) inside the trace's steps, first <= last."""
    lo, hi = step_range(trace)
    first, last = sorted((int(first), int(last)))
    return max(lo, min(first, hi)), max(lo, min(last, hi))


def _in(col: pd.Series, first: int, last: int) -> np.ndarray:
    v = col.to_numpy()
    return (v >= first) & (v <= last)


def kv_base(kv: pd.DataFrame, before: int) -> pd.DataFrame:
    """The KV pool's state at the end of step `before` as kv rows at that step: an acquire for
    every unit a (block, request) holds, a "cached" for every block whose last flag was cached.
    Replaying them gives the same block_map as replaying the whole log up to `before`.
    Compares and factorizes the columns as Series (a compact Trace's categoricals stay codes)."""
    early = kv[(kv["step"].to_numpy() <= before)]
    op = early["op"]
    acq, rel = (op == "acquire").to_numpy(dtype=bool), (op == "release").to_numpy(dtype=bool)
    cached, evicted = (op == "cached").to_numpy(dtype=bool), (op == "evicted").to_numpy(dtype=bool)
    block = early["block"].to_numpy().astype(np.int64)
    blocks, reqs, ops = [], [], []
    own = acq | rel
    if own.any():
        codes, names = pd.factorize(early["request"][own])
        names = np.asarray(names, dtype=object)
        width = max(len(names), 1)
        key = block[own] * width + codes   # one number per (block, request): fits int64 for any real pool
        uniq, inv = np.unique(key, return_inverse=True)
        net = np.bincount(inv.ravel(), weights=np.where(acq[own], 1, -1), minlength=len(uniq)).astype(np.int64)
        held = net > 0
        reps = net[held]
        blocks.append(np.repeat(uniq[held] // width, reps))
        reqs.append(np.repeat(names[uniq[held] % width], reps))
        ops.append(np.full(int(reps.sum()), "acquire", dtype=object))
    flag = cached | evicted
    if flag.any():
        fb, fc = block[flag], cached[flag]
        # each block's last flag: reversed, np.unique's first index is the last occurrence
        ub, first_rev = np.unique(fb[::-1], return_index=True)
        on = fc[::-1][first_rev]
        blocks.append(ub[on])
        reqs.append(np.full(int(on.sum()), "", dtype=object))
        ops.append(np.full(int(on.sum()), "cached", dtype=object))
    n = sum(len(b) for b in blocks)
    return pd.DataFrame({"step": np.full(n, before, dtype=np.int64),
                         "block": np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64),
                         "request": pd.Series(np.concatenate(reqs) if reqs else [], dtype=object),
                         "op": pd.Series(np.concatenate(ops) if ops else [], dtype=object)})


def _kv_base_indexed(trace: Trace, before: int) -> pd.DataFrame | None:
    """kv_base from the kv log's checkpoints (sim.kvindex): reads at most a checkpoint's rows,
    not the whole log before the window; None when the log has no index."""
    index = trace.kv_index()
    if index is None:
        return None
    blocks, reqs, cached = index.held_and_cached(before)
    n = len(blocks) + len(cached)
    return pd.DataFrame({"step": np.full(n, before, dtype=np.int64),
                         "block": np.concatenate([blocks, cached]).astype(np.int64),
                         "request": pd.Series(np.concatenate([reqs, np.full(len(cached), "", dtype=object)]),
                                              dtype=object),
                         "op": pd.Series(np.array(["acquire"] * len(blocks) + ["cached"] * len(cached), dtype=object),
                                         dtype=object)})


def _kv_window(kv: pd.DataFrame, first: int, last: int, base: pd.DataFrame | None = None) -> pd.DataFrame:
    """The kv rows of the window after the state at its start (kv_base), as a kv table the
    trace's own builder makes (its dtypes, whatever they are)."""
    if base is None:
        base = kv_base(kv, first - 1)
    inside = kv[_in(kv["step"], first, last)]
    if not len(base):
        return inside.reset_index(drop=True)
    cols = {c: np.concatenate([np.asarray(base[c].to_numpy(), dtype=t), np.asarray(inside[c].to_numpy(), dtype=t)])
            for c, t in (("step", np.int64), ("block", np.int64), ("request", object), ("op", object))}
    return table_from_columns("kv", cols)


def _requests_in(trace: Trace, first: int, last: int, seen: set) -> pd.DataFrame:
    r = trace.requests
    if r.empty:
        return r
    arr = r["arrival_step"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    fin = r["finish_step"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    overlaps = ~(arr > last) & ~(fin < first)   # unknown arrival or finish: open-ended
    ids = r["request"].to_numpy()
    keep = overlaps | np.fromiter((x in seen for x in ids), dtype=bool, count=len(ids))
    return r[keep].reset_index(drop=True)


def window(trace: Trace, first_step: int, last_step: int) -> Trace:
    """The trace cut to steps first_step..last_step (clamped to its steps; a Trace of the same
    type; the full trace when the window covers it)."""
    first, last = clamp(trace, first_step, last_step)
    lo, hi = step_range(trace)
    if first <= lo and last >= hi:
        return trace
    steps = trace.steps[_in(trace.steps["step"], first, last)].reset_index(drop=True)
    batch = trace.batch[_in(trace.batch["step"], first, last)].reset_index(drop=True)
    events = trace.events[_in(trace.events["step"], first, last)].reset_index(drop=True)
    counters = trace.counters[_in(trace.counters["step"], first, last)].reset_index(drop=True)
    kv = _kv_window(trace.kv, first, last, _kv_base_indexed(trace, first - 1)) if len(trace.kv) else trace.kv
    seen = set(batch["request"].to_numpy().tolist()) | set(events["request"].to_numpy().tolist())
    if len(kv):
        seen |= set(kv["request"].to_numpy().tolist())
    requests = _requests_in(trace, first, last, seen)
    meta = dict(trace.meta)
    meta["window"] = {"first": first, "last": last, "of_first": lo, "of_last": hi, "of_steps": trace.num_steps}
    spans = trace.unknown_spans
    if spans and len(steps):
        t0 = np.nanmin(steps["start"].to_numpy(dtype=float, na_value=np.nan), initial=np.inf)
        t1 = np.nanmax(steps["end"].to_numpy(dtype=float, na_value=np.nan), initial=-np.inf)
        meta["unknown_spans"] = [[a, b] for a, b in spans if b >= t0 and a <= t1]
    return Trace(requests=requests, steps=steps, batch=batch, events=events, kv=kv, counters=counters, meta=meta)


def window_of_time(trace: Trace, t0: float, t1: float) -> Trace:
    """The window of the steps that start within [t0, t1] on the trace's clock (ms or units)."""
    s = trace.steps
    start = s["start"].to_numpy(dtype=float, na_value=np.nan)
    inside = (start >= t0) & (start <= t1)
    if not inside.any():
        step = s["step"].to_numpy()
        if not len(step):
            return trace
        i = int(np.clip(np.searchsorted(np.nan_to_num(start, nan=-np.inf), t0), 0, len(step) - 1))
        return window(trace, int(step[i]), int(step[i]))
    picked = s["step"].to_numpy()[inside]
    return window(trace, int(picked.min()), int(picked.max()))


def is_window(trace: Trace) -> bool:
    return bool(trace.meta.get("window"))


def describe(trace: Trace) -> str:
    """"steps 12,000 to 17,000 of 360,000" for a windowed trace; "" for a whole one."""
    w = trace.meta.get("window")
    if not w:
        return ""
    return f"steps {w['first']:,} to {w['last']:,} of {w['of_steps']:,}"
