"""Run a workload through a scheduler and record the Trace (and, optionally, the oracle's
per-step JSONL, for conformance with shared/vllm/cases).

Steps are numbered 1, 2, ... A request with arrival_step a joins right before step a+1, in
workload order among equals (the oracle's rule). With arrival_time set, a request joins at
the first step that starts at or after that time, and an idle engine jumps to it.
Each step's duration comes from a cost model; the trace's time unit is the model's.
"""
from __future__ import annotations

import json
from typing import Callable, TextIO

from .cost import UnitsCost
from .scheduler import SchedulerConfig, Seq, StepPlan, VllmScheduler
from .trace import Trace, kv_table, table_from_columns
from .workload import Workload

BATCH_COLUMNS = ("step", "request", "slot", "kind", "tokens", "computed_before", "sampled")
SWAP_LINK_BYTES_PER_S = 31.5e9  # PCIe 4.0 x16, the lesson's swap link (Example 8)

SCHEDULERS: dict[str, Callable] = {"vllm": VllmScheduler}


def register_scheduler(name: str):
    def deco(cls):
        SCHEDULERS[name] = cls
        return cls
    return deco


def max_model_len_for(workload: Workload, cfg: SchedulerConfig) -> int:
    need = max((r.prompt_len + r.max_tokens for r in workload.requests), default=1)
    mml = int(cfg.max_model_len or need)
    if need > mml:
        raise ValueError(f"a request needs {need} tokens but max_model_len is {mml}")
    return max(mml, int(cfg.long_prefill_token_threshold or 0))


def check_fits(workload: Workload, cfg: SchedulerConfig, mml: int) -> None:
    usable = cfg.num_gpu_blocks - 1
    if -(-mml // cfg.block_size) > usable:
        raise ValueError(
            f"the longest request ({mml} tokens) needs {-(-mml // cfg.block_size)} blocks of "
            f"{cfg.block_size}, more than the {usable} usable blocks (num_gpu_blocks - 1, the null "
            f"block); vLLM refuses to start in that case")


class Recorder:
    """Collects the Trace's columns as the run goes (plain lists: cheap appends)."""

    def __init__(self):
        self.steps = {k: [] for k in ("step", "start", "end", "num_tokens", "prefill_tokens", "decode_tokens",
                                      "recompute_tokens", "num_seqs", "running", "waiting", "free_blocks",
                                      "free_blocks_after_schedule", "cached_free_blocks", "preempted",
                                      "finished", "arrived", "idle", "swap_bytes")}
        self.batch = {k: [] for k in BATCH_COLUMNS}
        self.events = {k: [] for k in ("step", "time", "request", "kind", "detail")}
        self.counters = {k: [] for k in ("step", "tenant", "value")}

    def event(self, step, time, rid, kind, detail=""):
        e = self.events
        e["step"].append(step)
        e["time"].append(time)
        e["request"].append(rid)
        e["kind"].append(kind)
        e["detail"].append(detail)


def resolve_config(workload: Workload, config) -> tuple[SchedulerConfig, str]:
    """The workload's config overridden by `config`; returns (config, scheduler name)."""
    if isinstance(config, SchedulerConfig):
        return config, "vllm"
    merged = dict(workload.config)
    merged.update(config or {})
    mode = merged.pop("scheduler", "vllm")
    return SchedulerConfig.from_dict(merged), mode


def simulate(workload: Workload, config: dict | SchedulerConfig | None = None, *, cost=None,
             oracle_out: TextIO | None = None, max_steps: int = 10_000_000,
             progress: Callable[[int, int], None] | None = None) -> Trace:
    """Run `workload` (its own config, overridden by `config`) and return the Trace."""
    cfg, mode = resolve_config(workload, config)
    from . import llamaslots  # noqa: F401  (registers "llama_slots"; imported here to avoid a cycle)
    cost = cost or UnitsCost()
    mml = max_model_len_for(workload, cfg)
    check_fits(workload, cfg, mml)
    try:
        sched = SCHEDULERS[mode](cfg, mml)
    except KeyError:
        raise ValueError(f"unknown scheduler {mode!r}; known: {', '.join(SCHEDULERS)}") from None

    reqs = workload.requests
    timed = any(r.arrival_time is not None for r in reqs)
    if timed:
        order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival_time or 0.0, i))
    else:
        order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival_step, i))
    pending = [reqs[i] for i in order]
    rec = Recorder()
    info: dict[str, dict] = {r.id: {} for r in reqs}
    seqs: dict[str, Seq] = {}
    pool = sched.pool
    caching = cfg.enable_prefix_caching
    # swap traffic costs link time; the abstract "units" model has no seconds scale, so none there
    to_unit = {"ms": 1000.0, "s": 1.0}.get(getattr(cost, "time_unit", ""), 0.0)
    swap_unit_per_byte = to_unit / SWAP_LINK_BYTES_PER_S
    n_total, n_done = len(pending), 0
    pi = 0
    step, clock = 0, 0.0
    stalled = 0
    idle_dt = cost.step_time(1, [1])  # an idle tick: the engine polls, no model pass
    tracks_counters = bool(sched.waiting.state()) or cfg.policy == "vtc"

    while n_done < n_total:
        if step >= max_steps:
            raise RuntimeError(f"step cap {max_steps} reached with {n_total - n_done} requests unfinished")
        if timed and pi < n_total and not sched.has_requests():
            nxt = pending[pi].arrival_time or 0.0
            clock = max(clock, nxt)  # an idle engine waits for the next arrival
        step += 1
        pool.step = step
        arrived = []
        while pi < n_total and (
                (pending[pi].arrival_time or 0.0) <= clock if timed else pending[pi].arrival_step < step):
            r = pending[pi]
            pi += 1
            seq = sched.add_request(r)
            seqs[r.id] = seq
            arrived.append(r.id)
            info[r.id]["arrival_step"] = step - 1 if not timed else step
            info[r.id]["arrival_time"] = r.arrival_time if timed else clock
            rec.event(step, clock, r.id, "arrive", f"{r.prompt_len} prompt tokens")
            if seq.status == "rejected":
                n_done += 1
                info[r.id]["rejected"] = True
                rec.event(step, clock, r.id, "reject", "queue limit")
        if not sched.has_requests():
            _record_idle(rec, step, clock, idle_dt, pool, arrived, caching, oracle_out)
            clock += idle_dt
            continue

        plan = sched.schedule()
        stalled = 0 if (plan.entries or plan.admitted or plan.preempted) else stalled + 1
        if stalled > 1000:
            raise RuntimeError(f"no progress for 1000 steps at step {step}: the KV pool is too small for "
                               f"the requests in flight")
        dt = cost.step_time_totals(plan.num_tokens, plan.context_tokens)
        swap_bytes = plan.swapped_in_bytes + plan.swapped_out_bytes
        dt += swap_bytes * swap_unit_per_byte
        finished = sched.update(plan)
        end = clock + dt
        n_done += len(finished)
        _record_step(rec, sched, plan, finished, step, clock, end, arrived, info, caching, oracle_out,
                     swap_bytes)
        if tracks_counters:
            for t, v in sched.waiting.state().items():
                rec.counters["step"].append(step)
                rec.counters["tenant"].append(t)
                rec.counters["value"].append(v)
        clock = end
        if progress is not None and step % 1000 == 0:
            progress(n_done, n_total)

    return _build_trace(workload, cfg, mode, cost, rec, info, seqs, pool)


