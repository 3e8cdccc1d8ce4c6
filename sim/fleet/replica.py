"""One replica of a fleet: a full scheduler with its own config and KV pool, stepped on the
fleet's clock as far as the router needs to know.

The single-replica simulator (sim.simulate) runs a whole workload in one loop. A fleet's
router must see every replica as it is when each request arrives, so a replica here runs
step by step: `advance(t)` runs every step that starts before t (a request that reaches the
replica at t joins the first step that starts at or after t, sim.simulate's rule), and the
requests the router sends arrive through `dispatch`. The steps, the batch and the KV log are
recorded by sim.simulate's own Recorder, so each replica's Trace is an ordinary Trace.

With vLLM's async scheduling (config `async_scheduling`), a step is one call of the engine's
batch-queue loop, as sim.simulate runs it (sim/async_sched.py): the call schedules step n, then
applies step n-1's output, so a request finishes (and leaves the replica) in the call after the
step that sampled its last token, at that step's end.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import replace

from ..async_sched import AsyncVllmScheduler, BatchQueue
from ..cost import CalibratedCost, RooflineCost, UnitsCost
from ..registry import SCHEDULERS
from ..scheduler import SchedulerConfig
from ..simulate import SWAP_LINK_BYTES_PER_S, DigestRecorder, Recorder, _async_call, check_fits


def step_time_floor(cost) -> float:
    """The least time a step that samples a token can take under `cost`, or 0 where the model
    gives no such floor: its time for one token and no context, when its time never falls as a
    step holds more tokens or more context (the roofline and units models; a fitted line with no
    negative term)."""
    if type(cost) in (UnitsCost, RooflineCost) or (
            type(cost) is CalibratedCost and min(cost.per_token, cost.per_context_token, cost.per_step) >= 0):
        return max(float(cost.step_time_totals(1, 0)), 0.0)
    return 0.0


class SimReplica:
    """A simulated replica. `view` is its ReplicaView, whose engine-reported fields the fleet
    refreshes from `signals()`; `finished` collects (request id, time its response left the
    engine) for the router's in-flight bookkeeping."""

    def __init__(self, index: int, cfg: SchedulerConfig, mode: str, max_model_len: int, cost=None,
                 digest: bool = False):
        self.index = index
        self.cfg = cfg
        self.mode = mode
        self.max_model_len = max_model_len
        self.cost = cost or UnitsCost()
        try:
            self.sched = (AsyncVllmScheduler if cfg.async_scheduling else SCHEDULERS[mode])(cfg, max_model_len)
        except KeyError:
            raise ValueError(f"unknown scheduler {mode!r}; known: {', '.join(SCHEDULERS)}") from None
        # async scheduling: each step is one call of vLLM's step_with_batch_queue (sim/async_sched.py)
        self.bq = BatchQueue(self.sched) if cfg.async_scheduling else None
        self.slo_clock = hasattr(self.sched, "clock")
        if self.slo_clock:
            self.sched.cost_model = self.cost
        self.rec = DigestRecorder(cfg.enable_prefix_caching) if digest else Recorder(cfg.enable_prefix_caching)
        self.pool = self.sched.pool
        self.pool.logging = not digest
        to_unit = {"ms": 1000.0, "s": 1.0}.get(getattr(self.cost, "time_unit", ""), 0.0)
        self.swap_unit_per_byte = to_unit / SWAP_LINK_BYTES_PER_S
        self.idle_dt = self.cost.step_time(1, [1])
        self.step_floor = step_time_floor(self.cost)
        self.shaped = getattr(self.cost, "uses_shape", False)
        self.tracks_counters = bool(self.sched.waiting.state()) or cfg.policy == "vtc"
        self.pending: deque = deque()   # requests dispatched here, not yet joined a step (arrival order)
        self.requests: list = []        # every request dispatched here, in dispatch order
        self.finished: list[tuple[str, float]] = []
        self.first_tokens: list[tuple[str, float]] = []   # (request id, end of the step that sampled its first token)
        self._first_seen: set[str] = set()
        self.n_done = 0   # dispatched requests finished or turned away
        self.turned_away = 0   # of them, longer than max_model_len
        # the config's max_model_len (none set: the workload's longest request fits by construction)
        self.context_limit = int(cfg.max_model_len) if cfg.max_model_len else math.inf
        self.step = 0
        self.clock = 0.0
        self.stalled = 0
        self.busy_time = 0.0
        # block 0 is the null block (vLLM 0.8.2 and before keep none back)
        self.usable_blocks = cfg.num_gpu_blocks - (self.pool.null_block is not None)
        # engine-reported signals after the last schedule(): waiting, running, blocks in use
        self.waiting = self.running = self.used_blocks = 0
        self.view = None   # the fleet sets it
        self.tick = None   # called every 1,000 steps when set (the fleet's progress)
        # release_horizon's index, kept once it is first asked (a router that reads only its
        # in-flight counts): the requests here that have sampled a token (id -> Seq), and a heap
        # of (tokens left, arrival order, Seq) of those that have not, whose count left cannot
        # change until they sample (one that has sampled, or left, is dropped when it reaches the top)
        self._horizon = False
        self._started: dict = {}
        self._fresh: list = []
        self._fresh_seq = 0

    def check_fits(self, requests) -> None:
        """ValueError when a request dispatched here could never fit this replica's pool."""
        from ..workload import Workload
        check_fits(Workload(list(requests)), self.cfg, self.max_model_len)

    def _turn_away(self, r, step: int, clock: float) -> None:
        """A request longer than max_model_len (prompt and max_tokens) never reaches vLLM's
        scheduler: its front end answers HTTP 400 ("This model's maximum context length is ...")."""
        self.rec.turn_away(r, step, clock, f"{r.prompt_len + r.max_tokens:,} tokens (prompt and max_tokens): over "
                                           f"max_model_len {self.context_limit:,}, an HTTP 400")
        self.n_done += 1
        self.turned_away += 1
        self.finished.append((r.id, clock))   # the response ends at once

    @property
    def next_start(self) -> float:
        """When this replica's next step would start: its clock if it has work, the next
        dispatched arrival if it is idle, infinity if it has nothing at all."""
        if self.n_done == len(self.requests):
            return math.inf   # all done: vLLM's empty step after the last finish runs with the next request
        if self.sched.has_requests() or (self.bq is not None and self.bq.pending):
            return self.clock   # (async: an output in flight is applied by the next call)
        if self.pending:
            return max(self.clock, self.pending[0].arrival_time)
        return math.inf

    def dispatch(self, req) -> None:
        """`req` (its arrival_time = when it reaches this replica) is sent here."""
        self.pending.append(req)
        # the Trace's requests table reads ids, tenants, priorities and lengths, not the prompt's
        # token ids (a 1k-token prompt's tuple is ~40 kB of ints: 4 GB at 100k requests)
        self.requests.append(req if req.prompt_token_ids is None else replace(req, prompt_token_ids=None))

    def signals(self) -> tuple[int, int, int]:
        """What the engine reports now: waiting requests (its queue, and those that reached it
        but have not joined a step yet), running requests, KV blocks in use."""
        return self.waiting + len(self.pending), self.running, self.used_blocks

    def advance(self, until: float) -> None:
        """Run every step that starts before `until`."""
        sched, rec, pool, pending, bq = self.sched, self.rec, self.pool, self.pending, self.bq
        seqs = sched.seqs   # every request the scheduler was given; it only ever writes to it
        while True:
            if self.n_done == len(self.requests) and until == math.inf:
                return   # the run's end: sim.simulate stops here too (no empty step after the last finish)
            if not sched.has_requests() and not (bq is not None and bq.pending):
                if not pending or pending[0].arrival_time >= until:
                    return
                self.clock = max(self.clock, pending[0].arrival_time)   # an idle engine waits for work
            clock = self.clock
            if clock >= until:
                return
            self.step += 1
            step = self.step
            pool.step = step
            if step % 1000 == 0 and self.tick is not None:
                self.tick()
            if self.slo_clock:
                sched.clock = clock
            arrived = []
            while pending and pending[0].arrival_time <= clock:
                r = pending.popleft()
                if r.prompt_len + r.max_tokens > self.context_limit:
                    self._turn_away(r, step, clock)
                    arrived.append(r.id)
                    continue
                seq = rec.arrive(sched, r, step, clock, True)
                if seq.status == "rejected":
                    seqs.pop(r.id, None)
                    self.n_done += 1
                    self.finished.append((r.id, clock))   # turned away: the response ends at once
                elif self._horizon:
                    self._note_fresh(seq)
                arrived.append(r.id)
            if bq is not None:
                self._async_step(step, clock, arrived)
                continue
            if not sched.has_requests():
                rec.idle(step, clock, self.idle_dt, pool, arrived)
                self.clock = clock + self.idle_dt
                continue
            plan = sched.schedule()
            self.stalled = 0 if (plan.entries or plan.admitted or plan.preempted) else self.stalled + 1
            if self.stalled > 1000:
                raise RuntimeError(f"replica {self.index}: no progress for 1000 steps at step {step}: its KV pool "
                                   f"is too small for the requests in flight")
            # a cost form priced by the step's make-up (sim.cost.FormCost), as sim.simulate prices it
            dt = self.cost.step_time_plan(plan) if self.shaped else \
                self.cost.step_time_totals(plan.num_tokens, plan.context_tokens)
            swap_bytes = plan.swapped_in_bytes + plan.swapped_out_bytes
            dt += swap_bytes * self.swap_unit_per_byte
            self.waiting, self.running = len(sched.waiting), len(sched.running)
            self.used_blocks = self.usable_blocks - plan.free_after_schedule
            finished = sched.update(plan)
            end = clock + dt
            for e in plan.entries:
                if e.kind != "decode" and e.sampled and e.seq.id not in self._first_seen:
                    self._first_seen.add(e.seq.id)
                    self.first_tokens.append((e.seq.id, end))
            if self._horizon:   # a request's first token: its count of tokens left starts to fall
                started = self._started
                for e in plan.entries:
                    if e.sampled and e.seq.num_output == 1:
                        started[e.seq.id] = e.seq
            self.n_done += len(finished)
            for seq in finished:
                self.finished.append((seq.id, end))
            rec.record(sched, plan, finished, step, clock, end, arrived, swap_bytes)
            if self.tracks_counters:
                rec.record_counters(sched, step)
            for seq in finished:   # nothing reads a finished request's state again: free its token ids
                del seqs[seq.id]
            if self._horizon:
                for seq in finished:
                    self._started.pop(seq.id, None)
            self.busy_time += dt
            self.clock = end

    def _async_step(self, step: int, clock: float, arrived: list) -> None:
        """One call of the async engine loop (sim.simulate's _async_call), and what the fleet
        reads of it: the signals after the call, first tokens (at the end of the step that
        sampled them), finished requests (at the end of the step that sampled their last token,
        told in the call that applied it)."""
        sched = self.sched
        try:
            finished, end, self.stalled, plan, applied = _async_call(
                self.bq, sched, self.rec, self.cost, step, clock, arrived, self.idle_dt, self.stalled,
                self.swap_unit_per_byte)
        except RuntimeError as e:
            raise RuntimeError(f"replica {self.index}: {e}") from None
        self.clock = end
        if self.tracks_counters:   # after every call, idle ones too (sim.simulate's async loop)
            self.rec.record_counters(sched, step)
        if plan is None:
            return   # an idle tick
        self.busy_time += end - clock
        self.waiting, self.running = len(sched.waiting), len(sched.running)
        self.used_blocks = self.usable_blocks - self.pool.num_free
        for e in plan.entries:
            if e.kind != "decode" and e.sampled and e.seq.id not in self._first_seen:
                self._first_seen.add(e.seq.id)
                self.first_tokens.append((e.seq.id, end))
        if applied is not None and self._horizon:   # a first token landed: its count of tokens left falls
            started = self._started
            for e in applied[1].entries:
                if e.sampled and e.seq.num_output == 1:
                    started[e.seq.id] = e.seq
        self.n_done += len(finished)
        seqs = sched.seqs
        for seq in finished:
            self.finished.append((seq.id, applied[2]))
            seqs.pop(seq.id, None)   # nothing reads a finished request's state again: free its token ids
            if self._horizon:
                self._started.pop(seq.id, None)

    def release_horizon(self) -> float:
        """A time before which no request here can finish: every request still to finish needs
        one step per output token it has left (each step that samples takes at least the cost
        model's step_time_floor), and one not yet arrived may be turned away the moment it does.
        -inf when the cost model gives no floor.

        The fewest tokens left comes from an index (the requests that have sampled, at most the
        batch and the preempted; a heap of those that have not), not a pass over every request
        the replica holds: an overloaded replica's queue holds tens of thousands, and this is
        asked at every routing decision (_release_horizon_scan is the pass; tests compare them)."""
        if self.n_done == len(self.requests):
            return math.inf
        if self.step_floor <= 0:
            return -math.inf
        h = self.pending[0].arrival_time if self.pending else math.inf
        left = self._fewest_left()
        if left != math.inf:
            # async: a request may have one more token in flight (the step that ends at the
            # clock), which the next call applies; it may be its last
            rest = max(left, 1) if self.bq is None else max(left - 1, 0)
            h = min(h, self.clock + rest * self.step_floor)
        return h

    def _tokens_left(self, seq) -> int:
        return min(seq.max_tokens - seq.num_output, self.max_model_len - seq.num_tokens)

    def _note_fresh(self, seq) -> None:
        heapq.heappush(self._fresh, (self._tokens_left(seq), self._fresh_seq, seq))
        self._fresh_seq += 1

    def _fewest_left(self) -> float:
        """min over the scheduler's requests of the tokens each has left (inf if none)."""
        seqs = self.sched.seqs
        if not self._horizon:   # the first question: index what is here; advance keeps it from now on
            self._horizon = True
            for seq in seqs.values():
                if seq.num_output > 0:
                    self._started[seq.id] = seq
                else:
                    self._note_fresh(seq)
        left = math.inf
        started = self._started
        gone = None
        max_len = self.max_model_len
        for rid, seq in started.items():
            if seqs.get(rid) is not seq:
                gone = [rid] if gone is None else gone + [rid]
                continue
            n = min(seq.max_tokens - seq.num_output, max_len - seq.num_tokens)
            if n < left:
                left = n
        if gone:
            for rid in gone:
                del started[rid]
        fresh = self._fresh
        while fresh:
            seq = fresh[0][2]
            if seq.num_output == 0 and seqs.get(seq.id) is seq:
                break
            heapq.heappop(fresh)   # it has sampled (counted above) or left
        if fresh and fresh[0][0] < left:
            left = fresh[0][0]
        return left

    def _release_horizon_scan(self) -> float:
        """release_horizon by a pass over every request here (the plain form, for the tests)."""
        if self.n_done == len(self.requests):
            return math.inf
        if self.step_floor <= 0:
            return -math.inf
        h = self.pending[0].arrival_time if self.pending else math.inf
        left = math.inf
        max_len = self.max_model_len
        for seq in self.sched.seqs.values():
            n = min(seq.max_tokens - seq.num_output, max_len - seq.num_tokens)
            if n < left:
                left = n
                if n <= 1:
                    break
        if left != math.inf:
            rest = max(left, 1) if self.bq is None else max(left - 1, 0)
            h = min(h, self.clock + rest * self.step_floor)
        return h

    def cached_blocks(self, hashes: list[int]) -> int:
        """Leading blocks of a prompt (its chain hashes at this replica's block size) held in
        this replica's prefix cache now (0 without prefix caching)."""
        return self.pool.cached_run(hashes) if self.pool.enable_caching else 0

    def build(self, meta: dict):
        """This replica's Trace (or Digest) of the requests dispatched to it."""
        return self.rec.build(self.requests, self.cfg, self.mode, self.pool, meta)

    def release(self) -> None:
        """Let go of the run's state (recorder, scheduler, KV pool) once its Trace is built: the
        replica can run no further."""
        self.rec = self.sched = self.pool = None
        self.pending.clear()
