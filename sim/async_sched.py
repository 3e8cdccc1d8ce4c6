"""vLLM's async scheduling: `AsyncScheduler` driven as `EngineCore.step_with_batch_queue` drives it.

On a GPU, vLLM 0.34 plans step n+1 before step n's tokens are back (config `async_scheduling`).
What that changes, with the sources (vLLM 0.34.0; shared/vllm/v034-and-async.md):

- The loop (core.py:758-871), a batch queue of 2 (pipeline size + 1, core.py:222-256): if the
  scheduler holds requests, schedule() and queue the batch; if the queue is not full and
  something was scheduled or requests remain, return without applying an output. Otherwise
  apply the OLDEST queued batch's output (update_from_output), or, with nothing queued, idle.
  So in steady state: schedule step n, then apply step n-1's output. Which call applies what
  never depends on the GPU's speed.
- Placeholders (async_scheduler.py:18-47): every scheduled request that is not a partial prefill
  chunk gets one output placeholder, and the running loop schedules the placeholder's position
  (scheduler.py:855-859): a decode is scheduled before its input token exists.
- The last token in flight (scheduler.py:816-829): a request whose final token is in flight is
  skipped, but stays in `running`, keeps its blocks and its max_num_seqs slot, counts for the
  lone-request threshold exemption and can be a preemption victim (sim/scheduler.py does this
  with Seq.placeholders, always 0 in sync mode).
- Freeing is one schedule() call later than in sync: a request finishes in the update of its
  last step, which runs after the next step was scheduled.
- A preemption with a token in flight (scheduler.py:1853-1897): the token still lands when its
  step's output is applied, as a stale token (:2360-2370); check_stop runs on it, so a request
  can finish while it waits (it then leaves the waiting queue).
- Prefix caching: a block completed by an in-flight token is cached when the token lands
  (scheduler.py:2450-2471), for running requests only.
- End of a busy period: one more empty schedule() as in sync, then a drain call applies it.

The simulator (sim/simulate.py) writes one oracle line per call, as the traces in
shared/vllm/cases_async034 do: the calls' lines, `drain` lines (an output applied, nothing
scheduled), and each line's `output_applied_through` (the newest step applied before the call)
and `applied_step` (the step applied in it, or null).
"""
from __future__ import annotations

from collections import deque

from .scheduler import FINISHED, RUNNING, Entry, StepPlan, VllmScheduler
from .workload import output_token

BATCH_QUEUE_SIZE = 2  # max_concurrent_batches = pipeline parallel size (1) + 1 (config/vllm.py:560-566)


class AsyncVllmScheduler(VllmScheduler):
    """VllmScheduler with AsyncScheduler's bookkeeping: placeholders at schedule time, and
    update() applying the output of an earlier schedule() call."""

    def schedule(self) -> StepPlan:
        plan = super().schedule()
        for e in plan.entries:
            seq = e.seq
            # AsyncScheduler._update_after_schedule: a chunk that reaches every known token and
            # placeholder samples a token, which becomes a placeholder until its output lands
            if seq.num_computed >= seq.num_tokens + seq.placeholders:
                e.sampled = True
                seq.placeholders += 1
        return plan

    def _entry(self, seq, n: int, before: int) -> Entry:
        if before >= seq.prompt_len and seq.placeholders and before >= seq.recompute_until:
            return Entry(seq, n, before, "decode")  # the input is a token still in flight
        return super()._entry(seq, n, before)

    def update(self, plan: StepPlan, sampled: dict[str, int] | None = None) -> list:
        """Apply `plan`'s output (an earlier step's): each request that sampled gets its token;
        a running one gives up a placeholder and caches the blocks that token completed, a
        preempted one takes it as stale; check_stop runs on both. Finished requests leave at once
        (running ones free their blocks and lanes, waiting ones leave the queue)."""
        finished = []
        bs, caching, max_len = self.cfg.block_size, self.caching, self.max_model_len
        on_sampled = self.waiting.on_sampled if self._charges_service else None
        for e in plan.entries:
            seq = e.seq
            if not e.sampled or seq.status == FINISHED:
                continue  # a partial prefill chunk; or already finished (vLLM skips those too)
            running = seq.status == RUNNING
            if seq.tokens is not None:
                seq.tokens.append(sampled[seq.id] if sampled is not None else output_token(seq.id, seq.num_output))
            seq.num_output += 1
            seq.num_tokens += 1
            if on_sampled is not None:
                on_sampled(seq)
            if running:
                seq.placeholders -= 1  # a stale token's placeholder was dropped at its preemption
                if caching:
                    if len(seq.tokens) // bs > len(seq.hashes):   # a block just filled
                        seq.extend_hashes(bs)
                    # late hashing: the blocks this token completed are cached only now
                    full = min(seq.num_computed - seq.placeholders, seq.num_tokens) // bs
                    if full > seq.num_cached_blocks:
                        self.pool.cache(seq.blocks, seq.hashes, seq.num_cached_blocks, full, seq.id)
                        seq.num_cached_blocks = full
            elif caching and len(seq.tokens) // bs > len(seq.hashes):
                seq.extend_hashes(bs)  # a preempted request's blocks are gone; only its hashes grow
            if seq.num_output >= seq.max_tokens or seq.num_tokens >= max_len:
                finished.append(seq)
                self._finish(seq, running)
        self._finished_pending = bool(finished)
        return finished

    def _finish(self, seq, running: bool) -> None:
        seq.status = FINISHED
        if running:
            self.running.remove(seq)
            self._release_blocks(seq)
            self._give_slot(seq)
        else:
            self.waiting.remove(seq)  # finished by a stale token while it waited to resume


