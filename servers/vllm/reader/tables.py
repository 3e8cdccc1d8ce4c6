"""The Trace's tables from a TraceBuilder's buffers (replay.py), with numpy: what each batch
entry is and the requests' firsts, worked out over all entries at once.

- an entry's slot is its request's at its last admission; its recompute horizon the one set at
  the request's last preemption before it (both: the latest record of that request at or
  before the entry, found by one searchsorted over (request, entry) keys);
- its kind is the simulator's (sim.scheduler._entry): "recompute" below that horizon,
  "decode" once the prompt is done and the request has sampled before, else "prefill";
- a finish event says the tokens the request had sampled by then.
"""
from __future__ import annotations

from array import array

import numpy as np

from sim.trace import Trace, kv_table, table_from_columns

from .lines import CONFIG_KEYS
from .replay import DECODE, EVENT_KINDS, KINDS, PHASES, PREFILL, RECOMPUTE, SOURCE, STEP_COLUMNS


try:   # text columns straight from codes (the compact Trace's Categoricals), without hashing each value
    from sim.trace import categorical as _categorical
except ImportError:   # pragma: no cover - a Trace of plain text columns
    _categorical = None


def _text(codes: np.ndarray, names: np.ndarray):
    """A text column: names[codes], as the Trace holds text."""
    return _categorical(codes, names) if _categorical is not None else names[codes]


def _np(buf: array) -> np.ndarray:
    """A copy of a buffer as numpy (a view would stop the buffer from growing)."""
    return np.array(buf, dtype=np.dtype(buf.typecode)) if len(buf) else np.zeros(0, dtype=np.dtype(buf.typecode))


def _latest(records, rows: np.ndarray, query: np.ndarray, width: int, default) -> np.ndarray:
    """Per (row, entry), query = row * width + entry: the value of the last record (row, from
    entry, value) of that row at or before that entry, in record order among equals; `default`
    where there is none. (In place where it can: every temporary here is as long as the entries.)"""
    r_row, r_at, r_val = (_np(b) for b in records)
    if not len(r_row):
        return np.full(len(rows), default, dtype=np.int64)
    keys = r_row * width + r_at
    order = np.argsort(keys, kind="stable")
    keys, r_row, r_val = keys[order], r_row[order], r_val[order]
    pos = np.searchsorted(keys, query, side="right")
    pos -= 1
    ok = pos >= 0
    np.maximum(pos, 0, out=pos)
    ok &= r_row[pos] == rows
    out = r_val[pos]
    out[~ok] = default
    return out


