"""Sampling: greedy (argmax, the conformance path) or temperature / top-k / top-p.

A sampled token's randomness comes from its own generator, seeded by (seed, request id,
output index): the same request gives the same tokens alone or in any batch, after any
preemption. Noise is drawn on the CPU, so it is the same on every device.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0: greedy
    top_k: int = 0  # 0: off
    top_p: float = 1.0
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


def token_seed(seed: int, rid: str, index: int) -> int:
    return zlib.crc32(f"{seed}:{rid}:{index}".encode()) | (int(seed) & 0x7FFFFFFF) << 32


def sample(logits: torch.Tensor, params: list[SamplingParams], keys: list[tuple[str, int]]) -> list[int]:
    """One token per row of logits [n, vocab]; keys[i] = (request id, output index)."""
    out = logits.max(dim=-1).indices.tolist()  # the first maximum, like argmax, and faster on CPU
    for i, p in enumerate(params):
        if not p.greedy:
            out[i] = _sample_row(logits[i], p, *keys[i])
    return out


def _sample_row(row: torch.Tensor, p: SamplingParams, rid: str, index: int) -> int:
    x = row.detach().to("cpu", torch.float64) / p.temperature
    if 0 < p.top_k < x.numel():
        kth = torch.topk(x, p.top_k).values[-1]
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=-1)
    if p.top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        drop = sorted_p.cumsum(0) - sorted_p >= p.top_p  # keep the smallest prefix reaching top_p
        probs = probs.clone()
        probs[order[drop]] = 0.0
    g = torch.Generator().manual_seed(token_seed(p.seed, rid, index))
    noise = torch.empty_like(probs).exponential_(1.0, generator=g)
    return int((probs / noise).argmax())
