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

The curves read only a few counts of a run (a QueueRun). Under ``QueueSetup.config()`` the
scheduler is a first-come-first-served queue with ``slots`` servers and a fixed service of
``service_ticks`` steps: every running request decodes one token a step (the token budget is
at least ``slots``), admission is never refused for blocks (the pool holds every slot's whole
request), and nobody is preempted. ``slotted_run`` counts that queue tick by tick, without the
scheduler's per-token bookkeeping (bench/bench_sim.py: 35-50 times faster for the lesson's
20,000 ticks), and gives the same QueueRun as the scheduler's Trace; the tests compare the two
tick for tick.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis import littles_law_on_steps
from ..trace import Trace
from ..workload import Request, Workload
from .queueing import BernoulliArrivals

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


@dataclass(frozen=True)
class QueueRun:
    """What the Little's-law curves read from a run. Per step (1, 2, ...): the requests waiting
    and running after it. Per request, in workload order: its id, tenant and tokens (prompt +
    output asked for), arrival_step, finish_step (NaN: not finished within the run) and whether
    it was rejected. last_step: the step the scheduler's run ends at (its last request done;
    None when not known)."""

    steps: np.ndarray
    waiting: np.ndarray
    running: np.ndarray
    request: np.ndarray
    tenant: np.ndarray
    tokens: np.ndarray
    arrival_step: np.ndarray
    finish_step: np.ndarray
    rejected: np.ndarray
    last_step: int | None

    @classmethod
    def from_trace(cls, trace: Trace) -> QueueRun:
        s, r = trace.steps, trace.requests
        return cls(steps=s["step"].to_numpy(dtype=np.int64), waiting=s["waiting"].to_numpy(dtype=np.int64),
                   running=s["running"].to_numpy(dtype=np.int64), request=r["request"].to_numpy(dtype=object),
                   tenant=r["tenant"].astype(str).to_numpy(dtype=object),
                   tokens=(r["prompt_len"] + r["max_tokens"]).to_numpy(dtype=np.int64),
                   arrival_step=r["arrival_step"].to_numpy(dtype=float, na_value=np.nan),
                   finish_step=r["finish_step"].to_numpy(dtype=float, na_value=np.nan),
                   rejected=r["rejected"].to_numpy(dtype=bool), last_step=len(s))


def slotted_run(setup: QueueSetup, workload: Workload | None = None, horizon: int | None = None) -> QueueRun:
    """The scheduler's run of `workload` (default: setup.workload()) under setup.config(), counted
    tick by tick as the slotted server it is there (see the module's note), up to step `horizon`
    (default setup.ticks) or the step the last request is done, whichever comes first.

    The scheduler's order within a step: arrivals join (rejected when the queue already holds
    queue_limit), then the waiting are admitted in order into free slots, then the requests that
    reached their last token leave. A request admitted at step k samples its first token there
    and its last (the service_ticks-th) at step k + service_ticks - 1.

    last_step, when every arrival has joined by the horizon (always at setup.ticks): the
    requests still waiting then take the slots in turn, service_ticks steps each, so the run's
    end follows without counting on."""
    wl = setup.workload() if workload is None else workload
    horizon = setup.ticks if horizon is None else horizon
    reqs = wl.requests
    n, slots, service, limit = len(reqs), setup.slots, setup.service_ticks, setup.queue_limit
    arrival = [r.arrival_step for r in reqs]
    if any(b < a for a, b in zip(arrival, arrival[1:])):
        raise ValueError("the workload's arrivals must be in order")
    finish = np.full(n, np.nan)
    rejected = np.zeros(n, dtype=bool)
    waiting: deque[int] = deque()
    running: deque[tuple[int, int]] = deque()  # (last step, request): they finish in admission order
    waiting_after, running_after = [], []
    step = nxt = done = 0
    while done < n and step < horizon:   # the simulator stops when every request is done
        step += 1
        while nxt < n and arrival[nxt] < step:   # arrival_step a joins before step a + 1
            if limit and len(waiting) >= limit:
                rejected[nxt] = True
                done += 1
            else:
                waiting.append(nxt)
            nxt += 1
        while waiting and len(running) < slots:
            running.append((step + service - 1, waiting.popleft()))
        waiting_after.append(len(waiting))
        while running and running[0][0] == step:
            finish[running.popleft()[1]] = step
            done += 1
        running_after.append(len(running))
    return QueueRun(steps=np.arange(1, step + 1, dtype=np.int64), waiting=np.array(waiting_after, dtype=np.int64),
                    running=np.array(running_after, dtype=np.int64),
                    request=np.array([r.id for r in reqs], dtype=object),
                    tenant=np.array([r.tenant for r in reqs], dtype=object),
                    tokens=np.array([r.prompt_len + r.max_tokens for r in reqs], dtype=np.int64),
                    arrival_step=np.array(arrival, dtype=float), finish_step=finish, rejected=rejected,
                    last_step=None if nxt < n else _last_step(step, slots, service, len(waiting),
                                                              [f for f, _ in running]))


