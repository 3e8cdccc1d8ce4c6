"""Figures of the "Batching and Scheduling" lesson, computed by the simulation core.

Each public function reproduces one lesson example from that example's inputs (the defaults)
and returns plain JSON-able data.  Values are rounded the way the lesson prints them
(Java's ``printf``: half-up on the shortest decimal form of the double), so the JSON shows
exactly the printed digits; a value printed with no decimals is an ``int``.

The scheduler-driven examples (2, 3, 6, 8, 9 and 12) build a Workload from the example's
inputs, run it through ``sim.simulate`` (the vLLM scheduler, or the "static" one) and read the
figures off the Trace.  The mappings, used throughout:

- a request that "generates N tokens" is ``prompt_len=1, max_tokens=N``: its first step
  processes the 1-token prompt and samples token 1, each later step samples one more;
- "one server, one job at a time" is ``max_num_seqs=1``;
- simulator steps are numbered from 1, and a request with ``arrival_step=a`` joins right before
  step ``a+1``; so a job arriving at lesson time ``a`` that the trace first schedules at step
  ``s`` started at lesson time ``s-1`` and waited ``s-1-a``.

Where an example counts its steps differently (Examples 8 and 9), the function's docstring
says how lesson steps map onto trace steps.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Sequence

import numpy as np

from ..cost import (
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
from ..simulate import RunColumns, simulate
from ..trace import Trace
from ..workload import Request, Workload
from .admission import QueueSetup, window_stats


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
# Examples 2 and 3: static and continuous batching
# --------------------------------------------------------------------------------------------

LESSON_OUTPUT_LENS = (12, 3, 7, 20, 5, 9, 4, 15)


def _generating(lengths: Sequence[int], prefix: str = "r") -> Workload:
    """Requests ``r0, r1, ...`` that generate ``lengths`` tokens, all arriving at once."""
    return Workload([Request(f"{prefix}{i}", prompt_len=1, max_tokens=int(n)) for i, n in enumerate(lengths)])


def _busy_steps(trace: Trace) -> int:
    steps = trace.steps
    return int(steps["step"][~steps["idle"].to_numpy(dtype=bool)].max())


def _batching_figures(trace: Trace, slots: int) -> dict[str, Any]:
    """Steps, useful tokens (sampled tokens), slot-steps (every place of the batch in every
    step, used or not: steps x slots), finish step per request and their mean."""
    steps = _busy_steps(trace)
    finish = [int(v) for v in trace.requests["finish_step"]]
    return {"steps": steps,
            "useful_tokens": int(trace.batch["sampled"].sum()),
            "slot_steps": steps * slots,
            "finish_steps": finish,
            "mean_finish": sum(finish) / len(finish)}


def static_batching(output_lens: Sequence[int] = LESSON_OUTPUT_LENS, batch: int = 4) -> dict[str, Any]:
    """Lesson Example 2: the requests run in groups of ``batch`` under the "static" scheduler.

    A group runs until its longest member is done; finished members stay in the batch as
    padding rows (kind "padding"), and every member finishes when its group ends.
    """
    trace = simulate(_generating(output_lens), {"scheduler": "static", "max_num_seqs": batch})
    return _batching_figures(trace, batch)


def continuous_batching(output_lens: Sequence[int] = LESSON_OUTPUT_LENS, capacity: int = 4) -> dict[str, Any]:
    """Lesson Example 3: the same requests under the vLLM scheduler with ``capacity`` sequences.

    ``join_steps``: the steps at which a waiting request joined the batch (admit or resume
    events), the lines the lesson marks "<- a waiting request joined".
    """
    trace = simulate(_generating(output_lens), {"max_num_seqs": capacity})
    out = _batching_figures(trace, capacity)
    ev = trace.events
    joins = ev["step"][ev["kind"].isin(["admit", "resume"]).to_numpy()]
    out["join_steps"] = sorted({int(v) for v in joins})
    return out


# --------------------------------------------------------------------------------------------
# Examples 4 and 5: one long prompt joining steady decoders
# --------------------------------------------------------------------------------------------


def long_prompt_case(decoders: int, prompt_tokens: int, budget: int | None, arrival_step: int = 1,
                     last_step: int | None = None) -> tuple[Workload, dict, int]:
    """The workload and config of :func:`decoders_with_long_prompt`, and its last observed step.

    Decoders ``d0, d1, ...`` are 1-token prompts that keep generating (their step-1 "prompt"
    token is the lesson's step-1 decode token); the request ``long`` arrives right before
    ``arrival_step`` and stops after its first token, so every step up to the returned horizon
    holds exactly the decoders' tokens plus the next chunk, as in the lesson.
    """
    if budget is not None and budget <= decoders:
        raise ValueError("the budget must leave room for a prompt chunk")
    chunk_room = prompt_tokens if budget is None else budget - decoders
    prompt_end = arrival_step + -(-prompt_tokens // chunk_room) - 1
    horizon = max(last_step or 0, prompt_end)
    reqs = [Request(f"d{i}", prompt_len=1, max_tokens=horizon + 1) for i in range(decoders)]
    reqs.append(Request("long", prompt_len=prompt_tokens, max_tokens=1, arrival_step=arrival_step - 1))
    config = {"max_num_batched_tokens": budget or decoders + prompt_tokens, "max_num_seqs": decoders + 1,
              "block_size": 16, "num_gpu_blocks": 2 + (decoders * (horizon + 2) + prompt_tokens) // 16 + decoders}
    return Workload(reqs), config, horizon


def long_prompt_summary(trace: Trace | RunColumns, horizon: int) -> dict[str, Any]:
    """What :func:`decoders_with_long_prompt` reports, read off a run of :func:`long_prompt_case`
    (its Trace, or the RunColumns a budget sweep asks simulate for)."""
    # plain arrays, not pandas indexing: a budget sweep calls this once per budget
    s, b = trace.steps, trace.batch
    st, tok = np.asarray(s["step"], dtype=np.int64), np.asarray(s["num_tokens"], dtype=np.int64)
    start, end = np.asarray(s["start"], dtype=float), np.asarray(s["end"], dtype=float)
    b_step, b_req = np.asarray(b["step"], dtype=np.int64), np.asarray(b["request"], dtype=object)
    is_long = b_req == "long"
    chunk_at = dict(zip(b_step[is_long].tolist(), np.asarray(b["tokens"], dtype=np.int64)[is_long].tolist()))
    steps = [{"step": i, "tokens": n, "chunk": chunk_at.get(i, 0), "cost": e - a, "clock": e}
             for i, n, a, e in zip(st.tolist(), tok.tolist(), start.tolist(), end.tolist()) if i <= horizon]
    d0 = b_step[(b_req == "d0") & np.asarray(b["sampled"], dtype=bool) & (b_step <= horizon)]
    end_of = dict(zip(st.tolist(), end.tolist()))
    times = np.array([0.0] + [end_of.get(i, np.nan) for i in d0.tolist()])
    r = trace.requests
    k = int(np.flatnonzero(np.asarray(r["request"], dtype=object) == "long")[0])
    first = float(np.asarray(r["first_token_time"], dtype=float)[k] - np.asarray(r["arrival_time"], dtype=float)[k])
    return {"steps": steps, "prompt_steps": int(is_long.sum()), "first_token": first,
            "worst_gap": float(np.diff(times).max())}


def decoders_with_long_prompt(decoders: int, prompt_tokens: int, budget: int | None,
                              cost: CostModel, arrival_step: int = 1,
                              last_step: int | None = None) -> dict[str, Any]:
    """Step-by-step timeline of ``decoders`` decoding requests and one long prompt.

    Every step gives each decoder one token; from ``arrival_step`` on, the rest of the token
    ``budget`` (the whole prompt when ``budget`` is None) goes to the next prompt chunk.  The
    run lasts until ``last_step``, or until the prompt is done when ``last_step`` is None.

    Returns the steps (tokens, cost, clock), ``prompt_steps``, ``first_token`` (time from the
    prompt's arrival to its first token, at the end of its last chunk) and ``worst_gap`` (the
    longest wait between two tokens of a decoder).  Runs through the vLLM scheduler
    (:func:`long_prompt_case`).
    """
    workload, config, horizon = long_prompt_case(decoders, prompt_tokens, budget, arrival_step, last_step)
    return long_prompt_summary(simulate(workload, config, cost=cost), horizon)


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
# Example 6
# --------------------------------------------------------------------------------------------

# (name, arrival, length, priority)
LESSON_JOBS = (("A", 0, 40, 1), ("B", 1, 5, 0), ("C", 2, 10, 1), ("D", 3, 2, 1), ("E", 4, 20, 0), ("F", 5, 3, 1))
POLICY_NAMES = {"fcfs": "fcfs", "shortest_first": "sjf", "priority": "priority"}


def jobs_workload(jobs: Sequence[tuple[str, int, int, int]]) -> Workload:
    """Jobs ``(name, arrival, length, priority)`` as requests on a server that runs one job at
    a time (``max_num_seqs=1``); a job of length N generates N tokens, one per step."""
    return Workload([Request(name, prompt_len=1, max_tokens=length, arrival_step=arrival, priority=prio)
                     for name, arrival, length, prio in jobs], config={"max_num_seqs": 1})


def one_server(jobs: Sequence[tuple[str, int, int, int]], policy: str, aging: float = 0.0) -> Trace:
    """The jobs of :func:`jobs_workload` under ``policy`` (``aging``: key credit per step
    waited, for the keyed policies sjf, spf and priority_aging)."""
    return simulate(jobs_workload(jobs), {"policy": policy, "aging": aging})


def _start_times(trace: Trace) -> dict[str, int]:
    """Each job's start on the lesson's clock: first scheduled step - 1."""
    r = trace.requests
    return {str(k): int(v) - 1 for k, v in zip(r["request"], r["first_scheduled_step"])}


def policies(jobs: Sequence[tuple[str, int, int, int]] = LESSON_JOBS, stream_jobs: int = 40,
             stream_every: int = 2, stream_length: int = 2, long_length: int = 30) -> dict[str, Any]:
    """Lesson Example 6: FCFS, shortest-first and priority on one server, and starvation.

    Per policy: the order jobs start in and the mean wait (start - arrival), printed to 2
    decimals.  Shortest-first is the "sjf" policy (by output length, ties by arrival) and
    priority is vLLM's (smaller value first, ties by arrival).  ``starvation_long_start``: when
    a ``long_length`` job that arrived at 0 starts under shortest-first, while a
    ``stream_length`` job arrives every ``stream_every`` units.
    """
    out: dict[str, Any] = {}
    arrival = {name: a for name, a, _, _ in jobs}
    for key, policy in POLICY_NAMES.items():
        start = _start_times(one_server(jobs, policy))
        order = sorted(start, key=lambda name: start[name])
        wait = sum(start[name] - arrival[name] for name in order) / len(order)
        out[key] = {"order": order, "mean_wait": printed(wait, 2)}
    stream = [("LONG", 0, long_length, 1)] + [(f"s{t}", t * stream_every, stream_length, 1)
                                              for t in range(stream_jobs)]
    out["starvation_long_start"] = _start_times(one_server(stream, "sjf"))["LONG"]
    return out


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
        setup = QueueSetup(p=p, queue_limit=limit or 0, slots=slots, service_ticks=service_ticks,
                           ticks=ticks, seed=seed)
        st = window_stats(simulate(setup.workload()), ticks)  # the scheduler, one step per tick
        rows.append({"p": p, "limit": limit, "L": printed(st["L"], 2), "lambda": printed(st["lambda"], 4),
                     "W": printed(st["W"], 2), "lambda_W": printed(st["lambda_W"], 2),
                     "rejected": st["rejected"], "arrived": st["arrived"]})
    return rows


# --------------------------------------------------------------------------------------------
# Example 8
# --------------------------------------------------------------------------------------------


def _state_after(trace: Trace, step: int) -> tuple[dict[str, int], list[str]]:
    """Running requests with their computed (KV) tokens, and the waiting ones, at the end of
    trace step ``step`` (from the events and batch tables)."""
    ev = trace.events
    ev = ev[(ev["step"].to_numpy() <= step) & ev["kind"].isin(["admit", "resume", "preempt", "finish"]).to_numpy()]
    last = ev.groupby("request", sort=False)["kind"].last()
    b = trace.batch
    b = b[b["step"].to_numpy() <= step]
    held = (b["computed_before"] + b["tokens"]).groupby(b["request"], sort=False).last()
    running, waiting = {}, []
    for rid in trace.requests["request"]:
        kind = last.get(rid)
        if kind in ("admit", "resume"):
            running[str(rid)] = int(held[rid])
        elif kind != "finish":
            waiting.append(str(rid))
    return running, waiting


def preemption(prompts: Sequence[int] = (60, 50, 70, 40), blocks: int = 20, block_size: int = 16,
               steps: int = 40, max_tokens: int = 60) -> dict[str, Any]:
    """Lesson Example 8: four requests decode until KV memory runs out; FCFS preempts by recompute.

    The workload: requests ``r0..r3`` with the given prompts, ``blocks`` usable blocks (the
    config's num_gpu_blocks is ``blocks + 1``: vLLM's null block), the vLLM scheduler.
    Offset: the lesson starts with the prompts already in the cache at its step 0, so the
    simulator's step 1 is their prefill and lesson step s is trace step s + 1.  ``max_tokens``
    only has to outlast the ``steps`` observed steps (nothing finishes inside them).

    Returns the first preemption (its lesson step, victim, blocks freed, KV tokens dropped),
    the tokens to recompute over the observed steps, the KV tokens of each running request
    and the waiting requests after ``steps`` lesson steps, and the swap/recompute costs of a
    2,000-token context (:func:`preemption_costs`).
    """
    if max_tokens <= steps + 1:
        raise ValueError("max_tokens must outlast the observed steps")
    wl = Workload([Request(f"r{i}", prompt_len=p, max_tokens=max_tokens) for i, p in enumerate(prompts)])
    trace = simulate(wl, {"num_gpu_blocks": blocks + 1, "block_size": block_size})
    last = steps + 1  # trace step of the lesson's last step
    ev = trace.events
    pre = ev[(ev["kind"] == "preempt").to_numpy() & (ev["step"].to_numpy() <= last)]
    b, kv = trace.batch, trace.kv
    dropped = []
    for step, rid in zip(pre["step"], pre["request"]):
        before = b[(b["request"] == rid).to_numpy() & (b["step"].to_numpy() < step)]
        dropped.append(int(before["tokens"].sum()) if len(before) else 0)
    first_step, victim = int(pre["step"].iloc[0]), str(pre["request"].iloc[0])
    freed = int(((kv["step"] == first_step) & (kv["request"] == victim) & (kv["op"] == "release")).sum())
    running, waiting = _state_after(trace, last)
    return {"preempt_step": first_step - 1, "victim": victim, "freed_blocks": freed,
            "recompute_tokens": sum(dropped), "final_tokens": running, "waiting": waiting,
            **preemption_costs()}



def preemption_costs(context_tokens: int = 2000, model: str = "8B", link: str = "pcie4-x16",
                     hardware: str = "rtx4090", efficiency: float = 0.5) -> dict[str, float]:
    """Lesson Example 8, last two lines: swapping vs recomputing a preempted 2,000-token context.

    Swap moves the KV cache out and back over PCIe 4.0 x16; recompute prefills the tokens
    again at ``efficiency`` of the GPU's peak.
    """
    return {"swap_ms": printed(swap_ms(context_tokens, model, link, round_trip=True), 1),
            "recompute_ms": printed(recompute_ms(context_tokens, model, hardware, efficiency), 1)}


# --------------------------------------------------------------------------------------------
# Example 9
# --------------------------------------------------------------------------------------------


def tenant_run(policy: str, tenant_cap: int = 0, slots: int = 4, steps_per_request: int = 10,
               a_requests: int = 12, b_requests: int = 2, b_arrival: int = 1) -> Trace:
    """Tenant A sends ``a_requests`` at step 0, tenant B ``b_requests`` at ``b_arrival``; every
    request runs ``steps_per_request`` steps (``max_tokens``), ``slots`` at a time."""
    reqs = [Request(f"A{i}", 1, steps_per_request, arrival_step=0, tenant="A") for i in range(a_requests)]
    reqs += [Request(f"B{i}", 1, steps_per_request, arrival_step=b_arrival, tenant="B") for i in range(b_requests)]
    return simulate(Workload(reqs), {"max_num_seqs": slots, "policy": policy, "tenant_cap": tenant_cap})


def _tenant_finishes(trace: Trace, tenant: str) -> dict[str, int]:
    """{request: finish step} for ``tenant``, ordered as the lesson prints them: by finish
    step, and among requests finishing together the later-admitted first (the lesson's loop
    removes finished requests from the end of its running list)."""
    r = trace.requests
    r = r[(r["tenant"] == tenant).to_numpy()]
    rows = sorted(zip(r["finish_step"], r["first_scheduled_step"], r.index, r["request"]),
                  key=lambda x: (int(x[0]), -int(x[1]), -int(x[2])))
    return {str(rid): int(f) for f, _, _, rid in rows}


def tenant_fairness(slots: int = 4, cap: int = 3) -> dict[str, dict[str, int]]:
    """Lesson Example 9: when tenant B's two requests finish, under FCFS, round-robin by
    tenant, and round-robin with a per-tenant cap of ``cap`` running requests.

    Offset: the lesson's loop numbers steps from 0 and reports a request started at step t as
    finished "@t+10"; its step t is the simulator's step t+1 (arrival_step t joins before it),
    so the reported number equals the trace's finish_step.
    """
    return {"fcfs": _tenant_finishes(tenant_run("fcfs", slots=slots), "B"),
            "round_robin": _tenant_finishes(tenant_run("round_robin", slots=slots), "B"),
            f"round_robin_cap{cap}": _tenant_finishes(tenant_run("round_robin", cap, slots=slots), "B")}


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


# --------------------------------------------------------------------------------------------
# Example 12
# --------------------------------------------------------------------------------------------


def mini_vllm(requests: Sequence[tuple[str, int, int]] = (("A", 10, 4), ("B", 6, 6), ("C", 5, 3)),
              blocks: int = 7, block_size: int = 4, budget: int = 8, max_num_seqs: int = 3) -> list[dict[str, Any]]:
    """Lesson Example 12: the reduced vLLM loop, run by the vLLM scheduler (the traced case
    ``lesson_abc_8blocks``: ``num_gpu_blocks = blocks + 1`` for the null block).

    Per step, as the lesson prints it: the tokens each request gets (in the scheduler's order:
    running requests first, then admitted ones), the free blocks after scheduling, the
    preempted requests and the requests that finished.
    """
    wl = Workload([Request(rid, prompt_len=p, max_tokens=m) for rid, p, m in requests])
    trace = simulate(wl, {"num_gpu_blocks": blocks + 1, "block_size": block_size,
                          "max_num_batched_tokens": budget, "max_num_seqs": max_num_seqs})
    b, ev = trace.batch, trace.events
    rows = []
    for step, free in zip(trace.steps["step"], trace.steps["free_blocks_after_schedule"]):
        here = b[b["step"].to_numpy() == step]
        at = ev[ev["step"].to_numpy() == step]
        rows.append({"step": int(step),
                     "scheduled": {str(r): int(n) for r, n in zip(here["request"], here["tokens"])},
                     "free_blocks_after_scheduling": int(free),
                     "preempted": [str(r) for r in at["request"][(at["kind"] == "preempt").to_numpy()]],
                     "finished": [str(r) for r in at["request"][(at["kind"] == "finish").to_numpy()]]})
    return rows


def figures() -> dict[str, Any]:
    """Every example's figures, keyed as in ``python -m sim lesson --json``, in lesson order."""
    return {"decode_utilization": decode_utilization(),
            "static_batching": static_batching(),
            "continuous_batching": continuous_batching(),
            "prefill_interference": prefill_interference(),
            "chunked_prefill": chunked_prefill(),
            "policies": policies(),
            "littles_law": littles_law(),
            "preemption": preemption(),
            "tenant_fairness": tenant_fairness(),
            "disaggregation": disaggregation(),
            "mini_vllm": mini_vllm()}
