"""What a read log comes to: its server runs, the CLI's summary, the server's settings, and its
workload, ready to re-simulate (resim.py runs it).

    trace = read_llama_log("server.log")
    summary(trace)                  # {build, batches, tasks: [...], unparsed_lines}
    wl = workload_from_trace(trace) # simulate(wl) / simulate(wl, {"scheduler": "vllm"})
"""
from __future__ import annotations

import random
import zlib

import numpy as np
import pandas as pd

from sim.trace import Trace
from sim.workload import MIN_TOKEN_ID, VOCAB_SIZE, Request, Workload, output_token

from .build import RUN_SETTINGS, run_setting


def server_runs_table(trace: Trace) -> pd.DataFrame:
    """One row per server run in the log (a restart, or logs concatenated): run, its first and
    last model call, build, and the settings its start-up lines printed (None: not printed)."""
    runs = trace.meta.get("server_runs") or []
    out = pd.DataFrame({"run": [rr["run"] for rr in runs], "first call": [rr["first_step"] for rr in runs],
                        "last call": [rr["last_step"] for rr in runs],
                        "calls": [max(0, rr["last_step"] - rr["first_step"] + 1) for rr in runs],
                        "build": [rr["build"] for rr in runs]})
    for k in RUN_SETTINGS:   # counts as whole numbers; the rest as the log wrote them (builds differ: 0 / auto)
        vals = [run_setting(rr, k) for rr in runs]
        if all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in vals):
            out[k] = pd.array(vals, dtype="Int64")
        else:
            out[k] = pd.Series([None if v is None else str(v).lower() for v in vals], dtype=object)
    return out


def int_or_none(v):
    if v is None or v is pd.NA:
        return None
    try:
        if np.isnan(v):
            return None
    except TypeError:
        pass
    return int(v)


def summary(trace: Trace) -> dict:
    """The CLI's summary object: build, clock, batches, tasks [{task, slot, prompt_tokens,
    cached_tokens, generated_tokens, finish, partial}], unparsed_lines. A partial task is one whose
    lines the log does not all hold (it began before the log, or runs past its end)."""
    r = trace.requests
    tasks = []
    if len(r):
        cols = {c: r[c].tolist() for c in ("slot", "prompt_tokens", "cached_tokens", "output_tokens",
                                           "finish_reason", "task", "request", "partial") if c in r.columns}
        for i in range(len(r)):
            task = int_or_none(cols["task"][i]) if "task" in cols else None
            tasks.append({
                "task": task if task is not None else cols["request"][i],
                "slot": int_or_none(cols["slot"][i]),
                "prompt_tokens": int_or_none(cols["prompt_tokens"][i]) if "prompt_tokens" in cols else None,
                "cached_tokens": int_or_none(cols["cached_tokens"][i]),
                "generated_tokens": int_or_none(cols["output_tokens"][i]),
                "finish": cols["finish_reason"][i] or "unknown",
                "partial": bool(cols["partial"][i]) if "partial" in cols else False,
            })
    return {"build": trace.meta.get("build"), "clock": trace.meta.get("clock"),
            "batches": int(len(trace.steps)), "tasks": tasks,
            "unparsed_lines": int(trace.meta.get("unparsed_lines", 0))}


def llama_config(trace: Trace) -> dict:
    """The server settings a re-simulation needs, as the log shows them: slots, n_batch,
    cont_batching (inferred from the batches; the server default True when not observable) and
    cache_prompt (True when any task reused cached prompt tokens)."""
    m = trace.meta
    r = trace.requests
    cached = r["cached_tokens"].astype("Float64").fillna(0).to_numpy(dtype=float) if len(r) else np.zeros(0)
    slots = m.get("n_slots") or (int(r["slot"].max()) + 1 if len(r) and r["slot"].notna().any() else 1)
    cb = m.get("cont_batching")
    return {"slots": int(slots), "n_batch": int(m.get("n_batch") or 2048), "n_ubatch": m.get("n_ubatch"),
            "cont_batching": True if cb is None else bool(cb), "cache_prompt": bool((cached > 0).any()),
            "n_ctx": m.get("n_ctx"), "n_ctx_slot": m.get("n_ctx_slot")}


