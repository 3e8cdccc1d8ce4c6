"""Exports of a Trace: CSV per table, and Chrome trace / Perfetto JSON.

The Chrome trace event format (the "Trace Event Format" document, loaded by chrome://tracing
and ui.perfetto.dev) is a JSON object with a `traceEvents` list. We write:
- one thread track per slot, with a complete slice ("ph": "X") per batch entry;
- counter tracks ("ph": "C") for queue lengths, free KV blocks and fairness counters;
- instant events ("ph": "i") for preemptions, rejections and swaps;
- flow events ("ph": "s"/"t"/"f") linking each request's chunks and decode steps.
Timestamps are microseconds. A trace in ms maps 1 ms -> 1000 us; a trace in abstract cost
units or steps maps one unit to 1000 us as well, and says so in `otherData`.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from .trace import TABLES, Trace

PID = 1


def table_csv(trace: Trace, name: str) -> bytes:
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}")
    return getattr(trace, name).to_csv(index=False).encode()


def chrome_trace(trace: Trace, max_entries: int | None = None) -> dict:
    """The trace as a Chrome/Perfetto trace-event document (a dict; json.dumps it)."""
    scale = 1000.0  # 1 trace time unit -> 1000 us
    steps = trace.steps
    start = pd.Series(steps["start"].to_numpy(dtype=float), index=steps["step"].to_numpy())
    end = pd.Series(steps["end"].to_numpy(dtype=float), index=steps["step"].to_numpy())
    b = trace.batch if max_entries is None else trace.batch.iloc[:max_entries]
    ev: list[dict] = [{"ph": "M", "pid": PID, "name": "process_name",
                       "args": {"name": f"{trace.source} ({trace.meta.get('scheduler', '')})".strip()}}]
    slots = sorted(int(s) for s in pd.unique(b["slot"].dropna()) if int(s) >= 0)
    for s in slots:
        ev.append({"ph": "M", "pid": PID, "tid": s + 1, "name": "thread_name", "args": {"name": f"slot {s}"}})
        ev.append({"ph": "M", "pid": PID, "tid": s + 1, "name": "thread_sort_index", "args": {"sort_index": s}})
    st = b["step"].to_numpy()
    ts = start.reindex(st).to_numpy() * scale
    te = end.reindex(st).to_numpy() * scale
    slot = b["slot"].fillna(-1).to_numpy(dtype=np.int64)
    reqs = b["request"].to_numpy()
    kinds = b["kind"].to_numpy()
    toks = b["tokens"].to_numpy()
    before = b["computed_before"].fillna(-1).to_numpy(dtype=np.int64)
    sampled = b["sampled"].to_numpy(dtype=bool)
    seen: dict[str, int] = {}
    last_idx: dict[str, int] = {}
    for i in range(len(b)):
        tid = int(slot[i]) + 1 if slot[i] >= 0 else 0
        dur = max(te[i] - ts[i], 1.0)
        ev.append({"ph": "X", "pid": PID, "tid": tid, "ts": round(ts[i], 3), "dur": round(dur, 3),
                   "name": f"{reqs[i]} {kinds[i]}", "cat": str(kinds[i]),
                   "args": {"request": reqs[i], "step": int(st[i]), "tokens": int(toks[i]),
                            "computed_before": int(before[i]), "sampled": bool(sampled[i])}})
        fid = seen.setdefault(reqs[i], len(seen) + 1)
        # flow: start at the first chunk, step through each later one (binds to the slice it lands in)
        ph = "s" if reqs[i] not in last_idx else "t"
        ev.append({"ph": ph, "pid": PID, "tid": tid, "ts": round(ts[i] + dur / 2, 3), "id": fid,
                   "name": "request", "cat": "flow", "bp": "e"})
        last_idx[reqs[i]] = len(ev) - 1
    for idx in last_idx.values():  # close each flow at its last chunk
        if ev[idx]["ph"] == "t":
            ev[idx]["ph"] = "f"
    for row in steps.itertuples(index=False):
        t = round(row.start * scale, 3)
        ev.append({"ph": "C", "pid": PID, "name": "queue", "ts": t,
                   "args": {"running": int(row.running), "waiting": int(row.waiting)}})
        if not pd.isna(row.free_blocks):
            ev.append({"ph": "C", "pid": PID, "name": "free KV blocks", "ts": t,
                       "args": {"free": int(row.free_blocks)}})
        ev.append({"ph": "C", "pid": PID, "name": "tokens", "ts": t,
                   "args": {"prefill": int(row.prefill_tokens), "decode": int(row.decode_tokens),
                            "recompute": int(row.recompute_tokens)}})
    if not trace.counters.empty:
        c = trace.counters
        for step, g in c.groupby("step", sort=True):
            ev.append({"ph": "C", "pid": PID, "name": "fairness counters",
                       "ts": round(float(start.get(step, 0.0)) * scale, 3),
                       "args": {str(t): float(v) for t, v in zip(g["tenant"], g["value"])}})
    e = trace.events
    marks = e[e["kind"].isin(["preempt", "reject", "swap_out", "swap_in", "cancel"])]
    for row in marks.itertuples(index=False):
        ev.append({"ph": "i", "pid": PID, "tid": 0, "s": "p", "ts": round(float(row.time) * scale, 3),
                   "name": f"{row.kind} {row.request}", "args": {"detail": row.detail, "step": int(row.step)}})
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"source": trace.source, "time_unit": trace.time_unit,
                          "note": "1 trace time unit is drawn as 1 ms"}}


def chrome_trace_bytes(trace: Trace, max_entries: int | None = None) -> bytes:
    return json.dumps(chrome_trace(trace, max_entries), separators=(",", ":")).encode()
