"""Exports of a Trace: CSV per table, and Chrome trace / Perfetto JSON.

The Chrome trace event format (the "Trace Event Format" document, loaded by chrome://tracing
and ui.perfetto.dev) is a JSON object with a `traceEvents` list. We write:
- one thread track per slot, with a complete slice ("ph": "X") per batch entry;
- counter tracks ("ph": "C") for queue lengths, free KV blocks and fairness counters;
- instant events ("ph": "i") on a "scheduler" track for preemptions, rejections, swaps and
  cancels, and, from llama-server logs, refused tasks, context shifts, truncations, KV-cache
  failures with their batch retries, and deferred tasks;
- flow events ("ph": "s"/"t"/"f") linking each request's chunks and decode steps.
Timestamps are microseconds. A trace in ms maps 1 ms -> 1000 us; a trace in abstract cost
units or steps maps one unit to 1000 us as well, and says so in `otherData`. When some steps
have no times (a llama-server log, or one of its server runs, without timestamps) the whole
document is drawn on the step index (step n starts at n ms), since one clock cannot mix wall
time with call counts; `otherData.clock` says which. The output is strict JSON (no NaN).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .jsonout import dumps_strict
from .trace import TABLES, Trace

PID = 1
MARKER_TID = 0   # the "scheduler" track that holds instant events and slot-less entries
# Events drawn as instant markers: the simulator's, then the llama-server reader's.
MARKED = ("preempt", "reject", "swap_out", "swap_in", "cancel",
          "error", "context_shift", "truncate", "kv_fail", "batch_retry", "decode_error", "defer")


def _clock(steps: pd.DataFrame) -> tuple[pd.Series, pd.Series, str]:
    """Start and end of each step (indexed by step) in trace time units, and the clock's name."""
    idx = steps["step"].to_numpy()
    start = steps["start"].to_numpy(dtype=float, na_value=np.nan)
    end = steps["end"].to_numpy(dtype=float, na_value=np.nan)
    if len(idx) and not (np.isfinite(start).all() and np.isfinite(end).all()):
        start = idx.astype(float)
        end = start + 1.0
        clock = "step index (some steps have no times): step n starts at n ms"
    else:
        clock = "trace time"
    return pd.Series(start, index=idx), pd.Series(end, index=idx), clock


def _known(v) -> int | None:
    """A count from an array where -1 marks unknown: None (JSON null) for unknown."""
    return None if v < 0 else int(v)


def _int(v, default: int = 0) -> int:
    return default if v is None or pd.isna(v) else int(v)


def table_csv(trace: Trace, name: str) -> bytes:
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}")
    return getattr(trace, name).to_csv(index=False).encode()


