"""Preemption when KV memory runs out (the lesson's Example 8), read off a Trace.

- preemption_table: every preemption with its victim, the blocks it freed, the KV tokens it
  held (what recompute must process again, or swap must copy out and back) and what that
  costs each way (sim.cost.swap_ms over a link vs sim.cost.recompute_ms on a GPU);
- blocks_held: blocks each request holds at the end of every step (the memory timeline);
- swap_vs_recompute: both costs over a range of context lengths (the comparison curve);
- wasted_work: what a run's preemptions cost in total (recomputed tokens, swapped bytes, time);
- demoted: the same workload with some requests given a lower priority (a larger number), to
  compare vLLM's FCFS victim (the newest running request) with its priority victim (the
  largest priority value, latest arrival on ties).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable

import numpy as np
import pandas as pd

from .cost import recompute_ms, swap_ms
from .trace import Trace
from .workload import Workload

# The lesson's comparison: an 8B model's KV over PCIe 4.0 x16, recompute on an RTX 4090 at 50%.
LESSON_COST = {"model": "8B", "hardware": "rtx4090", "link": "pcie4-x16", "efficiency": 0.5}


def kv_tokens_before(trace: Trace, request: str, step: int) -> int:
    """KV tokens `request` held at the end of its last batch entry before `step`."""
    b = trace.batch
    rows = b[(b["request"].to_numpy() == request) & (b["step"].to_numpy() < step)]
    if rows.empty:
        return 0
    last = rows.iloc[-1]
    before = last["computed_before"]
    return int((0 if pd.isna(before) else before) + last["tokens"])


def preemption_table(trace: Trace, model: str = "8B", hardware: str = "rtx4090", link: str = "pcie4-x16",
                     efficiency: float = 0.5) -> pd.DataFrame:
    """One row per preemption: step, victim, tenant, priority, mode (recompute or swap),
    blocks_freed, kv_tokens (tokens it held: recompute processes them again), and swap_ms
    (out and back over `link`) vs recompute_ms (a prefill of kv_tokens on `hardware`)."""
    ev = trace.events
    pre = ev[ev["kind"].to_numpy() == "preempt"]
    cols = ["step", "victim", "tenant", "priority", "mode", "blocks_freed", "kv_tokens", "swap_ms", "recompute_ms"]
    if pre.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    req = trace.requests.set_index("request")
    kv = trace.kv
    rel = kv[kv["op"].to_numpy() == "release"].groupby(["step", "request"]).size()
    rows = []
    for step, rid, detail in zip(pre["step"].astype(int), pre["request"].astype(str), pre["detail"].astype(str)):
        tokens = kv_tokens_before(trace, rid, step)
        rows.append({"step": step, "victim": rid, "tenant": str(req.at[rid, "tenant"]),
                     "priority": int(req.at[rid, "priority"]),
                     "mode": "swap" if detail.startswith("swap") else "recompute",
                     "blocks_freed": int(rel.get((step, rid), 0)), "kv_tokens": tokens,
                     "swap_ms": swap_ms(tokens, model, link, round_trip=True),
                     "recompute_ms": recompute_ms(tokens, model, hardware, efficiency)})
    return pd.DataFrame(rows, columns=cols)


def blocks_held(trace: Trace) -> pd.DataFrame:
    """Steps x requests: KV blocks each request holds at the end of the step (all steps, every
    request of the trace as a column, in workload order)."""
    steps = trace.steps["step"].to_numpy(dtype=np.int64)
    reqs = trace.requests["request"].astype(str).tolist()
    kv = trace.kv
    op = kv["op"].to_numpy()
    delta = np.where(op == "acquire", 1, np.where(op == "release", -1, 0))
    d = pd.DataFrame({"step": kv["step"].to_numpy(), "request": kv["request"].astype(str).to_numpy(), "d": delta})
    d = d[d["d"] != 0]
    if d.empty:
        return pd.DataFrame(0, index=pd.Index(steps, name="step"), columns=reqs)
    per = d.pivot_table(index="step", columns="request", values="d", aggfunc="sum", fill_value=0)
    per = per.reindex(index=steps, columns=reqs, fill_value=0).cumsum()
    per.index.name = "step"
    return per.astype(np.int64)


def kv_tokens(trace: Trace, held: pd.DataFrame | None = None) -> pd.DataFrame:
    """Steps x requests: tokens in each request's KV cache at the end of the step (what it has
    computed and still holds; 0 once preempted, finished or not yet started)."""
    held = blocks_held(trace) if held is None else held
    b = trace.batch
    after = (b["computed_before"].astype("Float64").fillna(0).to_numpy(dtype=float)
             + b["tokens"].to_numpy(dtype=float))
    d = pd.DataFrame({"step": b["step"].to_numpy(), "request": b["request"].astype(str).to_numpy(), "after": after})
    if d.empty:
        return pd.DataFrame(0, index=held.index, columns=held.columns)
    per = d.pivot_table(index="step", columns="request", values="after", aggfunc="last")
    per = per.reindex(index=held.index, columns=held.columns).ffill().fillna(0)
    return per.where(held.to_numpy() > 0, 0).astype(np.int64)


def step_kinds(trace: Trace, held: pd.DataFrame | None = None) -> pd.DataFrame:
    """Steps x requests: what each request did in the step (prefill, decode, recompute), or
    "holds KV" / "waiting" / "" (not arrived or done) when it was not in the batch."""
    held = blocks_held(trace) if held is None else held
    r = trace.requests.set_index("request")
    steps = held.index.to_numpy()
    grid = np.full(held.shape, "", dtype=object)
    h = held.to_numpy()
    for j, q in enumerate(held.columns):
        arr, fin = r.at[q, "arrival_step"], r.at[q, "finish_step"]
        present = (steps > (arr if not pd.isna(arr) else -1)) & ((steps <= fin) if not pd.isna(fin) else True)
        grid[present, j] = np.where(h[present, j] > 0, "holds KV", "waiting")
    b = trace.batch
    grid[held.index.get_indexer(b["step"]), held.columns.get_indexer(b["request"].astype(str))] = \
        b["kind"].astype(str).to_numpy()
    out = pd.DataFrame(grid, index=held.index, columns=held.columns)
    return out


def swap_vs_recompute(tokens: Iterable[float], model: str = "8B", hardware: str = "rtx4090",
                      link: str = "pcie4-x16", efficiency: float = 0.5) -> pd.DataFrame:
    """Per context length: swap_ms (KV out and back over `link`) and recompute_ms (prefill on
    `hardware` at `efficiency` of peak), and how many times cheaper swap is."""
    t = np.asarray(list(tokens), dtype=float)
    s = np.array([swap_ms(x, model, link, round_trip=True) for x in t])
    r = np.array([recompute_ms(x, model, hardware, efficiency) for x in t])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(s > 0, r / s, np.nan)
    return pd.DataFrame({"tokens": t, "swap_ms": s, "recompute_ms": r, "ratio": ratio})


def wasted_work(trace: Trace) -> dict:
    """A run's preemption cost: preemptions, recomputed_tokens (processed again after
    recompute preemptions), swap_bytes (copied out and back), and the run's total time."""
    r, s = trace.requests, trace.steps
    return {"preemptions": int(r["preemptions"].sum()),
            "recomputed_tokens": int(r["recomputed_tokens"].sum()),
            "swap_bytes": float(s["swap_bytes"].sum()),
            "total_time": float(s["end"].max() - s["start"].min()) if len(s) else 0.0,
            "time_unit": trace.time_unit}


def demoted(workload: Workload, requests: Iterable[str], priority: int = 1) -> Workload:
    """A copy of `workload` with the named requests at `priority` (a larger number is served
    later and, under vLLM's priority policy, preempted first)."""
    names = set(requests)
    wl = Workload([replace(r, priority=priority) if r.id in names else r for r in workload.requests],
                  config=dict(workload.config))
    wl.name = workload.name
    return wl
