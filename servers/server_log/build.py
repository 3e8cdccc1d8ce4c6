"""A LogRead (SGLang, vLLM, TensorRT-LLM, TGI, LMDeploy or Ollama) as the one Trace, honestly:

- steps: one per logged SGLang batch line, on the log's clock (seconds from its first record;
  `start` the line's time, `end` unknown: the log does not say how long a batch took). Prefill:
  `prefill_tokens` = #new-token, `num_seqs` = #new-seq; decode: `decode_tokens` = `num_seqs` =
  #running-req (one token per running request in the logged step; more with speculative
  decoding). `running` / `waiting` as logged. Extra columns: kind, lane, cached_tokens, kv_usage,
  kv_tokens, throughput, line. vLLM: one step per Iteration line (`--enable-logging-iteration-details`;
  without it a vLLM log has no steps, its stats lines being interval summaries): `prefill_tokens`
  = context tokens (prompts and prompt chunks), `decode_tokens` = generation tokens, `num_seqs` =
  `running` = the requests in the step (context + generation); `waiting` is not logged per step
  (0). Extra columns: kind ("iteration"), lane (the engine), iteration (vLLM's step number),
  context_requests, generation_requests, step_ms (the step's elapsed time as vLLM measured it),
  kv_usage (0.26 on; NaN before), dummy, line. TensorRT-LLM: one step per iteration line
  (`print_iter_log`), the same columns (context tokens, generation tokens; `iteration` its
  `iter`; `step_ms` its host_step_time or elapsed_time; `kv_usage` its kv_cache_util), plus
  `device_ms` and `cached_tokens` where the build prints them (see _iteration_steps).
- counters: the gauges over time, one row per (record, gauge) with the gauge's name in `tenant`
  and extra columns `time` (s) and `lane`: running, waiting, kv_usage (and for vLLM swapped,
  prefix_cache_hit_rate, prompt/generation throughput, preemptions; for SGLang throughput and
  cached_tokens). meta["counters_kind"] = "gauges" says so.
- requests / events: the request lines (arrival from received / added / receive lines, finish from
  finish lines; nothing else is invented).
- LMDeploy: a step per forward line (the PyTorch engine's at DEBUG, TurboMind's prefill
  mini-batches); its stats lines' gauges as vLLM's (see _forward_steps).
- TGI: no steps (it logs no batch); a request per `Success` line with its arrival, first batch
  and end from the router's own times, and running / waiting rebuilt from them (see _tgi).
- Ollama: no steps; a request per inference access line, its arrival the end less the handler's
  time, and the requests in flight rebuilt from them (see _ollama).
- meta["unknown_spans"]: the silences between logged lines (Trace.unknown_spans): unknown, not idle.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sim.trace import Trace, empty_table, table_from_columns

from .fields import INT_MAX

SOURCES = {"sglang": "sglang-log", "vllm": "vllm-log", "trtllm": "trtllm-log", "tgi": "tgi-log",
           "lmdeploy": "lmdeploy-log", "ollama": "ollama-log"}
SG_GAUGES = ("running", "waiting", "kv_usage", "throughput", "cached_tokens")
TR_GAUGES = ("running", "kv_usage")
LM_GAUGES = ("running", "waiting", "kv_usage", "prefix_cache_hit_rate", "prompt_throughput", "generation_throughput")
VL_GAUGES = ("running", "waiting", "kv_usage", "swapped", "prefix_cache_hit_rate", "prompt_throughput",
             "generation_throughput", "preemptions")


def _num(v):
    return float("nan") if v is None or isinstance(v, bool) else float(v)


def _count(v):
    """A logged count as an int; None where the field gave no whole number (`#token: 1e300`,
    `#running-req: 0.5`, true), which int() truncated or the Int64 columns refused (TypeError)."""
    if v.__class__ is int:
        return v   # fields.value keeps ints within INT_MAX
    if v.__class__ is float and v.is_integer() and abs(v) <= INT_MAX:
        return int(v)
    return None


def _steps(batches: list[dict]) -> pd.DataFrame:
    n = len(batches)
    if n == 0:
        return empty_table("steps")
    kind = [b["kind"] for b in batches]
    pre = [k == "prefill" for k in kind]
    new_tok = [(_count(b.get("new_tokens")) or 0) if p else 0 for b, p in zip(batches, pre)]
    run = [(_count(b.get("running")) or 0) for b in batches]
    dec = [0 if p else r for p, r in zip(pre, run)]
    cols = {
        "step": np.arange(n, dtype=np.int64), "start": [_num(b["t"]) for b in batches],
        "end": [math.nan] * n, "num_tokens": [a + d for a, d in zip(new_tok, dec)],
        "prefill_tokens": new_tok, "decode_tokens": dec, "recompute_tokens": [0] * n,
        "num_seqs": [(_count(b.get("new_seqs")) or 0) if p else r for b, p, r in zip(batches, pre, run)],
        "running": run, "waiting": [(_count(b.get("waiting")) or 0) for b in batches],
        "preempted": [(_count(b.get("retracted_req")) or 0) for b in batches], "finished": [0] * n, "arrived": [0] * n,
        "idle": [False] * n, "swap_bytes": [0.0] * n,
        "kind": pd.Series(kind, dtype=object), "lane": pd.Series([b["lane"] for b in batches], dtype=object),
        "cached_tokens": pd.array([_count(b.get("cached_tokens")) for b in batches], dtype="Int64"),
        "kv_usage": [_num(b.get("kv_usage")) for b in batches],
        "kv_tokens": pd.array([_count(b.get("kv_tokens")) for b in batches], dtype="Int64"),
        "throughput": [_num(b.get("throughput")) for b in batches],
        "line": np.array([b["line"] for b in batches], dtype=np.int64),
    }
    return table_from_columns("steps", cols)


def _iteration_steps(batches: list[dict]) -> pd.DataFrame:
    """vLLM's Iteration lines or TensorRT-LLM's iteration lines as steps, in the log's order.
    TensorRT-LLM: generation requests are the batch's size less its context requests where the
    line gives the size (num_scheduled_requests), else unknown (NA; `num_seqs` then counts the
    generation tokens, one per request without draft tokens); `arrived` is the rise of the
    fetched-requests count since the lane's line before; `device_ms` the GPU's time of the step."""
    n = len(batches)
    ctx = [b["context_tokens"] for b in batches]
    gen = [b["generation_tokens"] for b in batches]
    gen_req = [b.get("generation_requests") for b in batches]
    seqs = [b["context_requests"] + (g if g is not None else t) for b, g, t in zip(batches, gen_req, gen)]
    cols = {
        "step": np.arange(n, dtype=np.int64), "start": [_num(b["t"]) for b in batches], "end": [math.nan] * n,
        "num_tokens": [a + d for a, d in zip(ctx, gen)], "prefill_tokens": ctx, "decode_tokens": gen,
        "recompute_tokens": [0] * n, "num_seqs": seqs, "running": seqs, "waiting": [0] * n, "preempted": [0] * n,
        "finished": [0] * n, "arrived": _arrivals(batches), "idle": [False] * n, "swap_bytes": [0.0] * n,
        "kind": pd.Series(["iteration"] * n, dtype=object),
        "lane": pd.Series([b["lane"] for b in batches], dtype=object),
        "iteration": np.array([b["iteration"] for b in batches], dtype=np.int64),
        "context_requests": np.array([b["context_requests"] for b in batches], dtype=np.int64),
        "generation_requests": (np.array(gen_req, dtype=np.int64) if None not in gen_req
                                else pd.array(gen_req, dtype="Int64")),
        "step_ms": [_num(b.get("elapsed_ms")) for b in batches],
        "kv_usage": [_num(b.get("kv_usage")) for b in batches],
        "dummy": np.array([bool(b.get("dummy")) for b in batches], dtype=bool),
        "line": np.array([b["line"] for b in batches], dtype=np.int64),
    }
    if any("device_ms" in b for b in batches):
        cols["device_ms"] = [_num(b.get("device_ms")) for b in batches]
    if any("cached_tokens" in b for b in batches):
        cols["cached_tokens"] = pd.array([_count(b.get("cached_tokens")) for b in batches], dtype="Int64")
    return table_from_columns("steps", cols)


def _forward_steps(batches: list[dict]) -> pd.DataFrame:
    """LMDeploy's forward lines as steps, in the log's order: the PyTorch engine's (a batch of
    prefills or of decodes, timed to the ms) and TurboMind's prefill mini-batches (with the decodes
    riding along; no time)."""
    n = len(batches)
    pre = [b["prefill_tokens"] for b in batches]
    dec = [b["decode_tokens"] for b in batches]
    seqs = [b["batch_size"] for b in batches]
    cols = {
        "step": np.arange(n, dtype=np.int64), "start": [_num(b["t"]) for b in batches], "end": [math.nan] * n,
        "num_tokens": [b["num_tokens"] for b in batches], "prefill_tokens": pre, "decode_tokens": dec,
        "recompute_tokens": [0] * n, "num_seqs": seqs, "running": seqs, "waiting": [0] * n, "preempted": [0] * n,
        "finished": [0] * n, "arrived": [0] * n, "idle": [False] * n, "swap_bytes": [0.0] * n,
        "kind": pd.Series(["decode" if b["decoding"] else "prefill" for b in batches], dtype=object),
        "lane": pd.Series([b["lane"] for b in batches], dtype=object),
        "prefill_seqs": np.array([b["prefill_seqs"] for b in batches], dtype=np.int64),
        "decode_seqs": np.array([b["decode_seqs"] for b in batches], dtype=np.int64),
        "cached_tokens": pd.array([None] * n, dtype="Int64"),       # not logged per forward
        "line": np.array([b["line"] for b in batches], dtype=np.int64),
    }
    return table_from_columns("steps", cols)


def _arrivals(batches: list[dict]) -> list[int]:
    """Requests new in each step: the rise of TensorRT-LLM's fetched count (this rank's under
    attention DP, where it counts; else all ranks') since the lane's line before; 0 elsewhere."""
    out, last = [], {}
    own = {b["lane"] for b in batches if b.get("fetched_rank")}
    for b in batches:
        key = "fetched_rank" if b["lane"] in own else "fetched_total"
        v = b.get(key)
        before = last.get(b["lane"])
        out.append(v - before if v is not None and before is not None and v >= before else 0)
        if v is not None:
            last[b["lane"]] = v
    return out


def _counters(records: list[dict], gauges: tuple[str, ...], lane_key: str) -> pd.DataFrame:
    """One row per (record, gauge it has), in record order, then gauge order."""
    steps, which, values = [], [], []
    for gi, g in enumerate(gauges):
        col = [r.get(g) for r in records]
        idx = [i for i, v in enumerate(col) if v is not None and v.__class__ is not bool]
        steps.append(np.array(idx, dtype=np.int64))
        which.append(np.full(len(idx), gi, dtype=np.int64))
        values.append(np.array([float(col[i]) for i in idx], dtype=float))
    step = np.concatenate(steps) if steps else np.zeros(0, dtype=np.int64)
    if not len(step):
        return empty_table("counters")
    gi = np.concatenate(which)
    order = np.lexsort((gi, step))
    step, gi, value = step[order], gi[order], np.concatenate(values)[order]
    time = np.array([_num(r["t"]) for r in records], dtype=float)[step]
    lanes = np.empty(len(records), dtype=object)
    lanes[:] = [r.get(lane_key) or "" for r in records]
    names = np.empty(len(gauges), dtype=object)
    names[:] = list(gauges)
    return table_from_columns("counters", {"step": step, "tenant": names[gi], "value": value,
                                           "time": time, "lane": pd.Series(lanes[step], dtype=object)})


def _requests(reqs: list[dict], retractions=()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The requests table from the request lines; the events: arrivals, finishes, preemptions
    (V0's warnings, each its request's) and SGLang's retractions (no request named: request "")."""
    arrive_kinds = {"received", "added", "receive", "json"}
    first: dict[str, dict] = {}
    ev_t, ev_r, ev_k, ev_d, ev_line = [], [], [], [], []
    for q in reqs:
        rid = q.get("request")
        if not rid:
            continue
        if q["kind"] == "preempted":   # an event of the request, no row of its own (V0's warning)
            ev_t.append(_num(q.get("t")))
            ev_r.append(rid)
            ev_k.append("preempt")
            n = q.get("cumulative")
            ev_d.append(f"{q.get('mode', 'recompute')}" + (f"; preemption {n:,} of the server's run" if n else ""))
            ev_line.append(q.get("line", 0))
            continue
        row = first.setdefault(rid, {"request": rid, "arrival_time": math.nan, "finish_time": math.nan,
                                     "prompt_len": None, "output_tokens": None, "cached_tokens": None})
        t = _num(q.get("t"))
        if q["kind"] in arrive_kinds and math.isnan(row["arrival_time"]):
            row["arrival_time"] = t
            ev_k.append("arrive")
        elif q["kind"] in ("finish", "finished", "aborted"):
            row["finish_time"] = t
            row["prompt_len"] = q.get("prompt_tokens", row["prompt_len"])
            row["output_tokens"] = q.get("completion_tokens", row["output_tokens"])
            row["cached_tokens"] = q.get("cached_tokens", row["cached_tokens"])
            ev_k.append("cancel" if q["kind"] == "aborted" else "finish")
        else:
            continue
        ev_t.append(t)
        ev_r.append(rid)
        ev_d.append(q["kind"])
        ev_line.append(q.get("line", 0))
    for x in retractions:
        n = x.get("retracted")
        ratio = x.get("new_token_ratio")
        ev_t.append(_num(x.get("t")))
        ev_r.append("")
        ev_k.append("preempt")
        ev_d.append(("retracted " + (f"{n:,} request{'s' if n != 1 else ''}" if n is not None else "requests"))
                    + (f"; new-token ratio {ratio[0]:g} -> {ratio[1]:g}" if ratio else "")
                    + (f"; {x['lane']}" if x.get("lane") else ""))
        ev_line.append(x.get("line", 0))
    if retractions:   # in the log's order
        order = sorted(range(len(ev_t)), key=ev_line.__getitem__)
        ev_t, ev_r, ev_k, ev_d = ([v[i] for i in order] for v in (ev_t, ev_r, ev_k, ev_d))
    rows = list(first.values())
    n = len(rows)
    requests = table_from_columns("requests", {
        "request": [r["request"] for r in rows], "tenant": [""] * n, "priority": [0] * n,
        "prompt_len": [r["prompt_len"] if r["prompt_len"] is not None else math.nan for r in rows],
        "arrival_time": [r["arrival_time"] for r in rows], "finish_time": [r["finish_time"] for r in rows],
        "output_tokens": [r["output_tokens"] if r["output_tokens"] is not None else math.nan for r in rows],
        "cached_tokens": [r["cached_tokens"] if r["cached_tokens"] is not None else math.nan for r in rows],
        "preemptions": [0] * n, "recomputed_tokens": [0] * n, "rejected": [False] * n,
    }) if n else empty_table("requests")
    events = table_from_columns("events", {"step": [-1] * len(ev_t), "time": ev_t, "request": ev_r, "kind": ev_k,
                                           "detail": ev_d}) if ev_t else empty_table("events")
    return requests, events


