"""llama-server's slot scheduling, as a scheduler the simulator can run.

llama-server (tools/server/server-context.cpp, update_slots) keeps n fixed slots (-np), one
conversation each. Every iteration builds one batch of at most n_batch tokens (-b):
first the sampled token of every generating slot, then prompt tokens of slots that are
processing a prompt, slot by slot, until the batch is full; a prompt that does not fit
continues in the next iteration. With continuous batching off (-nocb) prompt tokens are
only added to a batch that holds no decode token. There is no preemption: a task keeps its
slot until it finishes. A new task takes an idle slot: the one whose cached tokens share the
longest prefix with its prompt (prompt cache), else the least recently used.

Mapping onto SchedulerConfig: max_num_seqs = slots, max_num_batched_tokens = n_batch,
cont_batching = -cb/-nocb, enable_prefix_caching = cache_prompt. KV blocks are taken from
the same BlockPool as vLLM's (freed when a task ends; the slot remembers its tokens for the
prompt cache), so the block map can be drawn the same way.
"""
from __future__ import annotations

from .policies import FCFS
from .scheduler import FINISHED, RUNNING, Entry, SchedulerConfig, Seq, StepPlan
from .kvpool import BlockPool
from .registry import register_scheduler
from .workload import Request, output_token


@register_scheduler("llama_slots")
class LlamaSlotsScheduler:
    def __init__(self, config: SchedulerConfig, max_model_len: int):
        self.cfg = config
        self.max_model_len = int(max_model_len)
        self.n_slots = int(config.max_num_seqs)
        self.n_batch = int(config.max_num_batched_tokens)
        self.pool = BlockPool(config.num_gpu_blocks, config.block_size, False)
        self.waiting = FCFS()
        self.slots: list[Seq | None] = [None] * self.n_slots
        self.slot_tokens: list[list[int]] = [[] for _ in range(self.n_slots)]  # prompt cache per slot
        self.slot_last_used = [-1] * self.n_slots
        self.step = 0
        self._add_seq = 0
        self.caching = bool(config.enable_prefix_caching)
        self.cont_batching = bool(getattr(config, "cont_batching", True))

    @property
    def running(self) -> list[Seq]:
        return [s for s in self.slots if s is not None]

    def add_request(self, req: Request) -> Seq:
        seq = Seq(req, self._add_seq, self.step, self.caching)
        self._add_seq += 1
        self.waiting.add(seq)
        return seq

    def has_requests(self) -> bool:
        return len(self.waiting) > 0 or any(s is not None for s in self.slots)

    def _pick_slot(self, seq: Seq) -> tuple[int, int]:
        """An idle slot for the task and the prompt tokens its cache already holds."""
        idle = [i for i, s in enumerate(self.slots) if s is None]
        best, best_len = None, 0
        if self.caching:
            prompt = seq.tokens[: seq.prompt_len]
            for i in idle:
                cached = self.slot_tokens[i]
                k, m = 0, min(len(cached), len(prompt))
                while k < m and cached[k] == prompt[k]:
                    k += 1
                if k > best_len:
                    best, best_len = i, k
        if best is None:
            best = min(idle, key=lambda i: self.slot_last_used[i])
        # at least the last prompt token is evaluated, to get logits to sample from
        return best, min(best_len, seq.prompt_len - 1)

    def _grow(self, seq: Seq, upto: int) -> bool:
        need = -(-upto // self.cfg.block_size) - len(seq.blocks)
        if need <= 0:
            return True
        if need > self.pool.num_free:
            return False
        seq.blocks.extend(self.pool.allocate(need, seq.id))
        return True

    def schedule(self) -> StepPlan:
        self.step += 1
        plan = StepPlan()
        # tasks take idle slots in arrival order
        while len(self.waiting) and any(s is None for s in self.slots):
            seq = self.waiting.peek(None)
            slot, cached = self._pick_slot(seq)
            if not self._grow(seq, cached + 1):
                break  # no KV room even to start: the task waits
            self.waiting.remove(seq)
            seq.slot, seq.num_computed, seq.status = slot, cached, RUNNING
            self.slots[slot] = seq
            plan.admitted.append(seq)
        entries, room, context = [], self.n_batch, 0
        for seq in self.slots:  # 1. one decode token per generating slot
            if seq is not None and seq.num_output > 0 and room > 0 and self._grow(seq, seq.num_computed + 1):
                entries.append(Entry(seq, 1, seq.num_computed, "decode"))
                seq.num_computed += 1
                context += seq.num_computed
                room -= 1
        if self.cont_batching or not entries:  # 2. prompt chunks
            for seq in self.slots:
                if seq is None or seq.num_output > 0 or room <= 0:
                    continue
                n = min(seq.prompt_len - seq.num_computed, room)
                if n <= 0 or not self._grow(seq, seq.num_computed + n):
                    continue
                entries.append(Entry(seq, n, seq.num_computed, "prefill"))
                seq.num_computed += n
                context += seq.num_computed
                room -= n
        plan.entries = entries
        plan.num_tokens = self.n_batch - room
        plan.context_tokens = context
        plan.free_after_schedule = self.pool.num_free
        return plan

    def update(self, plan: StepPlan, sampled: dict[str, int] | None = None) -> list[Seq]:
        finished = []
        for e in plan.entries:
            seq = e.seq
            if seq.num_computed < seq.num_tokens:
                continue  # a prompt chunk short of the end: nothing to sample yet
            e.sampled = True
            if seq.tokens is not None:
                seq.tokens.append(sampled[seq.id] if sampled is not None else output_token(seq.id, seq.num_output))
            seq.num_output += 1
            seq.num_tokens += 1
            if seq.num_output >= seq.max_tokens or seq.num_tokens >= self.max_model_len:
                finished.append(seq)
        for seq in finished:
            seq.status = FINISHED
            self.slots[seq.slot] = None
            if seq.tokens is not None:
                self.slot_tokens[seq.slot] = seq.tokens[: seq.num_computed]
            self.slot_last_used[seq.slot] = self.step
            self.pool.free(seq.blocks, seq.id)
            seq.blocks = []
        return finished