def workload_from_trace(trace: Trace, *, timed: bool = False, block_size: int = 16) -> Workload:
    """The log's workload, ready for sim.simulate: one request per task that took a slot, in
    arrival order, with its prompt length and the number of tokens it generated (as max_tokens).

    Arrivals are the model-call index at which each task was queued (arrival_step), so any cost
    model works; timed=True also sets arrival_time (the log's ms; use a cost model in ms).
    Prompt token ids are built so that a task shares with the previous task of its slot exactly
    the prefix the server reused from its cache (cached_tokens): the simulated prompt caches hit
    where the real one did. The config (SchedulerConfig names) carries the server's settings:
    max_num_seqs = slots, max_num_batched_tokens = n_batch, cont_batching, enable_prefix_caching =
    cache_prompt, and scheduler "llama_slots"; pass {"scheduler": "vllm"} to simulate() to compare."""
    lc = llama_config(trace)
    r = trace.requests
    reqs: list[Request] = []
    slot_hist: dict[int, list[int]] = {}
    if len(r):
        order = np.lexsort((np.arange(len(r)),
                            r["first_scheduled_step"].astype("Float64").fillna(np.inf).to_numpy(dtype=float)))
        launched = r.iloc[order]
        for row in launched.itertuples(index=False):
            plen = int_or_none(row.prompt_len)
            if plen is None or plen < 1 or int_or_none(row.first_scheduled_step) is None:
                continue
            out = max(1, int_or_none(row.output_tokens) or 1)
            rid = str(row.request)
            rng = random.Random(zlib.crc32(rid.encode()) + (1 << 41))
            cached = min(int_or_none(row.cached_tokens) or 0, plen - 1)
            slot = int_or_none(row.slot)
            prev = slot_hist.get(slot, []) if slot is not None else []
            k = min(cached, len(prev))
            ids = prev[:k] + [rng.randrange(MIN_TOKEN_ID, VOCAB_SIZE) for _ in range(plen - k)]
            if slot is not None:
                slot_hist[slot] = ids + [output_token(rid, i) for i in range(out)]
            arr_step = int_or_none(row.arrival_step)
            if arr_step is None:
                arr_step = max(0, (int_or_none(row.first_scheduled_step) or 1) - 1)
            at = None
            if timed and trace.time_unit == "ms":
                v = row.arrival_time if not pd.isna(row.arrival_time) else row.first_scheduled_time
                at = None if pd.isna(v) else float(v)
            reqs.append(Request(id=rid, prompt_len=plen, max_tokens=out, arrival_step=int(arr_step),
                                arrival_time=at, prompt_token_ids=tuple(ids)))
    # arrival order, as the server queued them (ties: the log's task order)
    pos = {rid: i for i, rid in enumerate(r["request"].tolist())} if len(r) else {}
    reqs.sort(key=lambda q: (q.arrival_time if q.arrival_time is not None else 0.0, q.arrival_step, pos[q.id]))
    # KV: the server's n_ctx cells, or at least room for every slot to hold the longest request
    # (llama-server never preempts; it shifts the context instead, which the simulator does not model)
    longest = max((q.prompt_len + q.max_tokens for q in reqs), default=1)
    blocks = lc["slots"] * -(-longest // block_size) + 2
    if lc.get("n_ctx"):
        blocks = max(blocks, -(-int(lc["n_ctx"]) // block_size) + 1)
    config = {"scheduler": "llama_slots", "max_num_seqs": lc["slots"], "max_num_batched_tokens": lc["n_batch"],
              "cont_batching": lc["cont_batching"], "enable_prefix_caching": lc["cache_prompt"],
              "num_gpu_blocks": int(blocks), "block_size": int(block_size)}
    return Workload(requests=reqs, config=config, name=f"{trace.meta.get('name') or 'llama-server log'} (tasks)")
