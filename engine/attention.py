"""Paged attention by gathering: each request's blocks are copied (`index_select`) into a
reused workspace and one masked `scaled_dot_product_attention` runs over the padded batch.

A step's tokens are laid out flat, decode tokens first (one per request), then the prefill
chunks. The two kinds form two groups, each one masked SDPA call: padding every decode row to
the longest prefill chunk would multiply the attention work by that chunk's length. A group
with B requests, at most Q new tokens and at most nb blocks each, attends [B, H, Q, D] queries
to [B, Hkv, nb * block_size, D] gathered keys (GQA by SDPA's enable_gqa); query i of a
request whose chunk starts at position p sees keys 0..p+i. Padding queries repeat the
request's last real query and are dropped; padding blocks are the null block 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .kv_cache import NULL_BLOCK, PagedKVCache


@dataclass
class Group:
    """One SDPA call: B requests with up to `q_max` new tokens and `num_blocks` blocks each."""
    batch: int
    q_max: int
    num_blocks: int
    block_ids: torch.Tensor  # [B * num_blocks] block table, flattened, padded with the null block
    mask: torch.Tensor | None  # [B, 1, q_max, num_blocks * block_size] bool; None: attend to all
    first: int  # the group's first flat token
    num_tokens: int  # its real tokens (contiguous in the flat batch from `first`)
    q_rows: torch.Tensor | None  # [B * q_max] flat token per padded query row (None: rows = tokens)
    out_rows: torch.Tensor | None  # padded rows that are real, in flat order (None: all)


@dataclass
class AttnBatch:
    """Per-step attention metadata, shared by every layer."""
    slots: torch.Tensor  # [T] where each new token's K/V is stored
    groups: list[Group]
    num_tokens: int


def plan_attention(q_lens: list[int], starts: list[int], tables: list[list[int]], block_size: int,
                   device: torch.device, split: bool = True) -> AttnBatch:
    """Metadata for requests laid out flat in the given order. q_lens: new tokens per request;
    starts: position of each request's first new token (tokens computed before); tables: each
    request's block ids (enough for starts + q_lens tokens). split=False makes the whole batch
    one padded SDPA call (for comparison: bench/bench_engine.py)."""
    groups, first, i, n_req = [], 0, 0, len(q_lens)
    while i < n_req:  # runs of decode (q_len 1) and chunk (q_len > 1) requests
        decode = q_lens[i] == 1
        j = i
        while j < n_req and ((q_lens[j] == 1) == decode or not split):
            j += 1
        groups.append(_group(q_lens[i:j], starts[i:j], tables[i:j], first, block_size, device))
        first += sum(q_lens[i:j])
        i = j
    return AttnBatch(slot_mapping(q_lens, starts, tables, block_size, device), groups, first)


def slot_mapping(q_lens: list[int], starts: list[int], tables: list[list[int]], block_size: int,
                 device: torch.device) -> torch.Tensor:
    """Where each new token's K/V is stored: block * block_size + offset, in flat order."""
    slots: list[int] = []
    for n, s, table in zip(q_lens, starts, tables):
        for p in range(s, s + n):
            slots.append(table[p // block_size] * block_size + p % block_size)
    return torch.tensor(slots, dtype=torch.long, device=device)


def _group(q_lens, starts, tables, first, bs, device) -> Group:
    b, q_max = len(q_lens), max(q_lens)
    ctx = [s + n for s, n in zip(starts, q_lens)]
    nb = max(-(-c // bs) for c in ctx)
    block_ids = [blk for t, c in zip(tables, ctx) for blk in (t[: -(-c // bs)] + [NULL_BLOCK] * nb)[:nb]]
    k_len = nb * bs
    q_rows = out_rows = None
    if q_max > 1:
        offs, q_idx, out_idx = first, [], []
        for r, n in enumerate(q_lens):
            q_idx.extend(offs + min(i, n - 1) for i in range(q_max))
            out_idx.extend(r * q_max + i for i in range(n))
            offs += n
        q_rows = torch.tensor(q_idx, dtype=torch.long, device=device)
        out_rows = torch.tensor(out_idx, dtype=torch.long, device=device)
    if q_max == 1 and all(c == k_len for c in ctx):
        mask = None
    else:
        # last key each query row may see: its own position (padding rows repeat the last one)
        last = torch.tensor([[s + min(i, n - 1) for i in range(q_max)] for s, n in zip(starts, q_lens)],
                            dtype=torch.long, device=device)
        mask = (torch.arange(k_len, device=device)[None, None, :] <= last[:, :, None])[:, None]
    return Group(b, q_max, nb, torch.tensor(block_ids, dtype=torch.long, device=device), mask, first,
                 sum(q_lens), q_rows, out_rows)


class Workspace:
    """Reused gather buffers (fresh large buffers per layer cost 35-40% at large gathers)."""

    def __init__(self):
        self.k = self.v = None

    def views(self, cache: PagedKVCache, n_blocks: int) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (n_blocks, cache.block_size, cache.num_kv_heads, cache.head_dim)
        need = n_blocks * cache.block_size * cache.num_kv_heads * cache.head_dim
        if self.k is None or self.k.numel() < need or self.k.dtype != cache.dtype or self.k.device != cache.data.device:
            size = max(need, int(1.25 * (self.k.numel() if self.k is not None else 0)))
            self.k = torch.empty(size, dtype=cache.dtype, device=cache.device)
            self.v = torch.empty(size, dtype=cache.dtype, device=cache.device)
        return self.k[:need].view(shape), self.v[:need].view(shape)


def paged_attention(q: torch.Tensor, cache: PagedKVCache, layer: int, batch: AttnBatch, ws: Workspace,
                    scale: float | None = None) -> torch.Tensor:
    """q [T, H, D] (K/V of the step's tokens already stored) -> out [T, H, D]."""
    t, h, d = q.shape
    scale = d ** -0.5 if scale is None else scale  # HF passes head_dim ** -0.5 explicitly
    out = torch.empty_like(q)
    bs = cache.block_size
    for g in batch.groups:
        kw, vw = ws.views(cache, g.batch * g.num_blocks)
        torch.index_select(cache.k[layer], 0, g.block_ids, out=kw)
        torch.index_select(cache.v[layer], 0, g.block_ids, out=vw)
        k = kw.view(g.batch, g.num_blocks * bs, cache.num_kv_heads, d).transpose(1, 2)
        v = vw.view(g.batch, g.num_blocks * bs, cache.num_kv_heads, d).transpose(1, 2)
        qg = q[g.first:g.first + g.num_tokens] if g.q_rows is None else q.index_select(0, g.q_rows)
        qg = qg.view(g.batch, g.q_max, h, d).transpose(1, 2)
        o = F.scaled_dot_product_attention(qg, k, v, attn_mask=g.mask, scale=scale, enable_gqa=True)
        o = o.transpose(1, 2).reshape(g.batch * g.q_max, h, d)
        out[g.first:g.first + g.num_tokens] = o if g.out_rows is None else o.index_select(0, g.out_rows)
    return out


def paged_attend(cache: PagedKVCache, batch: AttnBatch, ws: Workspace):
    """The model's `attend(layer, q, k, v)` for one step: store K/V through the slot mapping,
    then attend over the paged cache."""
    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cache.store(layer, k, v, batch.slots)
        return paged_attention(q, cache, layer, batch, ws)
    return attend