def _record_idle(rec, step, clock, dt, pool, arrived, caching, oracle_out):
    s = rec.steps
    for k, v in (("step", step), ("start", clock), ("end", clock + dt), ("num_tokens", 0), ("prefill_tokens", 0),
                 ("decode_tokens", 0), ("recompute_tokens", 0), ("num_seqs", 0), ("running", 0),
                 ("waiting", 0), ("free_blocks", pool.num_free), ("free_blocks_after_schedule", pool.num_free),
                 ("cached_free_blocks", pool.num_cached_free if caching else None), ("preempted", 0),
                 ("finished", 0), ("arrived", len(arrived)), ("idle", True), ("swap_bytes", 0.0)):
        s[k].append(v)
    if oracle_out is not None:
        line = {"step": step, "arrived": arrived, "scheduled": {}, "computed_before": {}, "sampled": [],
                "preempted": [], "finished": [], "free_blocks": pool.num_free,
                "free_blocks_after_schedule": pool.num_free, "running": [], "waiting": [], "idle": True}
        oracle_out.write(json.dumps(line) + "\n")


def _record_step(rec, sched, plan: StepPlan, finished, step, start, end, arrived, info, caching, oracle_out,
                 swap_bytes):
    pool = sched.pool
    ents = plan.entries
    b = rec.batch
    b["step"].extend([step] * len(ents))
    b["request"].extend([e.seq.id for e in ents])
    b["slot"].extend([e.seq.slot if e.seq.slot >= 0 else info[e.seq.id].get("slot", -1) for e in ents])
    b["kind"].extend([e.kind for e in ents])
    b["tokens"].extend([e.tokens for e in ents])
    b["computed_before"].extend([e.computed_before for e in ents])
    b["sampled"].extend([e.sampled for e in ents])
    prefill = decode = recompute = 0
    sampled_ids = []
    for e in ents:
        kind = e.kind
        if kind == "decode":
            decode += e.tokens
            if e.sampled:
                sampled_ids.append(e.seq.id)
            continue  # a decoding request was scheduled and sampled before; nothing new to note
        seq = e.seq
        d = info[seq.id]
        if e.sampled:
            sampled_ids.append(seq.id)
            if "first_token_step" not in d:
                d["first_token_step"] = step
                d["first_token_time"] = end
        if kind == "recompute":
            recompute += e.tokens
            d["recomputed_tokens"] = d.get("recomputed_tokens", 0) + e.recomputed
        else:
            prefill += e.tokens
        if "first_scheduled_step" not in d:
            d["first_scheduled_step"] = step
            d["first_scheduled_time"] = start
            d["cached_tokens"] = e.computed_before
    for seq in plan.admitted:
        d = info[seq.id]
        kind = "resume" if d.get("preemptions") else "admit"
        rec.event(step, start, seq.id, kind, f"slot {seq.slot}")
        d["slot"] = seq.slot
        if plan.swapped_in_bytes and kind == "resume" and d.get("swapped"):
            rec.event(step, start, seq.id, "swap_in", "")
            d["swapped"] = False
    for seq in plan.preempted:
        d = info[seq.id]
        d["preemptions"] = d.get("preemptions", 0) + 1
        if seq.swapped_blocks:
            d["swapped"] = True
            rec.event(step, start, seq.id, "preempt", f"swap out {seq.swapped_blocks} blocks")
            rec.event(step, start, seq.id, "swap_out", f"{seq.swapped_blocks} blocks")
        else:
            rec.event(step, start, seq.id, "preempt", f"recompute {seq.recompute_until} tokens")
    for seq in finished:
        d = info[seq.id]
        d["finish_step"] = step
        d["finish_time"] = end
        d["output_tokens"] = seq.num_output
        d["finish_reason"] = "length"
        rec.event(step, end, seq.id, "finish", f"{seq.num_output} tokens")
    s = rec.steps
    for k, v in (("step", step), ("start", start), ("end", end), ("num_tokens", plan.num_tokens),
                 ("prefill_tokens", prefill), ("decode_tokens", decode), ("recompute_tokens", recompute),
                 ("num_seqs", len(plan.entries)), ("running", len(sched.running)),
                 ("waiting", len(sched.waiting)), ("free_blocks", pool.num_free),
                 ("free_blocks_after_schedule", plan.free_after_schedule),
                 ("cached_free_blocks", pool.num_cached_free if caching else None),
                 ("preempted", len(plan.preempted)), ("finished", len(finished)), ("arrived", len(arrived)),
                 ("idle", False), ("swap_bytes", swap_bytes)):
        s[k].append(v)
    if oracle_out is not None:
        line = {"step": step, "arrived": arrived,
                "scheduled": {e.seq.id: e.tokens for e in plan.entries},
                "computed_before": {e.seq.id: e.computed_before for e in plan.entries},
                "sampled": sampled_ids,
                "preempted": [s.id for s in plan.preempted],
                "finished": [s.id for s in finished],
                "free_blocks": pool.num_free, "free_blocks_after_schedule": plan.free_after_schedule,
                "running": [s.id for s in sched.running], "waiting": [s.id for s in sched.waiting]}
        if caching:
            line["cached_free_blocks"] = pool.num_cached_free
        oracle_out.write(json.dumps(line) + "\n")


