"""Figures of the "Batching and Scheduling" lesson, computed by the simulation core.

Each public function reproduces one lesson example from that example's inputs (the defaults)
and returns plain JSON-able data.  Values are rounded the way the lesson prints them
(Java's ``printf``: half-up on the shortest decimal form of the double), so the JSON shows
exactly the printed digits; a value printed with no decimals is an ``int``.

The scheduler-driven examples (static/continuous batching, policies, preemption's scheduler
part, tenant fairness, the mini vLLM loop) are computed elsewhere.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Sequence

from sim.cost import (
    CostModel,
    RooflineCost,
    UnitsCost,
    kv_bytes,
    link_preset,
    prefill_ms,
    recompute_ms,
    swap_ms,
    transfer_ms,
)
from sim.queueing import BernoulliArrivals, SlotServer


def printed(value: float, decimals: int) -> float | int:
    """``value`` as Java's ``%.<decimals>f`` shows it; an ``int`` when ``decimals`` is 0."""
    rounded = Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return int(rounded) if decimals == 0 else float(rounded)


# --------------------------------------------------------------------------------------------
# Example 1
# --------------------------------------------------------------------------------------------


def decode_utilization(batches: Sequence[int] = (1, 8, 16, 32), context_len: int = 4096,
                       hardware: str = "rtx4090", model: str = "8B") -> dict[str, Any]:
    """Lesson Example 1: decode steps of growing batches under the roofline model.

    Every sequence attends over ``context_len`` tokens.  Returns per-batch bytes moved, step
    time, total and per-sequence token rates and FLOP utilisation, plus how many such
    sequences fit in the card's memory next to the weights.
    """
    cost = RooflineCost(hardware, model)
    rows = []
    for batch in batches:
        contexts = [context_len] * batch
        step_ms = cost.step_time(batch, contexts)
        rows.append({
            "batch": batch,
            "bytes_gb": printed(cost.step_bytes(batch * context_len) / 1e9, 2),
            "step_ms": printed(step_ms, 2),
            "tok_s": printed(batch / (step_ms / 1000), 0),
            "tok_s_per_seq": printed(1 / (step_ms / 1000), 1),
            "flop_util_pct": printed(100 * cost.flop_utilization(batch, contexts), 2),
        })
    return {"rows": rows, "fit_sequences": cost.sequences_that_fit(context_len)}


# --------------------------------------------------------------------------------------------
# Examples 4 and 5: one long prompt joining steady decoders
# --------------------------------------------------------------------------------------------


def decoders_with_long_prompt(decoders: int, prompt_tokens: int, budget: int | None,
                              cost: CostModel, arrival_step: int = 1,
                              last_step: int | None = None) -> dict[str, Any]:
    """Step-by-step timeline of ``decoders`` decoding requests and one long prompt.

    Every step gives each decoder one token; from ``arrival_step`` on, the rest of the token
    ``budget`` (the whole prompt when ``budget`` is None) goes to the next prompt chunk.  The
    run lasts until ``last_step``, or until the prompt is done when ``last_step`` is None.

    Returns the steps (tokens, cost, clock), ``prompt_steps``, ``first_token`` (time from the
    prompt's arrival to its first token, at the end of its last chunk) and ``worst_gap`` (the
    longest wait between two tokens of a decoder).
    """
    if budget is not None and budget <= decoders:
        raise ValueError("the budget must leave room for a prompt chunk")
    left = prompt_tokens
    clock = arrived_at = first_token = worst_gap = 0.0
    prompt_steps = 0
    steps = []
    step = 0
    while (last_step is None and left > 0) or (last_step is not None and step < last_step):
        step += 1
        chunk = 0
        if step == arrival_step:
            arrived_at = clock
        if step >= arrival_step and left > 0:
            chunk = left if budget is None else min(left, budget - decoders)
        tokens = decoders + chunk
        step_cost = cost.step_time(tokens, ())
        clock += step_cost
        worst_gap = max(worst_gap, step_cost)
        if chunk:
            left -= chunk
            prompt_steps += 1
            if left == 0:
                first_token = clock - arrived_at
        steps.append({"step": step, "tokens": tokens, "chunk": chunk, "cost": step_cost, "clock": clock})
    return {"steps": steps, "prompt_steps": prompt_steps, "first_token": first_token, "worst_gap": worst_gap}


def prefill_interference(decoders: int = 4, prompt_tokens: int = 4000, arrival_step: int = 4,
                         last_step: int = 7) -> dict[str, Any]:
    """Lesson Example 4: a 4,000-token prompt processed whole in one step stalls 4 decoders.

    Cost is the lesson's units model.  Returns the decoders' worst inter-token gap and the
    long request's time to first token.
    """
    run = decoders_with_long_prompt(decoders, prompt_tokens, None, UnitsCost(), arrival_step, last_step)
    return {"worst_gap": printed(run["worst_gap"], 2), "long_first_token": printed(run["first_token"], 2)}


