"""Admission control and Little's law on the scheduler: the lesson's Example 7 as a Trace.

The lesson's slotted server is the vLLM scheduler with one step per
tick: ``slots`` running requests (max_num_seqs), each holding its slot for ``service_ticks``
steps (a 1-token prompt generating ``service_ticks`` tokens), Bernoulli(p) arrivals drawn from
Java's Random(seed) exactly as the lesson's program draws them, and a waiting queue bounded by
``queue_limit`` (the scheduler's max_queued_requests: an arrival that finds that many
requests waiting is rejected, vLLM's HTTP 503).

Measured on the step clock over the first ``ticks`` steps (sim.analysis.littles_law_over_time
with clock="step"), a run reproduces the lesson's L, λ, W, λW and rejected/arrived counts to
the printed digit; the Trace adds what the table cannot show: how the estimates move as the
run plays, and which arrivals were turned away when.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .analysis import littles_law_over_time
from .queueing import BernoulliArrivals
from .trace import Trace
from .workload import Request, Workload

BLOCK_SIZE = 16


@dataclass(frozen=True)
class QueueSetup:
    """One run of the lesson's slotted server."""

    p: float = 0.44  # arrival probability per tick
    queue_limit: int = 0  # waiting requests allowed (0 = no limit)
    slots: int = 8
    service_ticks: int = 20
    ticks: int = 20_000
    seed: int = 11

    @property
    def capacity(self) -> float:
        """Requests per tick the server finishes when every slot is busy."""
        return self.slots / self.service_ticks

    @property
    def load(self) -> float:
        """Offered load ρ = p / capacity (above 1 the queue grows without bound)."""
        return self.p / self.capacity

    def workload(self) -> Workload:
        """The arrivals: one request at each tick whose Java Random draw is below p."""
        if not 0 < self.p <= 1:
            raise ValueError("the arrival probability must be in (0, 1]")
        if self.ticks < 1 or self.slots < 1 or self.service_ticks < 1:
            raise ValueError("ticks, slots and service ticks must be positive")
        src = BernoulliArrivals(self.p, self.seed)
        reqs = [Request(f"q{t}", prompt_len=1, max_tokens=self.service_ticks, arrival_step=t)
                for t in range(self.ticks) if src.arrivals(t)]
        wl = Workload(reqs, config=self.config())
        wl.name = f"littles_law_p{self.p:g}_limit{self.queue_limit or 'none'}"
        return wl

    def config(self) -> dict:
        """Scheduler settings: the slots, the queue limit, and room enough that only slots bind."""
        per_request = math.ceil((self.service_ticks + 1) / BLOCK_SIZE)
        return {"max_num_seqs": self.slots, "max_queued_requests": self.queue_limit,
                "num_gpu_blocks": self.slots * per_request + 1, "block_size": BLOCK_SIZE,
                "max_num_batched_tokens": max(self.slots, 8), "policy": "fcfs"}


def curves(trace: Trace, horizon: int | None = None) -> pd.DataFrame:
    """Per step (tick) up to `horizon`: in_system, waiting, running, the cumulative arrived,
    rejected and finished counts, and the running estimates L, lambda, W, lambda_W (step clock)."""
    ll = littles_law_over_time(trace, clock="step")
    s = trace.steps
    steps = s["step"].to_numpy(dtype=np.int64)
    r = trace.requests
    arrival = r["arrival_step"].to_numpy(dtype=float, na_value=np.nan) + 1  # joins before step a+1
    rej = r["rejected"].to_numpy(dtype=bool)
    fin = r["finish_step"].to_numpy(dtype=float, na_value=np.nan)

    def upto(values: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.sort(values[~np.isnan(values)]), steps, side="right")

    out = ll.assign(waiting=s["waiting"].to_numpy(), running=s["running"].to_numpy(),
                    arrived=upto(arrival), rejected=upto(np.where(rej, arrival, np.nan)), finished=upto(fin))
    if horizon is not None:
        out = out[out["step"] <= horizon]
    return out.reset_index(drop=True)


def window_stats(trace: Trace, horizon: int) -> dict:
    """The lesson's figures for the first `horizon` ticks: L, lambda, W, lambda_W, rejected, arrived."""
    c = curves(trace, horizon)
    if c.empty:
        return {"L": math.nan, "lambda": math.nan, "W": math.nan, "lambda_W": math.nan, "rejected": 0, "arrived": 0}
    last = c.iloc[-1]
    return {"L": float(last["L"]), "lambda": float(last["lambda"]), "W": float(last["W"]),
            "lambda_W": float(last["lambda_W"]), "rejected": int(last["rejected"]), "arrived": int(last["arrived"])}


def rejections(trace: Trace, horizon: int | None = None) -> pd.DataFrame:
    """The rejected arrivals: request, tenant, tokens (prompt + output asked for), step (the
    step it would have joined) and the queue length then."""
    r = trace.requests
    r = r[r["rejected"].to_numpy(dtype=bool)]
    steps = r["arrival_step"].to_numpy(dtype=np.int64) + 1
    waiting = trace.steps.set_index("step")["waiting"]
    out = pd.DataFrame({"request": r["request"].to_numpy(), "tenant": r["tenant"].astype(str).to_numpy(),
                        "tokens": (r["prompt_len"] + r["max_tokens"]).to_numpy(dtype=np.int64), "step": steps,
                        "waiting": waiting.reindex(steps - 1).fillna(0).to_numpy(dtype=np.int64)})
    if horizon is not None:
        out = out[out["step"] <= horizon]
    return out.reset_index(drop=True)
