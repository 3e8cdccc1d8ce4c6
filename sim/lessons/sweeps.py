"""Sweeps and comparisons behind the concept pages "Why batch", "Static vs continuous batching"
and "Prefill interference and chunked prefill" (lesson Examples 1 to 5), computed by the core.

- Example 1: :func:`decode_sweep` (roofline decode step vs batch size, as float columns),
  :func:`decode_limits` (what fits, where the KV cache outweighs the weights, where the step
  turns compute bound) and :func:`decode_table` (the lesson's printed table plus the bytes split).
- Examples 2/3: :func:`batching_workload` / :func:`batching_config` build the same requests for
  the "static" and the vLLM scheduler; :func:`batching_figures` reads steps, slot-steps,
  padding and finish steps off either trace; :func:`compare_batching` does both runs.
- Examples 4/5: :func:`interference_case` (a long prompt joining steady decoders, with a few
  decode-only steps after it), :func:`sweep_budgets` (the budgets worth drawing) and
  :func:`budget_sweep` (first token vs worst decoder gap per budget) and :func:`sweet_spot`.

Everything runs through ``sim.simulate`` / ``sim.cost``; nothing here imports Streamlit.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..limits import shown
from ..cost import CostModel, RooflineCost
from ..simulate import simulate
from ..trace import Trace
from ..workload import Request, Workload
from .lesson import decode_utilization, long_prompt_case, long_prompt_summary, printed

# --------------------------------------------------------------------------------------------
# Example 1: why batch
# --------------------------------------------------------------------------------------------


def decode_sweep(batches: Sequence[int], context_len: int = 4096, hardware: str = "rtx4090",
                 model: str = "8B") -> pd.DataFrame:
    """One row per batch size: decode steps where every sequence attends over ``context_len``.

    Columns: batch, weights_gb, kv_gb, bytes_gb (read per step), memory_ms, compute_ms, step_ms
    (the larger), tok_s (all sequences), tok_s_per_seq, flop_util_pct, bound ("memory" or
    "compute") and fits (the batch fits in memory next to
    the weights).
    """
    cost = RooflineCost(hardware, model)
    b = np.asarray(sorted({int(x) for x in batches if int(x) >= 1}), dtype=np.int64)
    kv_seq = context_len * cost.model.kv_bytes_per_token
    weights = np.full(len(b), cost.model.weight_bytes)
    memory_ms = np.array([cost.memory_ms(int(n) * context_len) for n in b])
    compute_ms = np.array([cost.compute_ms(int(n)) for n in b])
    step_ms = np.maximum(memory_ms, compute_ms)
    flops = b * cost.model.flops_per_token
    return pd.DataFrame({
        "batch": b,
        "weights_gb": weights / 1e9,
        "kv_gb": b * kv_seq / 1e9,
        "bytes_gb": (weights + b * kv_seq) / 1e9,
        "memory_ms": memory_ms,
        "compute_ms": compute_ms,
        "step_ms": step_ms,
        "tok_s": b / (step_ms / 1000),
        "tok_s_per_seq": 1000 / step_ms,
        "flop_util_pct": 100 * flops / (step_ms / 1000) / cost.hardware.peak_flops,
        "bound": np.where(compute_ms > memory_ms, "compute", "memory"),
        "fits": b <= cost.sequences_that_fit(context_len),
    })


def decode_limits(context_len: int = 4096, hardware: str = "rtx4090", model: str = "8B") -> dict[str, Any]:
    """The limits of decode batching for one card, model and context.

    ``fit_sequences``: sequences of ``context_len`` tokens that fit in memory next to the weights
    (the lesson's 36); ``kv_over_weights_batch``: the smallest batch whose KV cache reads exceed
    the weight reads (from there on the KV cache, not the weights, is most of every step's
    traffic); ``compute_bound_batch``: the smallest batch whose arithmetic outlasts its memory
    reads, or None when that never happens (each sequence's KV costs more time to read than its
    arithmetic takes, as at 4,096 tokens on an RTX 4090).
    """
    cost = RooflineCost(hardware, model)
    kv_seq = context_len * cost.model.kv_bytes_per_token
    w = cost.model.weight_bytes
    per_seq_compute = cost.model.flops_per_token / cost.hardware.peak_flops
    per_seq_memory = kv_seq / cost.hardware.bandwidth
    if per_seq_compute > per_seq_memory:
        compute_bound: int | None = math.floor(w / cost.hardware.bandwidth / (per_seq_compute - per_seq_memory)) + 1
    else:
        compute_bound = None
    return {"fit_sequences": cost.sequences_that_fit(context_len),
            "kv_over_weights_batch": math.floor(w / kv_seq) + 1,
            "compute_bound_batch": compute_bound,
            "weights_gb": w / 1e9, "kv_per_seq_gb": kv_seq / 1e9,
            "memory_gb": cost.hardware.memory_bytes / 1e9,
            "hardware": cost.hardware.name, "model": cost.model.name}


def decode_table(batches: Sequence[int] = (1, 8, 16, 32), context_len: int = 4096, hardware: str = "rtx4090",
                 model: str = "8B") -> list[dict[str, Any]]:
    """The lesson's Example 1 table (printed digits, :func:`sim.lessons.lesson.decode_utilization`) with
    the bytes of a step split into weights and KV cache (GB, 2 decimals)."""
    cost = RooflineCost(hardware, model)
    rows = decode_utilization(batches, context_len, hardware, model)["rows"]
    for r in rows:
        r["weights_gb"] = printed(cost.model.weight_bytes / 1e9, 2)
        r["kv_gb"] = printed(r["batch"] * context_len * cost.model.kv_bytes_per_token / 1e9, 2)
    return rows


# --------------------------------------------------------------------------------------------
# Examples 2 and 3: static vs continuous batching
# --------------------------------------------------------------------------------------------


def parse_int_list(text: str, what: str, lo: int, hi: int, max_items: int = 64) -> list[int]:
    """Whole numbers separated by commas or spaces ("12, 3 7"); ValueError with a plain message."""
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise ValueError(f"give at least one {what}")
    if len(parts) > max_items:
        raise ValueError(f"at most {max_items} {what}s, not {len(parts)}")
    out = []
    for p in parts:
        try:
            v = int(p)
        except ValueError:
            raise ValueError(f"{what}s must be whole numbers, not {shown(p)}") from None
        if not lo <= v <= hi:
            raise ValueError(f"each {what} must be from {lo:,} to {hi:,}, not {shown(v)}")
        out.append(v)
    return out


def batching_workload(output_lens: Sequence[int], arrivals: Sequence[int] | None = None) -> Workload:
    """Requests ``r0, r1, ...`` that generate ``output_lens`` tokens (a 1-token prompt each, the
    lesson's mapping), arriving before step ``arrivals[i] + 1`` (all at once when None)."""
    arrivals = list(arrivals) if arrivals else [0] * len(output_lens)
    if len(arrivals) != len(output_lens):
        raise ValueError(f"{len(arrivals)} arrival steps for {len(output_lens)} requests")
    return Workload([Request(f"r{i}", prompt_len=1, max_tokens=int(n), arrival_step=int(a))
                     for i, (n, a) in enumerate(zip(output_lens, arrivals))], name="batching")


def batching_config(scheduler: str, slots: int) -> dict[str, Any]:
    """``slots`` places in the batch under the "static" or the vLLM ("vllm") scheduler."""
    return {"scheduler": scheduler, "max_num_seqs": int(slots)}


def batching_figures(trace: Trace, slots: int) -> dict[str, Any]:
    """Steps, slot-steps and finish steps of a batching run, as Examples 2 and 3 count them.

    ``steps``: the last step that ran anything; ``slot_steps``: every place of the batch in every
    step that ran (busy steps x slots); ``useful_tokens``: sampled tokens; ``utilization``: their
    share of the slot-steps; ``padding_slot_steps``: places held by a finished member waiting
    for its group (static batching); ``empty_slot_steps``: places nobody held;
    ``finish_steps`` / ``mean_finish``: when each result returned; ``mean_latency``: finish
    step minus arrival step; ``join_steps``: steps at which a waiting request joined.
    """
    s = trace.steps
    busy = s[~s["idle"].to_numpy(dtype=bool)]
    steps = int(busy["step"].max()) if len(busy) else 0
    slot_steps = len(busy) * int(slots)
    b = trace.batch
    useful = int(b["sampled"].sum())
    padding = int((b["kind"] == "padding").sum())
    r = trace.requests
    finish = [int(v) for v in r["finish_step"]]
    arrival = [int(v) for v in r["arrival_step"]]
    ev = trace.events
    joins = ev["step"][ev["kind"].isin(["admit", "resume"]).to_numpy()]
    return {"steps": steps, "slot_steps": slot_steps, "useful_tokens": useful,
            "utilization": useful / slot_steps if slot_steps else 0.0,
            "padding_slot_steps": padding, "empty_slot_steps": slot_steps - len(b),
            "finish_steps": finish, "mean_finish": sum(finish) / len(finish) if finish else 0.0,
            "mean_latency": sum(f - a for f, a in zip(finish, arrival)) / len(finish) if finish else 0.0,
            "join_steps": sorted({int(v) for v in joins})}


def compare_batching(output_lens: Sequence[int], slots: int = 4,
                     arrivals: Sequence[int] | None = None) -> dict[str, dict[str, Any]]:
    """:func:`batching_figures` of the same requests under static and continuous batching."""
    wl = batching_workload(output_lens, arrivals)
    return {name: batching_figures(simulate(wl, batching_config(sched, slots)), slots)
            for name, sched in (("static", "static"), ("continuous", "vllm"))}


# --------------------------------------------------------------------------------------------
# Examples 4 and 5: prefill interference and chunked prefill
# --------------------------------------------------------------------------------------------

LESSON_BUDGETS = (4004, 2048, 512, 256)
MAX_PROMPT_STEPS = 200  # the page's smallest budget splits the prompt into at most this many steps


def min_budget(decoders: int, prompt_tokens: int, max_prompt_steps: int = MAX_PROMPT_STEPS) -> int:
    """The smallest budget that leaves a chunk and needs at most ``max_prompt_steps`` steps."""
    return decoders + max(1, -(-prompt_tokens // max_prompt_steps))


def interference_case(decoders: int, prompt_tokens: int, budget: int | None, arrival_step: int = 4,
                      tail_steps: int = 3) -> tuple[Workload, dict, int]:
    """Example 4's run: ``decoders`` decoding, a ``prompt_tokens`` prompt arriving before
    ``arrival_step`` and chunked by ``budget`` (None or at least decoders + prompt: whole), and
    ``tail_steps`` decode-only steps after its last chunk. Returns (workload, config, horizon)
    as :func:`sim.lessons.lesson.long_prompt_case`; read the run with :func:`sim.lessons.lesson.long_prompt_summary`."""
    if budget is not None and budget >= decoders + prompt_tokens:
        budget = decoders + prompt_tokens
    room = prompt_tokens if budget is None else budget - decoders
    if room <= 0:
        raise ValueError("the budget must leave room for a prompt chunk")
    prompt_end = arrival_step + -(-prompt_tokens // room) - 1
    wl, config, horizon = long_prompt_case(decoders, prompt_tokens, budget, arrival_step, prompt_end + tail_steps)
    wl.name = "interference"
    return wl, config, horizon


def sweep_budgets(decoders: int, prompt_tokens: int, extra: Sequence[int] = (), points: int = 40,
                  max_prompt_steps: int = MAX_PROMPT_STEPS) -> list[int]:
    """Budgets worth drawing, ascending: for a number of prompt steps k, the smallest budget
    that needs only k steps (decoders + ceil(prompt / k): a larger budget with the same k only
    makes each step longer). k runs over 1..12 and then about ``points`` values spread
    geometrically up to ``max_prompt_steps``; ``extra`` budgets (the lesson's) are added when valid."""
    ks = set(range(1, 13))
    top = min(max_prompt_steps, prompt_tokens)
    if top > 12:
        ks |= {int(round(v)) for v in np.geomspace(12, top, max(points - 12, 2))}
    out = {decoders + -(-prompt_tokens // k) for k in ks if k <= top}
    lo, hi = min_budget(decoders, prompt_tokens, max_prompt_steps), decoders + prompt_tokens
    out |= {int(b) for b in extra if lo <= int(b) <= hi}
    return sorted(out)


def budget_sweep(decoders: int, prompt_tokens: int, cost: CostModel, budgets: Sequence[int],
                 tolerance: float = 0.05) -> dict[str, Any]:
    """Example 5 over many budgets: per budget the prompt's steps, the long request's first
    token and the decoders' worst gap (same units as ``cost``), each run through the vLLM
    scheduler (:func:`sim.lessons.lesson.decoders_with_long_prompt`'s case).

    ``sweet_spot``: the budget with the earliest first token among those whose worst gap is
    within ``tolerance`` (0.05 = 5%) of the smallest worst gap of the sweep (``best_gap``): the
    decoders barely notice the prompt, and the prompt wastes the fewest steps.
    """
    rows = []
    for budget in sorted({int(b) for b in budgets}):
        wl, config, horizon = long_prompt_case(decoders, prompt_tokens, budget)
        run = long_prompt_summary(simulate(wl, config, cost=cost, columns=True), horizon)
        rows.append({"budget": budget, "steps": run["prompt_steps"], "first_token": run["first_token"],
                     "worst_gap": run["worst_gap"]})
    if not rows:
        raise ValueError("no budget to sweep")
    return {"rows": rows, **sweet_spot(rows, tolerance), "time_unit": cost.time_unit}


def sweet_spot(rows: Sequence[dict[str, Any]], tolerance: float = 0.05) -> dict[str, Any]:
    """{"sweet_spot": row, "best_gap", "tolerance"} for budget_sweep rows: the row with the
    earliest first token among those whose worst gap is within ``tolerance`` of the best."""
    best_gap = min(r["worst_gap"] for r in rows)
    ok = [r for r in rows if r["worst_gap"] <= best_gap * (1 + tolerance) + 1e-12]
    sweet = min(ok, key=lambda r: (r["first_token"], r["worst_gap"], r["budget"]))
    return {"sweet_spot": sweet, "best_gap": best_gap, "tolerance": tolerance}
