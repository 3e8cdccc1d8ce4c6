"""The optional FlexAttention backend (engine/attention_flex.py), which reads the block table in
place: against the float64 dense reference, against the gather path, inside the engine (greedy
tokens equal to HF's in float64, preemptions and swap included), and its self-test gate.

On the CPU FlexAttention runs its eager reference; ENGINE_TEST_DEVICE=cuda runs the compiled
kernel (bench/device_check.sh)."""
import random

import pytest
import torch

from engine import EngineConfig, LLMEngine
from engine.attention_flex import FlexBatch, flex_attend, self_test
from engine.kv_cache import PagedKVCache
from engine.runner import ModelRunner
from tests.test_engine_attention import BS, DEVICE, H, HKV, MIXED, _case, _reference
from tests.test_engine_hf import _hf_greedy, _hf_llama, _workload

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
FP32_TOL = 1e-5 if DEVICE.type == "cpu" else 2e-3  # a GPU kernel may take TF32 dot products


def _flex_error(dtype, seed, q_lens_starts):
    cache, reqs = _case(dtype, seed, q_lens_starts)
    rs = sorted(reqs, key=lambda r: r["q_len"] > 1)  # the runner's layout: decodes first
    batch = FlexBatch([r["q_len"] for r in rs], [r["start"] for r in rs], [r["table"] for r in rs], BS,
                      cache.num_blocks, DEVICE)
    q = torch.cat([r["q"] for r in rs]).to(DEVICE, dtype)
    k = torch.cat([r["k"][r["start"]:] for r in rs]).to(DEVICE, dtype)
    v = torch.cat([r["v"][r["start"]:] for r in rs]).to(DEVICE, dtype)
    out = flex_attend(cache, batch)(0, q, k, v)
    return (out.double().cpu() - torch.cat([_reference(r) for r in rs])).abs().max().item()


@pytest.mark.skipif(DEVICE.type != "cpu", reason="float64 FlexAttention is the CPU reference's")
@pytest.mark.parametrize("seed", [0, 1])
def test_mixed_batch_fp64_against_dense_reference(seed):
    """Scattered blocks, partial last blocks, decodes beside chunks with cached prefixes, GQA."""
    assert _flex_error(torch.float64, seed, MIXED) <= 1e-12


def test_random_shapes_fp32():
    rnd = random.Random(3)
    for seed in range(4):
        shape = [(rnd.choice([1, 1, rnd.randint(2, 40)]), rnd.randint(0, 80)) for _ in range(rnd.randint(1, 7))]
        assert _flex_error(torch.float32, 200 + seed, shape) <= FP32_TOL, shape


def test_a_request_never_sees_another_requests_blocks():
    """Two requests whose blocks interleave in the pool: each output is its own attention only."""
    cache, reqs = _case(torch.float64 if DEVICE.type == "cpu" else torch.float32, 11, [(1, 47), (1, 47)],
                        num_blocks=8)
    assert set(reqs[0]["table"]) & set(reqs[1]["table"]) == set()
    batch = FlexBatch([1, 1], [47, 47], [r["table"] for r in reqs], BS, cache.num_blocks, DEVICE)
    q = torch.cat([r["q"] for r in reqs]).to(DEVICE, cache.dtype)
    k = torch.cat([r["k"][47:] for r in reqs]).to(DEVICE, cache.dtype)
    v = torch.cat([r["v"][47:] for r in reqs]).to(DEVICE, cache.dtype)
    out = flex_attend(cache, batch)(0, q, k, v).double().cpu()
    for i, r in enumerate(reqs):
        assert (out[i] - _reference(r)[0]).abs().max().item() <= FP32_TOL


@pytest.mark.parametrize("dtype, block_size", [(torch.float32, 16), (torch.float32, 4), (torch.float64, 8)])
def test_self_test_agrees_on_a_fresh_pool(dtype, block_size):
    if DEVICE.type != "cpu" and dtype == torch.float64:
        pytest.skip("float64 on CUDA is not what the gate protects")
    ok, found = self_test(PagedKVCache(2, 64, block_size, HKV, 32, dtype, DEVICE), H)
    assert ok, found
    assert "max |flex - gather|" in found


