"""The model runner: turns one StepPlan of the scheduler into a forward pass and sampled tokens.

swap   copy preempted requests' blocks to host memory (plan.swap_out) before anything can
       overwrite them, and restore resumed ones (plan.swap_in)
prepare flat input ids and positions (decode tokens first, then prefill chunks), the slot
       mapping, the attention metadata, and the rows to sample: the last token of every chunk
       that reaches its request's last known token (a partial prefill samples nothing)
forward the model over the flat batch, logits only for the sampled rows
sample greedy or seeded sampling per request
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .attention import AttnBatch, Workspace, paged_attend, plan_attention
from .attention_flex import FlexBatch, flex_attend, self_test
from .device import PhaseTimer, synchronize
from .kv_cache import PagedKVCache
from .model import CausalLM
from .sampling import SamplingParams, sample


@dataclass
class Prepared:
    input_ids: torch.Tensor
    positions: torch.Tensor
    attn: AttnBatch | FlexBatch
    logits_rows: torch.Tensor
    samplers: list  # the Seq of each sampled row
    layout: tuple  # (q_lens, starts, tables): to plan the gather path again if flex fails


ATTENTION_BACKENDS = ("gather", "flex")


class ModelRunner:
    def __init__(self, model: CausalLM, num_blocks: int, block_size: int, attention: str = "gather"):
        self.model = model
        p = next(model.parameters())
        self.device, self.dtype = p.device, p.dtype
        c = model.config
        self.vocab = c.vocab_size
        self.max_positions = model.rope.cos.shape[0]
        self.cache = PagedKVCache(c.num_layers, num_blocks, block_size, c.num_kv_heads, c.head_dim, self.dtype,
                                  self.device)
        self.ws = Workspace()
        if attention not in ATTENTION_BACKENDS:
            raise ValueError(f"unknown attention backend {attention!r}; known: {', '.join(ATTENTION_BACKENDS)}")
        self.requested = attention
        self.attention, self.attention_check = "gather", ""
        if attention == "flex":  # only once it agrees with the gather path on this pool's geometry
            ok, found = self_test(self.cache, c.num_heads)
            self.attention = "flex" if ok else "gather"
            self.attention_check = found if ok else f"{found}: the gather path is used"

    def fits(self, num_blocks: int, block_size: int, attention: str = "gather") -> bool:
        return (self.cache.num_blocks == num_blocks and self.cache.block_size == block_size
                and self.requested == attention)

    def swap(self, plan) -> int:
        moved = 0
        for rid, blocks in plan.swap_out.items():
            moved += self.cache.swap_out(rid, blocks)
        for rid, blocks in plan.swap_in.items():
            moved += self.cache.swap_in(rid, blocks)
        return moved

    def prepare(self, entries) -> Prepared | None:
        ents = [e for e in entries if e.tokens > 0]  # (static batching lists idle members with 0)
        if not ents:
            return None
        ents = [e for e in ents if e.tokens == 1] + [e for e in ents if e.tokens > 1]
        ids: list[int] = []
        positions: list[int] = []
        q_lens, starts, tables, rows, samplers = [], [], [], [], []
        for e in ents:
            seq, before, n = e.seq, e.computed_before, e.tokens
            ids.extend(seq.tokens[before:before + n])
            positions.extend(range(before, before + n))
            q_lens.append(n)
            starts.append(before)
            tables.append(seq.blocks)
            if before + n == seq.num_tokens:  # reaches the last known token: sample after it
                rows.append(len(ids) - 1)
                samplers.append(seq)
        if max(positions) >= self.max_positions:
            raise ValueError(f"position {max(positions)} is past the model's {self.max_positions} positions")
        dev = self.device
        input_ids = torch.tensor(ids, dtype=torch.long, device=dev)
        if max(ids) >= self.vocab:  # workload ids drawn for a larger vocabulary: fold them in
            input_ids.remainder_(self.vocab)
        if self.attention == "flex":
            attn = FlexBatch(q_lens, starts, tables, self.cache.block_size, self.cache.num_blocks, dev)
        else:
            attn = plan_attention(q_lens, starts, tables, self.cache.block_size, dev)
        return Prepared(input_ids, torch.tensor(positions, dtype=torch.long, device=dev), attn,
                        torch.tensor(rows, dtype=torch.long, device=dev), samplers, (q_lens, starts, tables))

    def forward(self, prep: Prepared) -> torch.Tensor:
        if isinstance(prep.attn, FlexBatch):
            try:
                return self.model(prep.input_ids, prep.positions, flex_attend(self.cache, prep.attn), prep.logits_rows)
            except Exception as e:  # noqa: BLE001 - e.g. a compile failure at a new shape: gather instead
                # (the K/V rows already stored are stored again, to the same slots: the step is redone whole)
                self.attention = "gather"
                self.attention_check += f"; FlexAttention failed in a step ({type(e).__name__}): gather from then on"
                prep.attn = plan_attention(*prep.layout, self.cache.block_size, self.device)
        return self.model(prep.input_ids, prep.positions, paged_attend(self.cache, prep.attn, self.ws),
                          prep.logits_rows)

    def execute(self, plan, sampling_of: Callable[[object], SamplingParams],
                timer: PhaseTimer | None = None) -> dict[str, int]:
        """Run one step's plan; returns {request id: sampled token}. Phases are timed into
        `timer` (t_swap, t_prepare, t_forward, t_sample), the forward closed after a device sync."""
        timer = timer or PhaseTimer()
        if plan.swap_out or plan.swap_in:
            self.swap(plan)
            synchronize(self.device)
        timer.lap("t_swap")
        prep = self.prepare(plan.entries)
        timer.lap("t_prepare")
        if prep is None:
            timer.lap("t_forward")
            timer.lap("t_sample")
            return {}
        logits = self.forward(prep)
        synchronize(self.device)
        timer.lap("t_forward")
        seqs = prep.samplers
        toks = sample(logits, [sampling_of(s) for s in seqs], [(s.id, s.num_output) for s in seqs]) if seqs else []
        timer.lap("t_sample")
        return {s.id: t for s, t in zip(seqs, toks)}
