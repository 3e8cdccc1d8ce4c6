"""Paged attention against a float64 dense reference: scattered blocks, partial last blocks,
decode tokens and prefill chunks (with a cached prefix) in one batch, GQA.

ENGINE_TEST_DEVICE=cuda runs the same checks on a GPU (the references stay on the CPU in float64)."""
import math
import os
import random

import pytest
import torch

from engine.attention import Workspace, paged_attend, paged_attention, plan_attention
from engine.kv_cache import PagedKVCache

BS, HKV, H, D = 16, 2, 8, 32
DEVICE = torch.device(os.environ.get("ENGINE_TEST_DEVICE", "cpu"))


def _case(dtype, seed, q_lens_starts, num_blocks=64):
    """A filled cache and a step: requests (q_len, start) with random, scattered blocks."""
    g = torch.Generator().manual_seed(seed)
    rnd = random.Random(seed)
    cache = PagedKVCache(1, num_blocks, BS, HKV, D, dtype, DEVICE)
    free = list(range(1, num_blocks))  # block 0 is the null block
    rnd.shuffle(free)
    reqs = []
    for q_len, start in q_lens_starts:
        ctx = start + q_len
        table = [free.pop() for _ in range(-(-ctx // BS))]
        k = torch.randn(ctx, HKV, D, generator=g, dtype=torch.float64)
        v = torch.randn(ctx, HKV, D, generator=g, dtype=torch.float64)
        q = torch.randn(q_len, H, D, generator=g, dtype=torch.float64)
        # the cached prefix is already in the pool; the step's own tokens are stored by attend()
        for p in range(start):
            cache.k[0][table[p // BS], p % BS] = k[p].to(DEVICE, dtype)
            cache.v[0][table[p // BS], p % BS] = v[p].to(DEVICE, dtype)
        reqs.append(dict(q_len=q_len, start=start, table=table, k=k, v=v, q=q))
    return cache, reqs


def _reference(r):
    """softmax(q k^T / sqrt(d)) v in float64, query i at position start + i."""
    q, k, v = r["q"], r["k"], r["v"]
    rep = H // HKV
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(D)
    pos = torch.arange(r["start"], r["start"] + r["q_len"])[:, None]
    s = s.masked_fill(torch.arange(k.shape[0])[None, :] > pos, float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), v)


def _run(dtype, seed, q_lens_starts):
    cache, reqs = _case(dtype, seed, q_lens_starts)
    # the engine's layout: decode tokens first, then chunks
    order = sorted(range(len(reqs)), key=lambda i: reqs[i]["q_len"] > 1)
    rs = [reqs[i] for i in order]
    batch = plan_attention([r["q_len"] for r in rs], [r["start"] for r in rs], [r["table"] for r in rs], BS,
                           DEVICE)
    q = torch.cat([r["q"] for r in rs]).to(DEVICE, dtype)
    k = torch.cat([r["k"][r["start"]:] for r in rs]).to(DEVICE, dtype)
    v = torch.cat([r["v"][r["start"]:] for r in rs]).to(DEVICE, dtype)
    out = paged_attend(cache, batch, Workspace())(0, q, k, v)
    ref = torch.cat([_reference(r) for r in rs])
    return (out.double().cpu() - ref).abs().max().item(), cache, rs


MIXED = [(1, 37), (1, 16), (1, 95), (23, 0), (9, 41), (1, 1), (40, 15), (2, 0)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixed_batch_fp64(seed):
    err, *_ = _run(torch.float64, seed, MIXED)
    assert err <= 1e-12


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixed_batch_fp32(seed):
    err, *_ = _run(torch.float32, seed, MIXED)
    assert err <= 1e-5


def test_one_padded_call_equals_the_split_groups():
    cache, reqs = _case(torch.float64, 9, MIXED)
    rs = sorted(reqs, key=lambda r: r["q_len"] > 1)
    args = ([r["q_len"] for r in rs], [r["start"] for r in rs], [r["table"] for r in rs], BS, DEVICE)
    split, one = plan_attention(*args), plan_attention(*args, split=False)
    assert len(split.groups) == 2 and len(one.groups) == 1
    q = torch.randn(sum(r["q_len"] for r in rs), H, D, dtype=torch.float64, device=DEVICE)
    a = paged_attention(q, cache, 0, split, Workspace())
    b = paged_attention(q, cache, 0, one, Workspace())
    assert (a - b).abs().max().item() <= 1e-12


def test_decode_only_full_blocks_takes_the_unmasked_path():
    cache, reqs = _case(torch.float64, 5, [(1, 31), (1, 31), (1, 31)])
    batch = plan_attention([1, 1, 1], [31, 31, 31], [r["table"] for r in reqs], BS, DEVICE)
    assert len(batch.groups) == 1 and batch.groups[0].mask is None
    err, *_ = _run(torch.float64, 5, [(1, 31), (1, 31), (1, 31)])
    assert err <= 1e-12


def test_random_shapes_fp64():
    rnd = random.Random(7)
    for seed in range(10):
        shape = [(rnd.choice([1, 1, 1, rnd.randint(2, 50)]), rnd.randint(0, 90)) for _ in range(rnd.randint(1, 9))]
        err, *_ = _run(torch.float64, 100 + seed, shape)
        assert err <= 1e-12, shape


def test_store_through_slot_mapping_reads_back_through_block_table():
    _, cache, rs = _run(torch.float32, 3, [(1, 20), (30, 4)])
    for r in rs:
        ctx = r["start"] + r["q_len"]
        got = cache.k[0].index_select(0, torch.tensor(r["table"], device=DEVICE)).reshape(-1, HKV, D)[:ctx]
        assert torch.equal(got.cpu(), r["k"].float())
    assert cache.k[0][0].abs().sum() == 0  # nothing is written to the null block


def test_workspace_is_reused():
    cache, reqs = _case(torch.float32, 4, [(1, 40), (1, 20)])
    ws = Workspace()
    batch = plan_attention([1, 1], [40, 20], [r["table"] for r in reqs], BS, DEVICE)
    q = torch.randn(2, H, D, device=DEVICE)
    paged_attention(q, cache, 0, batch, ws)
    buf = ws.k.data_ptr()
    paged_attention(q, cache, 0, batch, ws)
    assert ws.k.data_ptr() == buf