def _tgi(read) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """TGI's request lines as requests (arrival = the line's time less total_time; first batch =
    arrival + validation + queue; end = the line's time), events (arrive, schedule, finish; each
    error: reject when the router refused it for load, else cancel, with its message), and the
    running / waiting gauges those times imply (requests past validation and not yet in a batch;
    in a batch and not ended), at each change: of the logged requests only; and each prefix-cache
    allocation's share of its prompt found cached (`Prefix P - Suffix S`: P / (P + S))."""
    ok = [q for q in read.requests if q["kind"] == "success" and q.get("t") is not None and "total_ms" in q]
    n = len(ok)
    end = np.array([q["t"] for q in ok], dtype=float)
    arrive = end - np.array([q["total_ms"] for q in ok], dtype=float) / 1e3
    queued = arrive + np.array([q["validation_ms"] for q in ok], dtype=float) / 1e3
    batch = queued + np.array([q["queue_ms"] for q in ok], dtype=float) / 1e3
    batch = np.minimum(batch, end)
    ids = [q["request"] for q in ok]
    requests = table_from_columns("requests", {
        "request": ids, "tenant": [""] * n, "priority": [0] * n, "prompt_len": [math.nan] * n,
        "max_tokens": pd.array([q.get("max_new_tokens") for q in ok], dtype="Int64"),
        "arrival_time": arrive, "first_scheduled_time": batch, "finish_time": end,
        "output_tokens": pd.array([q.get("output_tokens") for q in ok], dtype="Int64"),
        "cached_tokens": [math.nan] * n, "preemptions": [0] * n, "recomputed_tokens": [0] * n,
        "rejected": [False] * n, "finish_reason": [q.get("route", "") for q in ok],
    }) if n else empty_table("requests")
    ev_t = [*arrive, *batch, *end]
    ev_r = ids * 3
    ev_k = ["arrive"] * n + ["schedule"] * n + ["finish"] * n
    ev_d = ["arrived (the line's time less total_time)"] * n + ["first batch (after validation and queue)"] * n \
        + [f"ended ({q.get('route', '')})" for q in ok]
    for q in read.requests:
        if q["kind"] == "error":
            ev_t.append(_num(q.get("t")))
            ev_r.append(q["request"])
            ev_k.append("reject" if q.get("rejected") else "cancel")
            ev_d.append(f"{q.get('route', '')}: {q.get('message', '')}"[:200])
    order = np.argsort(np.array(ev_t, dtype=float), kind="stable")
    events = table_from_columns("events", {
        "step": [-1] * len(ev_t), "time": np.array(ev_t, dtype=float)[order],
        "request": [ev_r[i] for i in order], "kind": [ev_k[i] for i in order], "detail": [ev_d[i] for i in order],
    }) if ev_t else empty_table("events")
    counters = _sweeps((("waiting", queued, batch), ("running", batch, end))) if n else empty_table("counters")
    rows = [r for r in (read.extra.get("allocations") or {}).get("rows", []) if r[1] is not None and r[2] + r[3] > 0]
    if rows:   # the prefix cache's allocations: each request's share of its prompt found cached
        hits = table_from_columns("counters", {
            "step": np.arange(len(rows), dtype=np.int64), "tenant": np.full(len(rows), "prefix_cache_hit_rate", dtype=object),
            "value": np.array([r[2] / (r[2] + r[3]) for r in rows], dtype=float),
            "time": np.array([r[1] for r in rows], dtype=float), "lane": pd.Series([""] * len(rows), dtype=object)})
        counters = hits if not n else pd.concat([counters, hits], ignore_index=True)
    return requests, events, counters


