"""The engine against HF transformers with the same weights (models built from a config
locally; nothing is downloaded): logits, and greedy tokens identical for every request in
float64 under every scheduling condition the scheduler can produce.

ENGINE_TEST_DEVICE=cuda runs the engine's runs on a GPU (HF, the reference, stays on the CPU)."""
import copy
import os
import random
import types

import pytest
import torch
import transformers

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.config import ModelConfig
from engine.model import CausalLM, full_forward
from engine.runner import ModelRunner
from engine.weights import load_state
from sim.policies import POLICIES
from sim.simulate import simulate
from sim.workload import Request, Workload

VOCAB = 512
DEVICE = torch.device(os.environ.get("ENGINE_TEST_DEVICE", "cpu"))


def _hf_llama(dtype):
    torch.manual_seed(0)
    hc = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                  eos_token_id=None, bos_token_id=None, pad_token_id=None)
    hf = transformers.LlamaForCausalLM(hc).to(dtype).eval()
    with torch.no_grad():  # non-trivial norm weights
        for n, p in hf.named_parameters():
            if "norm" in n:
                p.add_(0.1 * torch.randn_like(p))
    model = load_state(CausalLM(ModelConfig.from_hf(hc.to_dict())), hf.state_dict()).to(dtype).eval()
    return hf, model


@pytest.fixture(scope="module")
def pair64():
    return _hf_llama(torch.float64)


@pytest.fixture(scope="module")
def pair32():
    return _hf_llama(torch.float32)


def _workload(n=16, seed=0, stagger=12):
    """Prompts 3-60 tokens (a third share a 32- or 40-token prefix), outputs 3-40 tokens,
    arrivals spread over `stagger` steps, two tenants, mixed priorities."""
    rnd = random.Random(seed)
    prefixes = [[rnd.randrange(VOCAB) for _ in range(k)] for k in (32, 40)]
    reqs = []
    for i in range(n):
        pl = rnd.randint(3, 60)
        ids = [rnd.randrange(VOCAB) for _ in range(pl)]
        if i % 3 == 0:
            ids = (prefixes[i % 2] + ids)[:max(pl, 45)]
        reqs.append(Request(id=f"r{i:02d}", prompt_len=len(ids), max_tokens=rnd.randint(3, 40),
                            prompt_token_ids=tuple(ids), arrival_step=rnd.randint(0, stagger),
                            tenant="ab"[i % 2], priority=rnd.randint(0, 2)))
    return Workload(reqs, name="hf-conformance")


def _hf_greedy(hf, req):
    ids = torch.tensor([req.prompt_token_ids])
    out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=req.max_tokens, do_sample=False,
                      eos_token_id=None, pad_token_id=0)
    return out[0, req.prompt_len:].tolist()


@pytest.fixture(scope="module")
def reference(pair64):
    hf, _ = pair64
    wl = _workload()
    with torch.no_grad():
        return wl, {r.id: _hf_greedy(hf, r) for r in wl.requests}


@pytest.fixture(scope="module")
def engine64(pair64):
    model = pair64[1] if DEVICE.type == "cpu" else copy.deepcopy(pair64[1]).to(DEVICE)
    return LLMEngine(EngineConfig(), model=model)


def test_full_forward_logits_match_hf(pair32, pair64):
    for (hf, model), tol in ((pair32, 1e-5), (pair64, 1e-6)):
        ids = torch.randint(0, VOCAB, (70,), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            ref = hf(ids[None]).logits[0]
        assert (full_forward(model, ids) - ref).abs().max().item() <= tol


def test_paged_chunked_logits_match_hf(pair32):
    """Prefill in chunks of 20, 17 and 13 tokens, then 3 decode tokens, over scattered blocks."""
    hf, model = pair32
    ids = torch.randint(0, VOCAB, (53,), generator=torch.Generator().manual_seed(2)).tolist()
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0]
    runner = ModelRunner(model, num_blocks=12, block_size=8)
    seq = types.SimpleNamespace(id="x", tokens=ids, num_tokens=len(ids), blocks=[5, 2, 9, 7, 11, 1, 3])
    before, worst = 0, 0.0
    for n in (20, 17, 13, 1, 1, 1):
        prep = runner.prepare([types.SimpleNamespace(seq=seq, tokens=n, computed_before=before)])
        prep.logits_rows = torch.arange(n)
        logits = runner.forward(prep)
        worst = max(worst, (logits - ref[before:before + n]).abs().max().item())
        before += n
    assert worst <= 1e-5


