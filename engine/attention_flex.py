"""Paged attention that reads the block table in place: PyTorch's FlexAttention over the whole KV
pool, with a mask that maps each pool position back to the request and logical position it holds.

The gather path (attention.py) copies every request's blocks into a workspace before SDPA reads
them again: on a GPU, decode steps spend their time moving KV bytes, and that copy moves them
twice more. Here the step's T query tokens attend to the pool itself, seen as one sequence of
num_blocks * block_size keys; query token i (request r, position p) may see pool slot
b * block_size + o when block b is the j-th block of r's table and j * block_size + o <= p.
FlexAttention skips key tiles the mask rules out whole, so a query reads only its own blocks.

This backend is optional and only used after `self_test` agrees with the gather path on the
real pool's geometry. On CUDA the attention is compiled (torch.compile); elsewhere it runs
FlexAttention's eager reference (slow: it scores the whole pool), which the tests use to check
the mask against a float64 dense reference.
"""
from __future__ import annotations

import warnings

import torch

from .attention import Workspace, paged_attention, plan_attention, slot_mapping
from .kv_cache import PagedKVCache

_compiled = None


def _flex():
    """FlexAttention, compiled on first use when a GPU runs it (imported late: torch.compile
    machinery is heavy and only this backend needs it)."""
    from torch.nn.attention.flex_attention import flex_attention
    return flex_attention


def _kernel(device: torch.device):
    global _compiled
    if device.type != "cuda":
        return _flex()
    if _compiled is None:
        _compiled = torch.compile(_flex(), dynamic=True)
    return _compiled