def _build_trace(workload, cfg, mode, cost, rec, info, seqs, pool) -> Trace:
    reqs = workload.requests
    ds = [info[r.id] for r in reqs]
    rows = {"request": [r.id for r in reqs], "tenant": [r.tenant for r in reqs],
            "priority": [r.priority for r in reqs], "prompt_len": [r.prompt_len for r in reqs],
            "max_tokens": [r.max_tokens for r in reqs],
            "preemptions": [d.get("preemptions", 0) for d in ds],
            "recomputed_tokens": [d.get("recomputed_tokens", 0) for d in ds],
            "rejected": [d.get("rejected", False) for d in ds],
            "finish_reason": ["rejected" if d.get("rejected") else d.get("finish_reason", "") for d in ds]}
    for k in ("arrival_step", "arrival_time", "first_scheduled_step", "first_scheduled_time", "first_token_step",
              "first_token_time", "finish_step", "finish_time", "output_tokens", "cached_tokens", "slot"):
        rows[k] = [d.get(k) for d in ds]
    requests = table_from_columns("requests", rows)
    steps = table_from_columns("steps", rec.steps)
    batch = table_from_columns("batch", rec.batch)
    events = table_from_columns("events", rec.events)
    counters = table_from_columns("counters", rec.counters)
    kv = kv_table(pool.log_step, pool.log_block, pool.log_req, pool.log_op)
    meta = {"source": "simulator", "scheduler": mode, "time_unit": cost.time_unit,
            "cost_model": cost.describe() if hasattr(cost, "describe") else type(cost).__name__,
            "config": cfg.to_dict(), "num_blocks": cfg.num_gpu_blocks, "block_size": cfg.block_size,
            "workload": workload.name, "num_requests": len(workload.requests)}
    return Trace(requests=requests, steps=steps, batch=batch, events=events, kv=kv, counters=counters, meta=meta)


def oracle_jsonl(workload: Workload, config: dict | None = None) -> str:
    """The per-step JSONL the vLLM oracle writes, from this simulator."""
    import io
    buf = io.StringIO()
    simulate(workload, config, oracle_out=buf)
    return buf.getvalue()