def _group_starts(sorted_rows: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in a sorted array."""
    if not len(sorted_rows):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, sorted_rows[1:] != sorted_rows[:-1]])


def build(b, rec) -> Trace:
    if b.missing:
        rec.warn(f"{b.missing} step entries name requests the recording never added (it continues an "
                 "earlier file?): left out")
    reqs = b.rows
    n_rows = len(reqs)
    ids = np.empty(n_rows, dtype=object)
    ids[:] = [r.add["id"] for r in reqs]
    # the steps
    n_steps = len(b.s_all) // len(STEP_COLUMNS)
    per = dict(zip(STEP_COLUMNS, _np(b.s_all).reshape(n_steps, len(STEP_COLUMNS)).T))
    step = per["step"].astype(np.int64)
    t = np.column_stack([per["start"], per["end"]])
    # the entries, without the left-out ones
    n_e = b.e_count
    flat = _np(b.e_flat).reshape(n_e, 3)
    sampled = _np(b.e_sampled).astype(bool)
    per_step = np.diff(np.append(per["first_entry"].astype(np.int64), n_e)) if n_steps else np.zeros(0, dtype=np.int64)
    sidx = np.repeat(np.arange(n_steps), per_step)
    at = np.arange(n_e)
    if len(b.e_drop):
        keep = np.ones(n_e, dtype=bool)
        keep[_np(b.e_drop)] = False
        flat, sampled, sidx, at = flat[keep], sampled[keep], sidx[keep], at[keep]
    keys = np.fromiter(b.reqs.keys(), dtype=np.int64, count=len(b.reqs))
    vals = np.fromiter((r.row for r in b.reqs.values()), dtype=np.int64, count=len(b.reqs))
    order = np.argsort(keys)
    keys, vals = keys[order], vals[order]
    if not len(flat):
        row = np.zeros(0, dtype=np.int64)
    elif keys[0] >= 0 and keys[-1] < 4 * len(keys) + (1 << 16):   # the recorder's 0, 1, 2, ...: a lookup table
        lut = np.zeros(int(keys[-1]) + 1, dtype=np.int64)
        lut[keys] = vals
        row = lut[flat[:, 0]]
        del lut
    else:
        row = vals[np.searchsorted(keys, flat[:, 0])]
    tokens, before = flat[:, 1], flat[:, 2]
    width = n_e + 1
    query = row * width
    query += at
    slot = _latest(b.admits, row, query, width, -1)
    horizon = _latest(b.preempts, row, query, width, 0)
    del query
    # tokens the request sampled before each entry (its entries in order: a running count per request)
    by_row = np.argsort(row, kind="stable")
    s_sorted = sampled[by_row].astype(np.int64)
    csum = np.cumsum(s_sorted)
    rows_sorted = row[by_row]
    first = _group_starts(rows_sorted)
    start_of = np.repeat(csum[first] - s_sorted[first], np.diff(np.append(first, len(row))))
    out_before = np.empty(len(row), dtype=np.int64)
    csum -= s_sorted
    csum -= start_of
    out_before[by_row] = csum
    del csum, start_of
    prompt_len = np.fromiter((r.add["prompt_len"] for r in reqs), dtype=np.int64, count=n_rows)
    redo_mask = before < horizon
    decode = ~redo_mask & (before >= prompt_len[row]) & (out_before > 0)
    kind = np.where(redo_mask, RECOMPUTE, np.where(decode, DECODE, PREFILL))
    redo = np.where(redo_mask, np.minimum(before + tokens, horizon) - before, 0)
    batch = table_from_columns("batch", {
        "step": step[sidx], "request": _text(row, ids), "slot": np.where(slot < 0, np.nan, slot) if (slot < 0).any() else slot, "kind": _text(kind, KINDS), "tokens": tokens,
        "computed_before": before, "sampled": sampled})
    # per step
    # tokens per (step, kind): one bincount over step * 3 + kind
    by_kind = np.bincount(sidx * 3 + kind, weights=tokens, minlength=3 * n_steps).reshape(n_steps, 3).astype(np.int64)
    sums = {c: by_kind[:, code].copy()
            for c, code in (("prefill_tokens", PREFILL), ("decode_tokens", DECODE), ("recompute_tokens", RECOMPUTE))}
    del by_kind
    starts = t[:, 0].copy()
    cols = {"step": step, "start": starts, "end": t[:, 1].copy(),
            "num_tokens": sums["prefill_tokens"] + sums["decode_tokens"] + sums["recompute_tokens"], **sums}
    for name in ("num_seqs", "running", "waiting", "preempted", "finished"):
        cols[name] = per[name].astype(np.int64)
    for name in ("free_blocks", "free_blocks_after_schedule", "cached_free_blocks"):
        cols[name] = per[name].copy()
    cols["arrived"] = np.fromiter((b.arrived.get(k, 0) for k in step.tolist()), dtype=np.int64, count=n_steps)
    cols.update(idle=np.zeros(n_steps, dtype=bool), swap_bytes=np.zeros(n_steps))
    for p in PHASES:
        cols[p] = per[p].copy()
    cols["period_ms"] = np.append(np.diff(starts), np.nan) if n_steps else np.zeros(0)
    steps = table_from_columns("steps", cols)
    # per request
    nan = np.full(n_rows, np.nan)
    fs_step, fs_time, cached = nan.copy(), nan.copy(), nan.copy()
    # each request's first entry, and first that sampled: the first of its run in the stable order by request
    u, first = rows_sorted[first], by_row[first]
    fs_step[u], fs_time[u], cached[u] = step[sidx[first]], t[sidx[first], 0], before[first]
    ft_step, ft_time = nan.copy(), nan.copy()
    got = by_row[sampled[by_row]]
    at_got = _group_starts(row[got])
    u, first = row[got][at_got], got[at_got]
    ft_step[u], ft_time[u] = step[sidx[first]], t[sidx[first], 1]
    n_out = np.bincount(row[sampled], minlength=n_rows)
    fin = [r.finish or (None, None, "") for r in reqs]
    a = [r.add for r in reqs]
    requests = table_from_columns("requests", {
        "request": ids, "tenant": ["default"] * n_rows,
        "priority": [int(x.get("priority") or 0) for x in a],
        "prompt_len": prompt_len, "max_tokens": [x["max_tokens"] for x in a],
        "arrival_step": [max(int(x.get("before_step") or 1) - 1, 0) for x in a],
        "arrival_time": [x.get("added") for x in a],
        "first_scheduled_step": fs_step, "first_scheduled_time": fs_time,
        "first_token_step": ft_step, "first_token_time": ft_time,
        "finish_step": [f[0] for f in fin], "finish_time": [f[1] for f in fin], "cached_tokens": cached,
        "output_tokens": n_out, "preemptions": [r.preemptions for r in reqs],
        "recomputed_tokens": np.bincount(row, weights=redo, minlength=n_rows).astype(np.int64),
        "rejected": [False] * n_rows, "finish_reason": [f[2] for f in fin],
        "slot": [r.slot for r in reqs],
        "received_time": np.array([x.get("arrival") for x in a], dtype=float)})
    events = _events(b, ids, row[got] * width + at[got], width)
    kv = kv_table(_np(b.kv_s), _np(b.kv_b), _text(_np(b.kv_r), ids), _np(b.kv_o).astype(np.int64))
    return Trace(requests=requests, steps=steps, batch=batch, events=events, kv=kv,
                 counters=table_from_columns("counters", {"step": [], "tenant": [], "value": []}),
                 meta=_meta(rec, n_rows))


def _events(b, ids, keys, width):
    """The arrivals first, then the steps' events, each in the order they came; then stably by
    step (as the events were always ordered). keys: row * width + entry of each entry that
    sampled, sorted (a finish says the tokens its request sampled before it)."""
    a, e = b.arrive_ev, b.ev
    detail = list(e.detail)
    if b.fin_ev:
        pos, f_row, f_at, why = zip(*b.fin_ev)
        lo = np.asarray(f_row, dtype=np.int64) * width
        n_out = np.searchsorted(keys, lo + np.asarray(f_at, dtype=np.int64)) - np.searchsorted(keys, lo)
        for p, w, n in zip(pos, why, n_out.tolist()):
            detail[p] = f"{w}, {n} tokens"
    step = np.concatenate([_np(a.step), _np(e.step)])
    order = np.argsort(step, kind="stable")
    text = np.empty(len(step), dtype=object)
    text[:] = a.detail + detail
    return table_from_columns("events", {
        "step": step[order], "time": np.concatenate([_np(a.time), _np(e.time)])[order],
        "request": _text(np.concatenate([_np(a.req), _np(e.req)])[order], ids),
        "kind": _text(np.concatenate([_np(a.kind), _np(e.kind)]).astype(np.int64)[order], EVENT_KINDS),
        "detail": text[order]})


def _meta(rec, n_requests: int) -> dict:
    cfg = rec.config
    h = rec.header
    return {"source": SOURCE, "name": rec.name, "time_unit": "ms", "time_origin": "recorder start",
            "scheduler": "vllm", "vllm_version": h.get("vllm"), "scheduler_class": h.get("scheduler_class"),
            "started_unix": h.get("started_unix"), "async_scheduling": bool(cfg.get("async_scheduling")),
            "config": {k: cfg[k] for k in CONFIG_KEYS if k in cfg}, "num_blocks": cfg.get("num_gpu_blocks"),
            "block_size": cfg.get("block_size"), "prompts": h.get("prompts"), "ended": rec.ended,
            "block_ids": bool(h.get("block_ids")), "continues_earlier": rec.continues_earlier,
            "warnings": list(rec.warnings), "num_requests": n_requests, "phases": list(PHASES)}
