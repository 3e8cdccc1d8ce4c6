"""The Trace a llama-server log becomes, built from the reader's state at the end of the log.

What comes out (source = "llama-server log"):
- steps:    one per model call (see machine.py), with the rebuilt token counts, the running and
            waiting tasks, and logged_tokens (the n_tokens OLD builds print).
- batch:    per step, one entry per slot/task: kind "decode" (the slot's sampled token; with
            speculative decoding 1 + draft tokens) or "prefill" (a prompt chunk), its token count
            and computed_before (the slot's tokens before the entry).
- requests: one per task (the server's task id), with the slot, prompt length, cached prompt
            tokens reused, prompt tokens processed, generated tokens, finish reason (one of
            FINISH_REASONS), step indices and, when the log has timestamps, times in ms since the
            logger started. Extra columns: task, prompt_tokens (processed, rebuilt from the
            chunks), server_prompt_n / server_predicted_n / server_prompt_ms / server_predicted_ms
            (what the server printed in its timing block, when it did).
- events:   arrive, defer, requeue, admit, prompt_done, cache_hit, truncate, context_shift,
            kv_fail, batch_retry, decode_error, error, cancel, finish.
Unknown values stay NaN/<NA>/"": nothing is invented.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sim.trace import Trace, as_array, empty_table, table_from_columns

from .machine import Task
from .prefixes import ORIGIN_STYLE, STRIPPED, STYLE_NAMES, clock_from_prefix, origin_text, styles_seen

SOURCE = "llama-server log"
FINISH_REASONS = ("stop", "limit", "context", "cancelled", "error", "unknown")
RUN_SETTINGS = ("n_slots", "n_batch", "n_ubatch", "n_ctx", "n_ctx_slot", "kv_unified", "flash_attn")


def run_setting(run: dict, key: str):
    """One server run's setting as its start-up lines gave it (None: not printed)."""
    c = run["config"]
    return c.get(key, c.get("n_seq_max") if key == "n_slots" else None)

_EMPTY: dict[str, pd.DataFrame] = {}


def empty_of(name: str) -> pd.DataFrame:
    if name not in _EMPTY:
        _EMPTY[name] = empty_table(name)
    return _EMPTY[name].copy()


def int_array(vals: list):
    return pd.array(np.array(vals, dtype=float), dtype="Int64")   # None (unknown) becomes NaN, then NA