def chunked_prefill(budgets: Sequence[int] = (4004, 2048, 512, 256), decoders: int = 4,
                    prompt_tokens: int = 4000) -> list[dict[str, Any]]:
    """Lesson Example 5: the same prompt chunked under per-step token budgets.

    For each budget: steps the prompt needs, its first-token time, the decoders' worst gap.
    """
    rows = []
    for budget in budgets:
        run = decoders_with_long_prompt(decoders, prompt_tokens, budget, UnitsCost())
        rows.append({"budget": budget, "steps": run["prompt_steps"],
                     "first_token": printed(run["first_token"], 2),
                     "worst_gap": printed(run["worst_gap"], 2)})
    return rows


# --------------------------------------------------------------------------------------------
# Example 7
# --------------------------------------------------------------------------------------------


def littles_law(runs: Sequence[tuple[float, int | None]] = ((0.20, None), (0.36, None), (0.44, None),
                                                              (0.44, 16)),
                slots: int = 8, service_ticks: int = 20, ticks: int = 20_000,
                seed: int = 11) -> list[dict[str, Any]]:
    """Lesson Example 7: admission control and Little's law on a slotted server.

    Each run is ``(p, queue_limit)``: Bernoulli(p) arrivals per tick from Java's
    ``Random(seed)``, a queue bounded by ``queue_limit`` (None: unbounded).  Returns L, lambda,
    W, lambda*W and the rejected/arrived counts per run (``limit`` is None when unbounded).
    """
    rows = []
    for p, limit in runs:
        stats = SlotServer(slots, service_ticks, limit).run(BernoulliArrivals(p, seed), ticks)
        lam, w = stats.throughput, stats.mean_time_in_system
        rows.append({"p": p, "limit": limit, "L": printed(stats.mean_in_system, 2),
                     "lambda": printed(lam, 4), "W": printed(w, 2), "lambda_W": printed(lam * w, 2),
                     "rejected": stats.rejected, "arrived": stats.arrived})
    return rows


# --------------------------------------------------------------------------------------------
# Example 8 (cost lines only)
# --------------------------------------------------------------------------------------------


def preemption_costs(context_tokens: int = 2000, model: str = "8B", link: str = "pcie4-x16",
                     hardware: str = "rtx4090", efficiency: float = 0.5) -> dict[str, float]:
    """Lesson Example 8, last two lines: swapping vs recomputing a preempted 2,000-token context.

    Swap moves the KV cache out and back over PCIe 4.0 x16; recompute prefills the tokens
    again at ``efficiency`` of the GPU's peak.
    """
    return {"swap_ms": printed(swap_ms(context_tokens, model, link, round_trip=True), 1),
            "recompute_ms": printed(recompute_ms(context_tokens, model, hardware, efficiency), 1)}


# --------------------------------------------------------------------------------------------
# Example 10
# --------------------------------------------------------------------------------------------


def disaggregation(prompts: Sequence[int] = (1024, 8192, 32768), model: str = "8B",
                   hardware: str = "h100-sxm", efficiency: float = 0.5,
                   links: Sequence[str] = ("nvlink-h100", "infiniband-ndr", "ethernet-100g"),
                   ) -> list[dict[str, Any]]:
    """Lesson Example 10: KV-cache transfer time between prefill and decode pools.

    Per prompt length: the KV size in MiB, the prefill arithmetic time at ``efficiency`` of
    peak, and the transfer time over each link (NVLink, InfiniBand, Ethernet by default).
    """
    rows = []
    for prompt in prompts:
        size = kv_bytes(prompt, model)
        rows.append({"prompt": prompt, "kv_mib": printed(size / 2**20, 0),
                     "prefill_ms": printed(prefill_ms(prompt, model, hardware, efficiency), 1),
                     "link_ms": [printed(transfer_ms(size, link_preset(link)), 2) for link in links]})
    return rows


def figures() -> dict[str, Any]:
    """The cost-model figures of the lesson, keyed as in ``python -m sim lesson --json``.

    Example 8's costs are returned under ``preemption_costs`` for merging into ``preemption``.
    """
    return {"decode_utilization": decode_utilization(),
            "prefill_interference": prefill_interference(),
            "chunked_prefill": chunked_prefill(),
            "littles_law": littles_law(),
            "preemption_costs": preemption_costs(),
            "disaggregation": disaggregation()}