def chrome_trace(trace: Trace, max_entries: int | None = None) -> dict:
    """The trace as a Chrome/Perfetto trace-event document (a dict; chrome_trace_bytes writes it)."""
    scale = 1000.0  # 1 trace time unit -> 1000 us
    steps = trace.steps
    start, end, clock = _clock(steps)
    b = trace.batch if max_entries is None else trace.batch.iloc[:max_entries]
    ev: list[dict] = [{"ph": "M", "pid": PID, "name": "process_name",
                       "args": {"name": f"{trace.source} ({trace.meta.get('scheduler', '')})".strip()}},
                      {"ph": "M", "pid": PID, "tid": MARKER_TID, "name": "thread_name", "args": {"name": "scheduler"}},
                      {"ph": "M", "pid": PID, "tid": MARKER_TID, "name": "thread_sort_index",
                       "args": {"sort_index": -1}}]
    slots = sorted(int(s) for s in pd.unique(b["slot"].dropna()) if int(s) >= 0)
    for s in slots:
        ev.append({"ph": "M", "pid": PID, "tid": s + 1, "name": "thread_name", "args": {"name": f"slot {s}"}})
        ev.append({"ph": "M", "pid": PID, "tid": s + 1, "name": "thread_sort_index", "args": {"sort_index": s}})
    st = b["step"].to_numpy()
    ts = np.nan_to_num(start.reindex(st).to_numpy() * scale)
    te = np.nan_to_num(end.reindex(st).to_numpy() * scale)
    slot = b["slot"].fillna(-1).to_numpy(dtype=np.int64)
    reqs = b["request"].to_numpy()
    kinds = b["kind"].to_numpy()
    toks = b["tokens"].fillna(-1).to_numpy(dtype=np.int64)   # -1: the log did not say
    before = b["computed_before"].fillna(-1).to_numpy(dtype=np.int64)
    sampled = b["sampled"].fillna(False).to_numpy(dtype=bool)
    seen: dict[str, int] = {}
    last_idx: dict[str, int] = {}
    for i in range(len(b)):
        tid = int(slot[i]) + 1 if slot[i] >= 0 else MARKER_TID
        dur = max(te[i] - ts[i], 1.0)
        ev.append({"ph": "X", "pid": PID, "tid": tid, "ts": round(ts[i], 3), "dur": round(dur, 3),
                   "name": f"{reqs[i]} {kinds[i]}", "cat": str(kinds[i]),
                   "args": {"request": reqs[i], "step": int(st[i]), "tokens": _known(toks[i]),
                            "computed_before": _known(before[i]), "sampled": bool(sampled[i])}})
        fid = seen.setdefault(reqs[i], len(seen) + 1)
        # flow: start at the first chunk, step through each later one (binds to the slice it lands in)
        ph = "s" if reqs[i] not in last_idx else "t"
        ev.append({"ph": ph, "pid": PID, "tid": tid, "ts": round(ts[i] + dur / 2, 3), "id": fid,
                   "name": "request", "cat": "flow", "bp": "e"})
        last_idx[reqs[i]] = len(ev) - 1
    for idx in last_idx.values():  # close each flow at its last chunk
        if ev[idx]["ph"] == "t":
            ev[idx]["ph"] = "f"
    for row, t0 in zip(steps.itertuples(index=False), start.to_numpy()):
        t = round(float(t0) * scale, 3)
        ev.append({"ph": "C", "pid": PID, "name": "queue", "ts": t,
                   "args": {"running": _int(row.running), "waiting": _int(row.waiting)}})
        if not pd.isna(row.free_blocks):
            ev.append({"ph": "C", "pid": PID, "name": "free KV blocks", "ts": t,
                       "args": {"free": int(row.free_blocks)}})
        ev.append({"ph": "C", "pid": PID, "name": "tokens", "ts": t,
                   "args": {"prefill": _int(row.prefill_tokens), "decode": _int(row.decode_tokens),
                            "recompute": _int(row.recompute_tokens)}})
    if not trace.counters.empty:
        c = trace.counters
        for step, g in c.groupby("step", sort=True):
            ev.append({"ph": "C", "pid": PID, "name": "fairness counters",
                       "ts": round(float(start.get(step, 0.0)) * scale, 3),
                       "args": {str(t): float(v) for t, v in zip(g["tenant"], g["value"])}})
    e = trace.events
    marks = e[e["kind"].isin(MARKED)]
    timed = clock == "trace time"
    for row in marks.itertuples(index=False):
        step = _int(row.step)
        # an event's own time when the clock is the trace's and the log gave one, else its step's start
        t = float(row.time) if timed and not pd.isna(row.time) else float(start.get(step, float(step)))
        if not np.isfinite(t):
            t = float(step)
        name = f"{row.kind} {row.request}".strip() if isinstance(row.request, str) else str(row.kind)
        ev.append({"ph": "i", "pid": PID, "tid": MARKER_TID, "s": "p", "ts": round(t * scale, 3),
                   "name": name, "cat": str(row.kind), "args": {"detail": str(row.detail or ""), "step": step}})
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"source": trace.source, "time_unit": trace.time_unit, "clock": clock,
                          "note": "1 trace time unit is drawn as 1 ms"}}


def chrome_trace_bytes(trace: Trace, max_entries: int | None = None) -> bytes:
    # strict: NaN is not JSON, and Perfetto refuses a file holding it (any left would be null)
    return dumps_strict(chrome_trace(trace, max_entries), separators=(",", ":")).encode()