def test_self_test_refuses_a_pool_too_small():
    ok, found = self_test(PagedKVCache(1, 4, 16, HKV, 32, torch.float32, DEVICE), H)
    assert not ok and "too few blocks" in found


@pytest.fixture(scope="module")
def pair64():
    return _hf_llama(torch.float64)


@pytest.mark.skipif(DEVICE.type != "cpu", reason="float64 token identity is checked on the CPU")
@pytest.mark.parametrize("config", [
    {"num_gpu_blocks": 12},
    {"num_gpu_blocks": 12, "preemption_mode": "swap"},
    {"num_gpu_blocks": 14, "enable_prefix_caching": True, "max_num_batched_tokens": 7},
], ids=["recompute", "swap", "prefix-caching-budget-7"])
def test_engine_with_flex_matches_hf_greedy_fp64(config, pair64):
    hf, model = pair64
    wl = _workload(n=10, seed=4)
    with torch.no_grad():
        ref = {r.id: _hf_greedy(hf, r) for r in wl.requests}
    eng = LLMEngine(EngineConfig(attention="flex"), model=model)
    res = eng.run(wl, config)
    assert res.trace.meta["attention"] == "flex", res.trace.meta["attention_check"]
    assert res.trace.requests["preemptions"].sum() > 0
    assert {r: res.tokens[r] for r in ref} == ref


def test_a_failed_self_test_falls_back_to_gather(monkeypatch, pair64):
    import engine.runner as runner_mod
    monkeypatch.setattr(runner_mod, "self_test", lambda cache, heads: (False, "max |flex - gather| = 1.0e+00"))
    runner = ModelRunner(pair64[1], 32, 16, attention="flex")
    assert runner.attention == "gather"
    assert "the gather path is used" in runner.attention_check


def test_unknown_backend_is_refused(pair64):
    with pytest.raises(ValueError, match="attention backend"):
        ModelRunner(pair64[1], 32, 16, attention="triton")


def test_block_mask_reads_every_tile_a_query_needs_and_few_others():
    """The tiles come from the block tables, not from evaluating the mask everywhere: they must
    hold every (query, key) pair the mask allows (create_block_mask's tiles) and skip most of a
    large pool. (The CPU's eager FlexAttention applies the mask densely, so only this check, and
    the self-test on CUDA, see the tiles.)"""
    from torch.nn.attention.flex_attention import create_block_mask
    cache, reqs = _case(torch.float32, 5, [(1, 200), (1, 37), (300, 100), (1, 16), (150, 0)], num_blocks=1024)
    rs = sorted(reqs, key=lambda r: r["q_len"] > 1)
    batch = FlexBatch([r["q_len"] for r in rs], [r["start"] for r in rs], [r["table"] for r in rs], BS,
                      cache.num_blocks, DEVICE)
    mine = batch.block_mask.to_dense()[0, 0].bool().cpu()
    need = create_block_mask(batch.block_mask.mask_mod, None, None, batch.num_tokens, cache.num_blocks * BS,
                             device=DEVICE).to_dense()[0, 0].bool().cpu()
    assert mine.shape == need.shape == (4, 128)
    assert (need <= mine).all(), "a tile the mask needs is skipped"
    assert mine.float().mean() < 0.25


def test_a_step_that_flex_cannot_run_is_redone_by_gather(monkeypatch, pair64):
    """A failure inside a step (say a compile error at a new shape) costs nothing but the switch:
    the step is redone with the gather path, and the run says so."""
    import engine.attention_flex as flex_mod
    hf, model = pair64
    wl = _workload(n=4, seed=1)
    with torch.no_grad():
        ref = {r.id: _hf_greedy(hf, r) for r in wl.requests}
    config = {"num_gpu_blocks": 40}
    eng = LLMEngine(EngineConfig(attention="flex"), config, model=model)
    assert eng.runner.attention == "flex"  # the self-test passed; the failure comes in a step

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel for this shape")
    monkeypatch.setattr(flex_mod, "flex_attention_step", broken)
    res = eng.run(wl, config)
    assert res.trace.meta["attention"] == "gather"
    assert "FlexAttention failed in a step (RuntimeError)" in res.trace.meta["attention_check"]
    assert {r: res.tokens[r] for r in ref} == ref