def _sweeps(gauges) -> pd.DataFrame:
    """Gauges rebuilt from intervals: for each (name, starts, ends), the count of intervals open,
    at each instant it changes (leaving before coming at one instant), as counters rows."""
    rows = []
    for name, a, b in gauges:
        times = np.concatenate([a, b])
        delta = np.concatenate([np.ones(len(a)), -np.ones(len(b))])
        o = np.lexsort((delta, times))
        level = np.cumsum(delta[o])
        t = times[o]
        last = np.r_[t[1:] != t[:-1], True] if len(t) else np.zeros(0, dtype=bool)   # the level after each instant
        rows.append((name, t[last], level[last]))
    return table_from_columns("counters", {
        "step": np.concatenate([np.arange(len(t)) for _, t, _ in rows]).astype(np.int64),
        "tenant": np.concatenate([np.full(len(t), nm, dtype=object) for nm, t, _ in rows]),
        "value": np.concatenate([v for _, _, v in rows]).astype(float),
        "time": np.concatenate([t for _, t, _ in rows]).astype(float),
        "lane": pd.Series([""] * sum(len(t) for _, t, _ in rows), dtype=object),
    })


def _ollama(read) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Ollama's access lines as requests (arrival = the line's second less the handler's time; end
    = the line's second; `finish_reason` the status), events (arrive; finish, or cancel for an
    error status), and the requests in flight rebuilt from those times: of the logged ones only."""
    ok = [q for q in read.requests if q.get("t") is not None and q.get("handler_ms") is not None]
    n = len(ok)
    end = np.array([q["t"] for q in ok], dtype=float)
    arrive = end - np.array([q["handler_ms"] for q in ok], dtype=float) / 1e3
    ids = [q["request"] for q in ok]
    requests = table_from_columns("requests", {
        "request": ids, "tenant": [""] * n, "priority": [0] * n, "prompt_len": [math.nan] * n,
        "arrival_time": arrive, "finish_time": end, "output_tokens": [math.nan] * n, "cached_tokens": [math.nan] * n,
        "preemptions": [0] * n, "recomputed_tokens": [0] * n, "rejected": [False] * n,
        "finish_reason": [f"{q['status']} {q['path']}" for q in ok],
    }) if n else empty_table("requests")
    order = np.argsort(np.concatenate([arrive, end]), kind="stable")
    kinds = ["arrive"] * n + ["cancel" if q["status"] >= 400 else "finish" for q in ok]
    detail = [f"{q['method']} {q['path']}" for q in ok] + [f"status {q['status']}" for q in ok]
    both = ids * 2
    events = table_from_columns("events", {
        "step": [-1] * (2 * n), "time": np.concatenate([arrive, end])[order], "request": [both[i] for i in order],
        "kind": [kinds[i] for i in order], "detail": [detail[i] for i in order],
    }) if n else empty_table("events")
    counters = _sweeps((("in_flight", arrive, end),)) if n else empty_table("counters")
    return requests, events, counters


def to_trace(read) -> Trace:
    """The Trace of a LogRead (servers.sglang_log / servers.vllm_log)."""
    if read.engine == "sglang":
        steps = _steps(read.batches)
        counters = _counters(read.batches, SG_GAUGES, "lane")
    elif read.engine == "trtllm":   # a step per iteration line; the gauges are its running and KV use
        steps = _iteration_steps(read.batches) if read.batches else empty_table("steps")
        counters = _counters([{**b, "running": b["context_requests"] + b["generation_requests"]}
                              if b.get("generation_requests") is not None else b for b in read.batches],
                             TR_GAUGES, "lane")
    elif read.engine == "lmdeploy":
        steps = _forward_steps(read.batches) if read.batches else empty_table("steps")
        counters = _counters(read.stats, LM_GAUGES, "engine")
    elif read.engine == "tgi":    # no batch logged: requests, and the gauges their own times imply
        steps = empty_table("steps")
        requests, events, counters = _tgi(read)
    elif read.engine == "ollama":
        steps = empty_table("steps")
        requests, events, counters = _ollama(read)
    else:
        steps = _iteration_steps(read.batches) if read.batches else empty_table("steps")
        counters = _counters(read.stats, VL_GAUGES, "engine")
    if read.engine not in ("tgi", "ollama"):
        requests, events = _requests(read.requests, read.extra.get("retractions") or ())
    meta = {"source": SOURCES.get(read.engine, "server-log"), "time_unit": "s", "engine": read.engine,
            "era": read.era, "traits": list(read.traits), "clock": read.clock, "time_origin": read.time_origin,
            "file": read.name, "lanes": list(read.lanes), "counters_kind": "gauges",
            "unknown_spans": [list(s) for s in read.gaps], "unknown_rule": read.gap_rule,
            "unparsed_lines": read.not_understood,
            "unparsed_examples": [e["text"] for e in read.not_understood_examples],
            "cannot_say": list(read.cannot_say), "warnings": list(read.warnings)}
    return Trace(requests=requests, steps=steps, batch=empty_table("batch"), events=events, kv=empty_table("kv"),
                 counters=counters, meta=meta)