class FlexBatch:
    """Per-step metadata, shared by every layer: the slot mapping and the block mask."""

    def __init__(self, q_lens: list[int], starts: list[int], tables: list[list[int]], block_size: int,
                 num_blocks: int, device: torch.device):
        self.slots = slot_mapping(q_lens, starts, tables, block_size, device)
        self.num_tokens = sum(q_lens)
        bs = block_size
        used = [t[:-(-(s + n) // bs)] for n, s, t in zip(q_lens, starts, tables)]
        # built as Python lists, then one copy each: a step makes a few tensors, not one per request
        req = torch.tensor([r for r, n in enumerate(q_lens) for _ in range(n)], device=device)
        pos = torch.tensor([p for n, s in zip(q_lens, starts) for p in range(s, s + n)], device=device)
        rows = [r for r, blocks in enumerate(used) for _ in blocks]
        cols = [b for blocks in used for b in blocks]
        at = [j for blocks in used for j in range(len(blocks))]
        # logical index of each pool block in each request's table; -1: not the request's
        logical = torch.full((len(q_lens), num_blocks), -1, dtype=torch.int32, device=device)
        logical[torch.tensor(rows, device=device), torch.tensor(cols, device=device)] = \
            torch.tensor(at, dtype=torch.int32, device=device)

        def visible(b, h, q, kv):
            j = logical[req[q], kv // bs]
            return (j >= 0) & (j * bs + kv % bs <= pos[q])

        self.block_mask = _block_mask(q_lens, rows, cols, bs, num_blocks * bs, visible, device)


TILE = 128  # FlexAttention's default tile: 128 query rows x 128 keys


def _block_mask(q_lens: list[int], rows: list[int], cols: list[int], bs: int, kv_len: int, visible, device):
    """The BlockMask, from the block tables: a query tile reads the key tiles that hold blocks of
    its requests (visible() sorts out the rest inside each tile). create_block_mask would find
    the same tiles by evaluating visible() over every (query, key) pair, each step.
    rows, cols: (request, pool block) for every block a request's tokens use."""
    from torch.nn.attention.flex_attention import BlockMask
    q_len = sum(q_lens)
    nq, nk = -(-q_len // TILE), -(-kv_len // TILE)
    first = [0]
    for n in q_lens[:-1]:
        first.append(first[-1] + n)
    first_t, n_t = torch.tensor(first, device=device), torch.tensor(q_lens, device=device)
    lo, hi = first_t // TILE, (first_t + n_t - 1) // TILE  # the query tiles each request's rows span
    req, blk = torch.tensor(rows, device=device), torch.tensor(cols, device=device)
    req = torch.cat([req, req])
    kt = torch.cat([blk * bs // TILE, (blk * bs + bs - 1) // TILE])  # a block may straddle two key tiles
    span = (hi - lo + 1)[req]
    req_r, kt_r = torch.repeat_interleave(req, span), torch.repeat_interleave(kt, span)
    start = torch.repeat_interleave(torch.cumsum(span, 0) - span, span)
    qt = lo[req_r] + torch.arange(len(req_r), device=device) - start
    hit = torch.zeros(nq, nk, dtype=torch.bool, device=device)
    hit[qt, kt_r] = True
    counts = hit.sum(1, dtype=torch.int32)
    order = torch.argsort((~hit).to(torch.int8), dim=1, stable=True).to(torch.int32)  # the tiles read first
    return BlockMask.from_kv_blocks(counts[None, None], order[None, None], BLOCK_SIZE=TILE, mask_mod=visible,
                                    seq_lengths=(q_len, kv_len), compute_q_blocks=False)


def flex_attention_step(q: torch.Tensor, cache: PagedKVCache, layer: int, batch: FlexBatch,
                        scale: float | None = None) -> torch.Tensor:
    """q [T, H, D] (K/V of the step's tokens already stored) -> out [T, H, D]."""
    t, h, d = q.shape
    n = cache.num_blocks * cache.block_size
    k = cache.k[layer].view(1, n, cache.num_kv_heads, d).transpose(1, 2)
    v = cache.v[layer].view(1, n, cache.num_kv_heads, d).transpose(1, 2)
    args = (q.transpose(0, 1).unsqueeze(0), k, v)
    kw = dict(block_mask=batch.block_mask, scale=d ** -0.5 if scale is None else scale, enable_gqa=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if q.device.type == "cuda" and (q.dtype, q.shape[0] < TILE) in _no_decoding_kernel:
            kw["kernel_options"] = {"FORCE_USE_FLEX_ATTENTION": True}
        try:
            out = _kernel(q.device)(*args, **kw)
        except Exception:
            # Seen on an H200 (torch 2.11): float32 steps of fewer than 128 query rows lower to
            # the flex-decoding template, which offered no kernel config ("NoValidChoicesError");
            # the general FlexAttention kernel compiles there. Remember the case and use it.
            if q.device.type != "cuda" or "kernel_options" in kw:
                raise
            _no_decoding_kernel.add((q.dtype, q.shape[0] < TILE))
            kw["kernel_options"] = {"FORCE_USE_FLEX_ATTENTION": True}
            out = _kernel(q.device)(*args, **kw)
    return out[0].transpose(0, 1)


_no_decoding_kernel: set[tuple[torch.dtype, bool]] = set()   # (dtype, short step) the decoding kernel failed


def flex_attend(cache: PagedKVCache, batch: FlexBatch):
    """The model's `attend(layer, q, k, v)` for one step (the gather path's paged_attend's twin)."""
    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cache.store(layer, k, v, batch.slots)
        return flex_attention_step(q, cache, layer, batch)
    return attend


# tolerances for the self-test: max |flex - gather| over outputs of unit-scale values (a wrong mask
# is off by 0.1-1; float32 allows for TF32 dot products in a GPU kernel)
TOLERANCE = {torch.float64: 1e-10, torch.float32: 2e-3, torch.float16: 5e-3, torch.bfloat16: 4e-2}


def self_test(cache: PagedKVCache, num_heads: int, seed: int = 0) -> tuple[bool, str]:
    """Run a mixed step (decodes over scattered blocks, a chunk with a partial last block, a new
    prompt) through both paths on layer 0 of `cache` and compare. Writes random K/V into some of
    its blocks: call it on a pool no request holds yet. Returns (agrees, what was found)."""
    bs, nb = cache.block_size, cache.num_blocks
    g = torch.Generator().manual_seed(seed)
    need = [-(-41 // bs), -(-(17 + 20) // bs), -(-5 // bs), -(-(bs * 2 + 1) // bs)]
    if sum(need) > nb - 1:
        return False, f"the pool has too few blocks ({nb}) for the self-test"
    order = (torch.randperm(nb - 1, generator=g) + 1).tolist()  # never the null block 0
    tables, at = [], 0
    for k in need:
        tables.append(order[at:at + k])
        at += k
    q_lens, starts = [1, 1, 20, 5], [40, bs * 2, 17, 0]
    tables = [tables[0], tables[3], tables[1], tables[2]]  # decodes first, as the runner lays them out
    dev, dt = cache.device, cache.dtype
    t, hkv, d = sum(q_lens), cache.num_kv_heads, cache.head_dim
    used = torch.tensor(order[:at], dtype=torch.long, device=dev)  # only these blocks: a GPU pool is large
    shape = (at, bs, hkv, d)
    cache.k[0].index_copy_(0, used, torch.randn(shape, generator=g).to(dev, dt))
    cache.v[0].index_copy_(0, used, torch.randn(shape, generator=g).to(dev, dt))
    q = torch.randn(t, num_heads, d, generator=g).to(dev, dt)
    try:
        want = paged_attention(q, cache, 0, plan_attention(q_lens, starts, tables, bs, dev), Workspace())
        got = flex_attention_step(q, cache, 0, FlexBatch(q_lens, starts, tables, bs, nb, dev))
    except Exception as e:  # noqa: BLE001 - a backend that cannot run is reported, not raised
        return False, f"FlexAttention failed: {type(e).__name__}: {str(e)[:200]}"
    err = (got.double() - want.double()).abs().max().item()
    tol = TOLERANCE.get(dt, 4e-2)
    return err <= tol, f"max |flex - gather| = {err:.2e} (tolerance {tol:.0e}, {str(dt).replace('torch.', '')})"