def _last_step(end: int, slots: int, service: int, waiting: int, running: list[int]) -> int:
    """The step the last request finishes, from the queue after step `end`: `waiting` requests
    not yet admitted, and the last steps of those `running`."""
    if not waiting:
        return max([end, *running])
    # the step at which each slot admits next: after its request's last step, or the next step
    admits = sorted([f + 1 for f in running] + [end + 1] * (slots - len(running)))
    last = waiting - 1   # the last one admitted; every slot frees within service steps of `end`,
    # so the waiting go round the slots in this order, one round every `service` steps
    return admits[last % slots] + (last // slots) * service + service - 1


def _queue_run(run: Trace | QueueRun) -> QueueRun:
    return QueueRun.from_trace(run) if isinstance(run, Trace) else run


def curves(run: Trace | QueueRun, horizon: int | None = None) -> pd.DataFrame:
    """Per step (tick) up to `horizon`: in_system, waiting, running, the cumulative arrived,
    rejected and finished counts, and the running estimates L, lambda, W, lambda_W (step clock)."""
    q = _queue_run(run)
    admitted = ~q.rejected
    ll = littles_law_on_steps(q.steps, q.arrival_step[admitted], q.finish_step[admitted])
    steps = q.steps
    arrival = q.arrival_step + 1  # joins before step a+1

    def upto(values: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.sort(values[~np.isnan(values)]), steps, side="right")

    out = ll.assign(waiting=q.waiting, running=q.running, arrived=upto(arrival),
                    rejected=upto(np.where(q.rejected, arrival, np.nan)), finished=upto(q.finish_step))
    if horizon is not None:
        out = out[out["step"] <= horizon]
    return out.reset_index(drop=True)


def window_stats(run: Trace | QueueRun, horizon: int) -> dict:
    """The lesson's figures for the first `horizon` ticks: L, lambda, W, lambda_W, rejected, arrived."""
    return final_stats(curves(run, horizon))


def final_stats(c: pd.DataFrame) -> dict:
    """window_stats from curves already made: their last row's figures."""
    if c.empty:
        return {"L": math.nan, "lambda": math.nan, "W": math.nan, "lambda_W": math.nan, "rejected": 0, "arrived": 0}
    last = c.iloc[-1]
    return {"L": float(last["L"]), "lambda": float(last["lambda"]), "W": float(last["W"]),
            "lambda_W": float(last["lambda_W"]), "rejected": int(last["rejected"]), "arrived": int(last["arrived"])}


def rejections(run: Trace | QueueRun, horizon: int | None = None) -> pd.DataFrame:
    """The rejected arrivals: request, tenant, tokens (prompt + output asked for), step (the
    step it would have joined) and the queue length then."""
    q = _queue_run(run)
    rej = q.rejected
    steps = q.arrival_step[rej].astype(np.int64) + 1
    waiting = pd.Series(q.waiting, index=q.steps)
    out = pd.DataFrame({"request": q.request[rej], "tenant": q.tenant[rej], "tokens": q.tokens[rej], "step": steps,
                        "waiting": waiting.reindex(steps - 1).fillna(0).to_numpy(dtype=np.int64)})
    if horizon is not None:
        out = out[out["step"] <= horizon]
    return out.reset_index(drop=True)