class BatchQueue:
    """EngineCore.step_with_batch_queue's order of schedule() and update() calls.

    call() makes one engine call and says what it did: (plan, applied) where plan is the step
    scheduled in this call (None: none) and applied the (step, plan, end time) whose output was
    applied (None: none). Both None: the engine idled."""

    def __init__(self, sched: AsyncVllmScheduler, size: int | None = None):
        self.sched = sched
        self.size = size or BATCH_QUEUE_SIZE  # 1 gives the sync engine's order (EngineCore.step)
        self.queue: deque = deque()  # (step, plan, end time), oldest first
        self.applied_through = 0  # the newest step whose output was applied

    @property
    def pending(self) -> bool:
        return bool(self.queue)

    def schedule(self, step: int) -> StepPlan | None:
        """The call's schedule() half: a plan, or None when the scheduler holds no request."""
        if not self.sched.has_requests():
            return None
        return self.sched.schedule()

    def submit(self, step: int, plan: StepPlan | None, end: float) -> bool:
        """Queue the call's plan; True if the call then also applies the oldest output (the
        queue is full, or nothing was scheduled and nothing remains to schedule)."""
        if plan is None:
            return bool(self.queue)  # a drain call: applies what is in flight, or idles
        self.queue.append((step, plan, end))
        return not (len(self.queue) < self.size and (plan.num_tokens > 0 or self.sched.has_requests()))

    def apply(self):
        """Apply the oldest queued output: ((step, plan, end), finished requests)."""
        item = self.queue.popleft()
        finished = self.sched.update(item[1])
        self.applied_through = item[0]
        return item, finished


# fields an oracle line takes from its schedule() and from the update that applied its output
_SCHEDULE_FIELDS = ("arrived", "scheduled", "computed_before", "sampled", "preempted", "free_blocks_after_schedule")
_UPDATE_FIELDS = ("finished", "free_blocks", "cached_free_blocks", "running", "waiting")


def per_schedule(lines: list[dict]) -> list[dict]:
    """Async oracle lines (one per engine call) as one line per schedule() call, numbered by those
    calls, each with what its own update did: what a recorder inside vLLM's AsyncScheduler writes
    (servers/vllm/recorder.py pairs each step with its update_from_output). The update fields are
    the state after the call that applied the step, so running and waiting already hold what the
    next step admitted, as the recorder sees them. Trailing steps that scheduled nothing are left
    out (the recorder's reader drops them too)."""
    out, by_step = [], {}
    for line in lines:
        if not line.get("idle") and not line.get("drain"):
            own = {"step": len(out) + 1, **{k: line[k] for k in _SCHEDULE_FIELDS}}
            by_step[line["step"]] = own
            out.append(own)
        applied = by_step.get(line.get("applied_step"))
        if applied is not None:
            applied.update({k: line[k] for k in _UPDATE_FIELDS if k in line})
    while out and not out[-1]["scheduled"]:
        out.pop()
    return out
