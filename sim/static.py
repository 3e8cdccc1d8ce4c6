"""Static (request-level) batching: the lesson's Example 2.

A group of up to max_num_seqs requests is formed only when nothing is running. Every member
keeps its place until the group's longest member is done; a member that has produced all its
tokens keeps its slot as padding, and every member's result returns (finishes) when the group
ends. Then the next group is formed.

- Blocks: a member reserves its whole sequence (prompt + max_tokens) at admission, so a group
  never runs out of KV memory and nothing is ever preempted. Admission stops at the first
  request whose blocks do not fit (head of line, as in vLLM); the blocks are freed when the
  group ends.
- Which waiting requests form a group is the policy's choice (sim/policies.py, tenant cap
  included), in the order it offers them.
- Tokens: each step every unfinished member asks for all its unscheduled tokens (the prompt
  on its first step, then one decode token), within max_num_batched_tokens in admission
  order; a long prompt is therefore chunked across steps inside its group.
- Padding: every member that gets no tokens in a step (done and waiting for the group, or
  left out by the budget) appears in the batch as an entry of kind "padding" with 0 tokens.
  So batch rows per step = group size, and a group's slot-steps are its rows: useful rows
  sample a token, padding rows do not. A padding row's computed_before is the member's
  context, which the step's cost counts (a padded sequence is still in the forward pass),
  while its 0 tokens keep the step's token counts to useful work.

Same interface as VllmScheduler (what simulate() calls): add_request, has_requests,
schedule, update, pool, running, waiting.
"""
from __future__ import annotations

from .scheduler import RUNNING, Entry, Seq, StepPlan, VllmScheduler, _Ctx
from .registry import register_scheduler
from .workload import output_token

PADDING = "padding"


@register_scheduler("static")
class StaticScheduler(VllmScheduler):
    """Request-level batching over the same block pool and waiting-queue policies."""

    def __init__(self, config, max_model_len: int):
        super().__init__(config, max_model_len)
        self.group: list[Seq] = []  # the members of the running group, in admission order

    def _full_blocks(self, seq: Seq) -> int:
        tokens = min(seq.prompt_len + seq.max_tokens, self.max_model_len)
        return -(-tokens // self.cfg.block_size)

    def _done(self, seq: Seq) -> bool:
        return seq.num_output >= seq.max_tokens or seq.num_tokens >= self.max_model_len

    def _form_group(self, plan: StepPlan) -> None:
        cfg = self.cfg
        ctx = _Ctx(self.step, self.running_by_tenant)
        while len(self.waiting) and len(self.running) < cfg.max_num_seqs:
            seq = self.waiting.peek(ctx)
            if seq is None:
                break
            need = self._full_blocks(seq)
            reserve = self.watermark_blocks if self.running else 0  # a lone member always fits
            if need > self.pool.num_free - reserve:
                break  # head of line: nobody behind it is tried
            self.waiting.remove(seq)
            seq.blocks = self.pool.allocate(need, seq.id)
            seq.status = RUNNING
            self.running.append(seq)
            self._take_slot(seq)
            plan.admitted.append(seq)
        self.group = list(self.running)

    def schedule(self) -> StepPlan:
        self.step += 1
        plan = StepPlan()
        if not self.running:
            self._form_group(plan)
        budget = self.cfg.max_num_batched_tokens
        context = 0  # KV tokens the step's attention reads, padded members included
        for seq in self.group:
            n = 0 if self._done(seq) else min(seq.num_tokens - seq.num_computed, budget)
            context += seq.num_computed + n
            if n <= 0:
                plan.entries.append(Entry(seq, 0, seq.num_computed, PADDING))
                continue
            plan.entries.append(self._entry(seq, n, seq.num_computed))
            seq.num_computed += n
            budget -= n
        return self._close_plan(plan, budget, context)

    def update(self, plan: StepPlan, sampled: dict[str, int] | None = None) -> list:
        """A member whose chunk reached its last known token samples one; when every member
        has all its tokens, the whole group finishes and frees its blocks and slots."""
        for e in plan.entries:
            seq = e.seq
            if e.kind == PADDING or seq.num_computed < seq.num_tokens:
                continue
            e.sampled = True
            if seq.tokens is not None:
                seq.tokens.append(sampled[seq.id] if sampled is not None else output_token(seq.id, seq.num_output))
            seq.num_output += 1
            seq.num_tokens += 1
            if self._charges_service:
                self.waiting.on_sampled(seq)
        if not self.group or not all(self._done(s) for s in self.group):
            return []
        finished, self.group = self.group, []
        return self._retire(finished)