CONFIGS = {
    "roomy": {"num_gpu_blocks": 1000},
    "tiny_pool_recompute": {"num_gpu_blocks": 12},
    "tiny_pool_swap": {"num_gpu_blocks": 12, "preemption_mode": "swap"},
    "prefix_caching_on": {"num_gpu_blocks": 200, "enable_prefix_caching": True},
    "prefix_caching_tiny_pool": {"num_gpu_blocks": 14, "enable_prefix_caching": True},
    "prefix_caching_swap": {"num_gpu_blocks": 14, "enable_prefix_caching": True, "preemption_mode": "swap"},
    "budget_7": {"max_num_batched_tokens": 7},
    "budget_16_seqs_4": {"max_num_batched_tokens": 16, "max_num_seqs": 4},
    "budget_32_threshold": {"max_num_batched_tokens": 32, "long_prefill_token_threshold": 12},
    "budget_256": {"max_num_batched_tokens": 256},
    "budget_7_tiny_pool": {"max_num_batched_tokens": 7, "num_gpu_blocks": 12},
    "static_batching": {"scheduler": "static", "max_num_seqs": 5},
    **{f"policy_{p}_tiny_pool": {"policy": p, "num_gpu_blocks": 12} for p in sorted(POLICIES)},
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_greedy_tokens_match_hf_fp64(name, reference, engine64):
    wl, ref = reference
    res = engine64.run(wl, CONFIGS[name])
    mism = [r for r in ref if res.tokens[r] != ref[r]]
    assert not mism, f"{name}: {len(mism)} requests differ, e.g. {mism[0]}"
    t = res.trace
    assert t.source == "engine" and t.time_unit == "ms"
    assert (t.requests["output_tokens"] == t.requests["max_tokens"]).all()
    if "tiny_pool" in name:
        assert t.requests["preemptions"].sum() > 0
    if "swap" in name:
        assert (t.events["kind"] == "swap_out").any() and (t.events["kind"] == "swap_in").any()
    if name.startswith("prefix_caching"):
        assert t.requests["cached_tokens"].sum() > 0


def test_prefix_caching_off_has_no_hits(reference, engine64):
    wl, ref = reference
    res = engine64.run(wl, {"enable_prefix_caching": False})
    assert res.tokens == ref
    assert res.trace.requests["cached_tokens"].sum() == 0


def test_timed_arrivals(reference, engine64):
    wl, ref = reference
    timed = Workload([Request(**{**r.__dict__, "arrival_time": 3.0 * r.arrival_step}) for r in wl.requests])
    res = engine64.run(timed, {"num_gpu_blocks": 12})
    assert res.tokens == ref
    req = res.trace.requests.set_index("request")
    assert (req["first_scheduled_time"] >= req["arrival_time"]).all()


def test_engine_makes_the_simulators_plans(reference, engine64):
    """One scheduler, two executors: without prefix caching (where hashes of generated ids
    could differ) the engine's batches are the simulator's, step for step."""
    wl, _ = reference
    cfg = {"num_gpu_blocks": 12, "max_num_batched_tokens": 32}
    eng = engine64.run(wl, cfg).trace
    sim = simulate(wl, cfg)
    cols = ["step", "request", "kind", "tokens", "computed_before"]
    assert eng.batch[cols].reset_index(drop=True).equals(sim.batch[cols].reset_index(drop=True))
    assert eng.kv[["step", "block", "request", "op"]].equals(sim.kv[["step", "block", "request", "op"]])


def _alone_and_in_batch(engine, sampling):
    rnd = random.Random(5)
    reqs = [Request(id=f"b{i:02d}", prompt_len=(pl := rnd.randint(5, 50)), max_tokens=rnd.randint(10, 30),
                    prompt_token_ids=tuple(rnd.randrange(VOCAB) for _ in range(pl))) for i in range(32)]
    target = reqs[17]
    samp = {r.id: sampling for r in reqs}
    alone = engine.run(Workload([target]), {"max_num_batched_tokens": 64}, samp).tokens[target.id]
    batch = engine.run(Workload(reqs), {"max_num_batched_tokens": 64}, samp).tokens[target.id]
    return alone, batch


def test_batch_invariance_greedy_fp64(engine64):
    alone, batch = _alone_and_in_batch(engine64, SamplingParams())
    assert alone == batch


def test_batch_invariance_seeded_sampling_fp64(engine64):
    alone, batch = _alone_and_in_batch(engine64, SamplingParams(temperature=0.9, top_k=50, top_p=0.95, seed=3))
    assert alone == batch
    greedy, _ = _alone_and_in_batch(engine64, SamplingParams())
    assert alone != greedy  # it really sampled