def build_trace(rd) -> Trace:
    """The Trace of what the reader rebuilt (rd: a LlamaLogReader at the end of the log)."""
    steps_n = rd.n_steps
    timed = rd.saw_ts
    # ---- batch
    if None in rd.b_tok:
        keep = [i for i, v in enumerate(rd.b_tok) if v is not None]
        sel = lambda lst: [lst[i] for i in keep]  # noqa: E731
    else:
        sel = lambda lst: lst  # noqa: E731
    b_step = as_array(sel(rd.b_step), np.int64)
    b_tok = as_array(sel(rd.b_tok), np.int64)
    b_kind = np.asarray(sel(rd.b_kind), dtype=object)
    b_samp = as_array(sel(rd.b_samp), bool)
    if rd.failed_steps and len(b_step):
        b_samp = b_samp & ~np.isin(b_step, np.fromiter(rd.failed_steps, dtype=np.int64))
    batch = table_from_columns("batch", {
        "step": b_step, "request": sel(rd.b_req), "slot": sel(rd.b_slot), "kind": b_kind,
        "tokens": b_tok, "computed_before": sel(rd.b_cb), "sampled": b_samp})
    # ---- steps
    idx = b_step - 1
    is_dec = b_kind == "decode"
    num = np.bincount(idx, weights=b_tok, minlength=steps_n)[:steps_n] if len(idx) else np.zeros(steps_n)
    dec = np.bincount(idx[is_dec], weights=b_tok[is_dec], minlength=steps_n)[:steps_n] if len(idx) \
        else np.zeros(steps_n)
    seqs = np.bincount(idx, minlength=steps_n)[:steps_n] if len(idx) else np.zeros(steps_n)
    step_no = np.arange(1, steps_n + 1, dtype=np.int64)
    if timed:
        start = np.array(rd.st_start, dtype=float)   # None (unknown) becomes NaN
        end = np.array(rd.st_end, dtype=float)
    else:
        start = (step_no - 1).astype(float)
        end = step_no.astype(float)
    steps = table_from_columns("steps", {
        "step": step_no, "start": start, "end": end, "num_tokens": num.astype(np.int64),
        "prefill_tokens": (num - dec).astype(np.int64), "decode_tokens": dec.astype(np.int64),
        "recompute_tokens": np.zeros(steps_n, dtype=np.int64), "num_seqs": seqs.astype(np.int64),
        "running": rd.st_running, "waiting": rd.st_waiting,
        "preempted": np.zeros(steps_n, dtype=np.int64), "finished": rd.st_finished,
        "arrived": rd.st_arrived, "idle": np.zeros(steps_n, dtype=bool),
        "swap_bytes": np.zeros(steps_n), "logged_tokens": int_array(rd.st_logged)})
    # ---- requests
    prefill_by_req: dict[str, int] = {}
    if len(b_step):
        pre = ~is_dec
        reqs_arr = np.asarray(sel(rd.b_req), dtype=object)
        if pre.any():
            keys, inv = np.unique(reqs_arr[pre].astype(str), return_inverse=True)
            sums = np.bincount(inv, weights=b_tok[pre])
            prefill_by_req = {k: int(v) for k, v in zip(keys.tolist(), sums.tolist())}
    tasks = list(rd.tasks.values())
    last_step = rd.n_steps
    kept, dropped_nonslot = [], 0
    for t in tasks:
        if not t.launched and t.error is None and not t.cancelled and not t.deferred \
                and t.arr_step is not None and t.arr_step < last_step:
            dropped_nonslot += 1  # queued but never given a slot nor refused: not a completion task
            continue
        kept.append(t)
    if dropped_nonslot:
        rd._warn(f"{dropped_nonslot} queued task(s) never took a slot (not completion tasks?); left out")
    reasons, gen, proc, cached = [], [], [], []
    for t in kept:
        r = _reason(rd, t)
        reasons.append(r)
        never_ran = t.finished and not t.launched and not t.midrun
        cut_start = t.midrun and not t.began   # began before the log: what it did before is unknown
        # a task none of whose `next token` lines was read falls back to the server's count
        if rd.saw_tok and (t.n_gen or t.t_en is None):
            g = t.n_gen if (t.launched or t.finished or t.n_gen or t.fs_step is not None) else None
        else:
            g = t.t_en if t.t_en is not None else (0 if never_ran else None)
        gen.append(g)
        if t.fin_ev >= 0:
            rd.e_detail[t.fin_ev] = r if g is None else f"{r}, {g} tokens generated"
        if t.key in prefill_by_req:
            p = prefill_by_req[t.key]
        elif t.key in rd.chunk_sums:
            p = rd.chunk_sums[t.key]
        elif t.fs_step is not None or cut_start:
            p = None                    # its chunks' sizes were never stated
        elif never_ran or (rd.saw_chunks and t.finished):
            p = 0
        else:
            p = t.t_pn
        proc.append(p)
        c = None if cut_start else t.cached if t.cached is not None else (0 if never_ran else None)
        if c is None and not cut_start and None not in (t.rel_n, t.shifted, t.t_pn, t.t_en):
            # no chunk lines (-lv 3): at release the slot holds the cached prefix, the processed
            # prompt and every generated token but the last (never fed back), less what context
            # shifts dropped
            c = t.rel_n + t.shifted - t.t_pn - max(t.t_en - 1, 0)
        cached.append(c)
    # unfinished tasks: nothing is known about their end; tasks that began before the log: their
    # first chunk is the log's only when its `new prompt` line is, their first token when a chunk
    # came before it
    fs_step, fs_t, ft_step, ft_t = [], [], [], []
    for t in kept:
        if not t.finished:
            t.fin_step = None
        known_fs = not t.midrun or t.began
        known_ft = known_fs or (t.fs_step is not None and t.ft_step is not None and t.fs_step <= t.ft_step)
        fs_step.append(t.fs_step if known_fs else None)
        fs_t.append(t.fs_t if known_fs else None)
        ft_step.append(t.ft_step if known_ft else None)
        ft_t.append(t.ft_t if known_ft else None)
    tcol = (lambda v, st: v) if timed else (lambda v, st: None if st is None else float(st))
    rows = {
        "request": [t.key for t in kept], "tenant": ["default"] * len(kept), "priority": [0] * len(kept),
        "prompt_len": [t.prompt_len if t.prompt_len is not None else t.prompt_sent for t in kept],
        "max_tokens": [t.max_tokens for t in kept],
        "arrival_step": [t.arr_step for t in kept],
        "arrival_time": [tcol(t.arr_t, t.arr_step) for t in kept],
        "first_scheduled_step": fs_step,
        "first_scheduled_time": [tcol(v, None if st is None else st - 1) for v, st in zip(fs_t, fs_step)],
        "first_token_step": ft_step,
        "first_token_time": [tcol(v, st) for v, st in zip(ft_t, ft_step)],
        "finish_step": [t.fin_step if t.finished else None for t in kept],
        "finish_time": [tcol(t.fin_t, t.fin_step) if t.finished else None for t in kept],
        "output_tokens": gen, "cached_tokens": cached,
        "preemptions": [0] * len(kept), "recomputed_tokens": [0] * len(kept),
        "rejected": [t.error is not None and t.fs_step is None for t in kept],
        "finish_reason": reasons, "slot": [t.slot for t in kept],
    }
    requests = table_from_columns("requests", {
        **rows, "task": int_array([t.task for t in kept]), "prompt_tokens": int_array(proc),
        "server_prompt_n": int_array([t.t_pn for t in kept]),
        "server_predicted_n": int_array([t.t_en for t in kept]),
        "server_prompt_ms": np.array([t.t_pms for t in kept], dtype=float),   # None becomes NaN
        "server_predicted_ms": np.array([t.t_ems for t in kept], dtype=float),
        # the log does not hold all its counting lines: it began before the log (neither its launch
        # nor its `new prompt` line is there), or runs past its end
        "partial": np.array([(t.midrun and not t.began) or not t.finished for t in kept], dtype=bool)})
    began_before = sum(t.midrun and not t.began for t in kept)
    if began_before:
        rd._warn(f"{began_before} task(s) began before the log does (no launch or `new prompt` line): each is "
                 f"on the slot its lines name, with the counts the log holds, marked partial")
    # cross-check the rebuilt counts against the server's own timing lines (a task that began
    # before the log has done more than the log shows)
    bad = [t.key for t, p in zip(kept, proc) if t.t_pn is not None and p is not None and p != t.t_pn
           and not (t.midrun and not t.began)]
    bad += [t.key for t, g in zip(kept, gen) if t.t_en is not None and g is not None and g != t.t_en
            and not (t.midrun and not t.began)]
    if bad:
        rd._warn(f"rebuilt token counts differ from the server's timing lines for task(s) "
                   f"{', '.join(sorted(set(bad))[:10])}")
    # ---- events
    e_time = rd.e_time
    if not timed:
        e_time = [float(s) for s in rd.e_step]
    events = table_from_columns("events", {"step": rd.e_step, "time": e_time, "request": rd.e_req,
                                            "kind": rd.e_kind, "detail": rd.e_detail})
    if len(events):
        order = np.argsort(events["step"].to_numpy(), kind="stable")
        events = events.iloc[order].reset_index(drop=True)
    # ---- meta
    cb = True if rd.mixed_batches else (False if rd.nocb_evidence else None)
    runs = rd.runs + [rd._run_record()]
    num = steps["num_tokens"].to_numpy()
    over = 0
    for rr in runs:
        nb = rr["config"].get("n_batch")
        if nb and rr["last_step"] >= rr["first_step"]:
            over += int((num[rr["first_step"] - 1:rr["last_step"]] > nb).sum())
    if over:
        rd._warn(f"{over} rebuilt batch(es) exceed the server's n_batch")
    cfg, differ = {}, []
    for k in RUN_SETTINGS:
        vals = [run_setting(rr, k) for rr in runs]
        vals = [v for v in vals if v is not None]
        cfg[k] = vals[0] if vals and all(v == vals[0] for v in vals) else None
        if len(set(map(str, vals))) > 1:
            differ.append(k)
    if differ:
        rd._warn(f"the server runs in this log differ in {', '.join(differ)}: the log as a whole has no one "
                   "value for them (each run's own are in the table of server runs)")
    cfg["cont_batching"] = cb
    first = next((rr for rr in runs if rr["build"]), {"build": None, "build_number": None, "build_commit": None})
    # the clock: the server's own timestamps, a collector's line prefix, or none (the model calls)
    pre = rd.prefixes
    by_prefix = timed and clock_from_prefix(pre)
    if by_prefix:
        clock = f"{STYLE_NAMES[int(pre[ORIGIN_STYLE])]} prefix"
        origin = f"the first prefixed line, {origin_text(pre)}"
    else:
        clock = "server timestamps" if timed else "model-call index"
        origin = "logger start" if timed else "model-call index"
    if int(pre[STRIPPED]):
        rd._warn(f"{int(pre[STRIPPED])} line(s) carry a foreign prefix ({', '.join(styles_seen(pre))}): each is "
                 f"read after it" + ("; the server printed no timestamps of its own, so the prefix's times are "
                                     "the clock" if by_prefix else ""))
    fmt = None
    if any(v is not None for v in rd.st_logged):
        fmt = "decoding batch, n_tokens = N (builds up to 2026-06)"
    elif steps_n:
        fmt = "decode: n_batch (effective) = B, off = O (builds from 2026-06)"
    meta = {
        "source": SOURCE, "name": rd.name, "build": first["build"], "build_number": first["build_number"],
        "build_commit": first["build_commit"], "time_unit": "ms" if timed else "steps",
        "time_origin": origin, "clock": clock, "line_prefixes": styles_seen(pre),
        **cfg,
        "cont_batching_evidence": ("a batch mixed decode tokens and a prompt chunk" if cb else
                                   "prompts waited while other slots generated" if cb is False else
                                   "not observed (not printed by the server)"),
        "config": cfg, "batch_format": fmt,
        "unparsed_lines": int(rd.unparsed), "unparsed_examples": list(rd.unparsed_examples),
        "warnings": list(rd.warnings), "bytes": int(rd.nbytes),
        "records": int(rd.records), "decode_attempts": int(sum(rd.st_attempts)),
        "failed_steps": sorted(rd.failed_steps), "batches_checked_against_log": int(rd.batch_checked),
        "batch_mismatches": len(rd.batch_mismatch), "runs": len(runs), "server_runs": runs,
        "num_requests": len(kept), "num_blocks": 0,
    }
    return Trace(requests=requests, steps=steps, batch=batch, events=events, kv=empty_of("kv"),
                 counters=empty_of("counters"), meta=meta)


def _reason(rd, t: Task) -> str:
    if not t.finished:
        return "unknown"
    if t.stop is not None:
        return t.stop
    if t.error is not None:
        return "error"
    if t.cancelled:
        return "cancelled"
    if (t.t_pn is not None or t.t_en is not None) and rd.saw_tok:
        return "stop"  # a normal end without a limit/EOS/context line: a stop word
    return "unknown"  # (stop lines are DEBUG, like `next token`: a log without those cannot tell)
