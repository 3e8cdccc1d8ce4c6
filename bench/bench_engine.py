"""The engine against HF transformers' static batching, on the same model and requests.

  python bench/bench_engine.py                 # tiny model: long-tailed and uniform workloads,
                                               # step time vs batch, paged vs contiguous attention
  python bench/bench_engine.py --model m100    # the ~125M preset (slow on a small CPU)
  python bench/bench_engine.py --only e2e      # or: steps, attention
  python bench/bench_engine.py --device cuda --dtype bfloat16 --hardware h200   # on a GPU
  python bench/bench_engine.py --device cuda --dtype bfloat16 --attention flex  # FlexAttention backend

End to end: 64 requests, prompts uniform 16-128 tokens, greedy, EOS ignored, batch 16 for both.
- longtail: output lengths lognormal (median 24, sigma 1.0, at most 384);
- uniform: every request 64 output tokens.
HF static batching = `generate()` on groups of 16 in arrival order, left padding, each group
run to its longest member's length; tokens past a request's own length are dropped. The
engine: continuous batching under the simulator's vLLM scheduler, max_num_seqs 16, token
budget 256, chunked prefill. Both run the same weights (the engine's random ones, loaded into
an HF LlamaForCausalLM by parameter name) in float32 on one thread; every request's tokens
must be identical. Useful tokens/s = generated tokens that were asked for / wall seconds.
Each system runs `--repeat` times, alternating; the best time counts (the machine is shared).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from engine import EngineConfig, LLMEngine  # noqa: E402
from engine.attention import Workspace, paged_attention, plan_attention  # noqa: E402
from engine.attention_flex import FlexBatch, flex_attention_step  # noqa: E402
from engine.device import setup_threads, synchronize  # noqa: E402
from engine.kv_cache import PagedKVCache  # noqa: E402
from engine.runner import ModelRunner  # noqa: E402
from sim.workload import Request, Workload, lengths  # noqa: E402

import numpy as np  # noqa: E402

BATCH = 16
SCHED = {"num_gpu_blocks": 1200, "block_size": 16, "max_num_batched_tokens": 256, "max_num_seqs": BATCH}


def workload(kind: str, n: int = 64, seed: int = 0, vocab: int = 32000) -> Workload:
    rng = np.random.default_rng(seed)
    prompt = lengths({"dist": "uniform", "low": 16, "high": 128}, n, rng)
    if kind == "longtail":
        out = lengths({"dist": "lognormal", "median": 24, "sigma": 1.0, "max": 384}, n, rng)
    else:
        out = np.full(n, 64)
    reqs = [Request(f"r{i:02d}", int(p), int(o), prompt_token_ids=tuple(int(t) for t in rng.integers(10, vocab, p)))
            for i, (p, o) in enumerate(zip(prompt, out))]
    return Workload(reqs, name=kind)


def hf_twin(engine_model):
    """An HF LlamaForCausalLM with the engine model's weights (names are the same)."""
    import transformers
    c = engine_model.config
    hc = transformers.LlamaConfig(vocab_size=c.vocab_size, hidden_size=c.hidden_size,
                                  intermediate_size=c.intermediate_size, num_hidden_layers=c.num_layers,
                                  num_attention_heads=c.num_heads, num_key_value_heads=c.num_kv_heads,
                                  head_dim=c.head_dim, rope_theta=c.rope_theta, rms_norm_eps=c.rms_norm_eps,
                                  max_position_embeddings=c.max_position_embeddings, eos_token_id=None,
                                  bos_token_id=None, pad_token_id=0, tie_word_embeddings=c.tie_word_embeddings)
    hf = transformers.LlamaForCausalLM(hc).eval()
    missing, unexpected = hf.load_state_dict(engine_model.state_dict(), strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    p = next(engine_model.parameters())
    return hf.to(device=p.device, dtype=p.dtype)


def hf_static(hf, wl: Workload) -> tuple[float, dict]:
    """generate() on groups of BATCH requests, left-padded; returns (seconds, tokens)."""
    out, t0 = {}, time.perf_counter()
    reqs = wl.requests
    with torch.inference_mode():
        for i in range(0, len(reqs), BATCH):
            group = reqs[i:i + BATCH]
            width = max(r.prompt_len for r in group)
            ids = torch.zeros(len(group), width, dtype=torch.long)
            mask = torch.zeros(len(group), width, dtype=torch.long)
            for j, r in enumerate(group):
                ids[j, width - r.prompt_len:] = torch.tensor(r.prompt_token_ids)
                mask[j, width - r.prompt_len:] = 1
            ids, mask = ids.to(hf.device), mask.to(hf.device)
            gen = hf.generate(ids, attention_mask=mask, max_new_tokens=max(r.max_tokens for r in group),
                              do_sample=False, eos_token_id=None, pad_token_id=0)
            for j, r in enumerate(group):
                out[r.id] = gen[j, width:width + r.max_tokens].tolist()
    return time.perf_counter() - t0, out


def engine_run(engine: LLMEngine, wl: Workload) -> tuple[float, dict, object]:
    t0 = time.perf_counter()
    res = engine.run(wl, SCHED)
    return time.perf_counter() - t0, res.tokens, res.trace


def e2e(engine: LLMEngine, repeat: int) -> list[dict]:
    hf = hf_twin(engine.model)
    rows = []
    for kind in ("longtail", "uniform"):
        wl = workload(kind)
        useful = sum(r.max_tokens for r in wl.requests)
        t_hf = t_en = float("inf")
        for _ in range(repeat):
            dt, hf_tok = hf_static(hf, wl)
            t_hf = min(t_hf, dt)
            dt, en_tok, trace = engine_run(engine, wl)
            t_en = min(t_en, dt)
        same = sum(hf_tok[r.id] == en_tok[r.id] for r in wl.requests)
        exact = engine.dtype in (torch.float32, torch.float64) and engine.device.type == "cpu"
        s = trace.steps
        row = {"workload": kind, "requests": len(wl.requests), "useful_tokens": useful,
               "prompt_tokens": sum(r.prompt_len for r in wl.requests),
               "hf_slot_steps": sum(BATCH * max(r.max_tokens for r in wl.requests[i:i + BATCH])
                                    for i in range(0, len(wl.requests), BATCH)),
               "hf_s": round(t_hf, 2), "hf_tok_s": round(useful / t_hf, 1),
               "engine_s": round(t_en, 2), "engine_tok_s": round(useful / t_en, 1),
               "speedup": round(t_hf / t_en, 2), "identical_requests": f"{same}/{len(wl.requests)}",
               "engine_steps": int(len(s)), "engine_forward_share": round(float(s["t_forward"].sum()) /
                                                                          float((s["end"] - s["start"]).sum()), 3)}
        rows.append(row)
        print(json.dumps(row), flush=True)
        if same != len(wl.requests) and exact:  # bf16/fp16 and GPU kernels may round ties apart: reported only
            bad = [r.id for r in wl.requests if hf_tok[r.id] != en_tok[r.id]]
            raise SystemExit(f"token mismatch on {kind}: {bad[:5]}")
    return rows


def step_times(engine: LLMEngine, ctx: int = 256, repeat: int = 5, hardware: str | None = None,
               attention: str = "gather") -> list[dict]:
    """Decode-only step time (forward + sampling) vs batch size at a context of `ctx` tokens;
    with `hardware` (a sim.cost preset), also the memory-bandwidth roofline of the same step: the
    weights once plus every sequence's KV cache, read at the preset's bandwidth."""
    model = engine.model
    bs = 16
    nb = ctx // bs + 1
    rows = []
    elem = torch.empty((), dtype=engine.dtype).element_size()
    bw = None
    if hardware:
        from sim.cost import HARDWARE
        bw = HARDWARE[hardware].bandwidth
    for b in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        runner = ModelRunner(model, num_blocks=b * nb + 1, block_size=bs, attention=attention)
        perm = torch.randperm(b * nb, generator=torch.Generator().manual_seed(b)) + 1  # scattered blocks
        ents = []
        for i in range(b):
            seq = types.SimpleNamespace(id=f"s{i}", tokens=[11] * (ctx + 1), num_tokens=ctx + 1, num_output=1,
                                        blocks=perm[i * nb:(i + 1) * nb].tolist())
            ents.append(types.SimpleNamespace(seq=seq, tokens=1, computed_before=ctx))
        plan = types.SimpleNamespace(entries=ents, swap_out={}, swap_in={})
        from engine.sampling import SamplingParams
        greedy = SamplingParams()
        runner.execute(plan, lambda s: greedy)  # warm up
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            runner.execute(plan, lambda s: greedy)
            best = min(best, time.perf_counter() - t0)
        row = {"batch": b, "ctx": ctx, "attention": runner.attention, "step_ms": round(best * 1000, 3),
               "tok_s": round(b / best, 1)}
        if bw:
            read = model.config.num_params * elem + b * (ctx + 1) * model.config.kv_bytes_per_token(elem)
            row["roofline_ms"] = round(read / bw * 1000, 4)
            row["x_roofline"] = round(best * 1000 / row["roofline_ms"], 1)
        rows.append(row)
        print(json.dumps(rows[-1]), flush=True)
    return rows


def attention_cost(engine: LLMEngine, repeat: int = 10, flex: bool = False) -> list[dict]:
    """One layer's decode attention: paged (gather into the workspace + masked SDPA) against a
    contiguous per-request cache [B, Hkv, ctx, D] (gpt-fast style) with the same mask; with
    `flex`, also FlexAttention reading the block table in place (its block mask built once)."""
    c = engine.model.config
    dev, dt = engine.device, engine.dtype
    rows = []
    for b, ctx in ((16, 256), (32, 256), (64, 256), (32, 1024)):
        bs = 16
        nb = -(-ctx // bs)
        cache = PagedKVCache(1, b * nb + 1, bs, c.num_kv_heads, c.head_dim, dt, dev)
        cache.data.normal_()
        perm = (torch.randperm(b * nb, generator=torch.Generator().manual_seed(0)) + 1).tolist()
        tables = [perm[i * nb:(i + 1) * nb] for i in range(b)]
        ctx_lens = [ctx - (i % bs) for i in range(b)]  # partial last blocks
        batch = plan_attention([1] * b, [n - 1 for n in ctx_lens], tables, bs, dev)
        q = torch.randn(b, c.num_heads, c.head_dim, device=dev, dtype=dt)
        ws = Workspace()
        kc = torch.randn(b, c.num_kv_heads, ctx, c.head_dim, device=dev, dtype=dt)
        vc = torch.randn(b, c.num_kv_heads, ctx, c.head_dim, device=dev, dtype=dt)
        mask = (torch.arange(ctx, device=dev)[None, :] < torch.tensor(ctx_lens, device=dev)[:, None])[:, None, None, :]

        def paged():
            paged_attention(q, cache, 0, batch, ws)

        def contiguous():
            F.scaled_dot_product_attention(q[:, :, None], kc, vc, attn_mask=mask, enable_gqa=True)

        fns = [("paged", paged), ("contiguous", contiguous)]
        if flex:
            fb = FlexBatch([1] * b, [n - 1 for n in ctx_lens], tables, bs, cache.num_blocks, dev)
            fns.append(("flex", lambda: flex_attention_step(q, cache, 0, fb)))
        res = {}
        for name, fn in fns:
            fn()
            best = float("inf")
            for _ in range(repeat):
                synchronize(dev)
                t0 = time.perf_counter()
                fn()
                synchronize(dev)
                best = min(best, time.perf_counter() - t0)
            res[name] = best * 1000
        rows.append({"batch": b, "ctx": ctx, "paged_ms": round(res["paged"], 3),
                     "contiguous_ms": round(res["contiguous"], 3), "ratio": round(res["paged"] / res["contiguous"], 2),
                     **({"flex_ms": round(res["flex"], 3), "flex_vs_paged": round(res["flex"] / res["paged"], 2)}
                        if flex else {})})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def mixed_split_cost(engine: LLMEngine, repeat: int = 10) -> dict:
    """A mixed step (15 decode tokens at ctx 256 + one 241-token prefill chunk): the decode and
    chunk groups as two SDPA calls (the engine's layout) against one padded call."""
    c = engine.model.config
    dev, dt = engine.device, engine.dtype
    bs, nb = 16, 17
    cache = PagedKVCache(1, 16 * nb + 1, bs, c.num_kv_heads, c.head_dim, dt, dev)
    cache.data.normal_()
    tables = [list(range(1 + i * nb, 1 + (i + 1) * nb)) for i in range(16)]
    q_lens, starts = [1] * 15 + [241], [255] * 15 + [0]
    q = torch.randn(sum(q_lens), c.num_heads, c.head_dim, device=dev, dtype=dt)
    res = {}
    for name, split in (("split_ms", True), ("one_call_ms", False)):
        batch = plan_attention(q_lens, starts, tables, bs, dev, split=split)
        ws = Workspace()
        paged_attention(q, cache, 0, batch, ws)
        best = float("inf")
        for _ in range(repeat):
            synchronize(dev)
            t0 = time.perf_counter()
            paged_attention(q, cache, 0, batch, ws)
            synchronize(dev)
            best = min(best, time.perf_counter() - t0)
        res[name] = round(best * 1000, 3)
    print(json.dumps({"mixed_step": "15 decode + 241-token chunk", **res}), flush=True)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny", help="preset (tiny, m100) or checkpoint directory")
    ap.add_argument("--only", choices=("e2e", "steps", "attention"))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")
    ap.add_argument("--dtype", default="float32", help="float32 (default), bfloat16, float16, float64, auto")
    ap.add_argument("--attention", default="gather", choices=("gather", "flex"),
                    help="the engine's attention backend (flex: FlexAttention, after its self-test)")
    ap.add_argument("--hardware", help="a sim.cost hardware preset (e.g. h200): add its memory-bandwidth "
                                       "roofline to the step-time curve")
    args = ap.parse_args(argv)
    threads = setup_threads(0)
    engine = LLMEngine(EngineConfig(model=args.model, device=args.device, dtype=args.dtype,
                                    attention=args.attention), SCHED)
    c = engine.model.config
    where = torch.cuda.get_device_name(engine.device) if engine.device.type == "cuda" else "cpu"
    print(f"# model {args.model}: {c.num_params / 1e6:.1f}M parameters, {c.num_layers} layers, hidden "
          f"{c.hidden_size}, vocab {c.vocab_size}; {where} {str(engine.dtype).replace('torch.', '')}, "
          f"{threads} thread(s)", flush=True)
    runner = engine.runner
    if args.attention != "gather":
        print(f"# attention {runner.attention}: {runner.attention_check}", flush=True)
    out = {"model": args.model, "params": c.num_params, "threads": threads, "device": where,
           "dtype": str(engine.dtype).replace("torch.", ""), "attention": runner.attention,
           "attention_check": runner.attention_check}
    if args.only in (None, "e2e"):
        out["e2e"] = e2e(engine, args.repeat)
    if args.only in (None, "steps"):
        out["step_time_vs_batch"] = step_times(engine, hardware=args.hardware, attention=args.attention)
    if args.only in (None, "attention"):
        out["paged_vs_contiguous"] = attention_cost(engine, flex=args.attention == "flex")
        out["mixed_step_attention"] = mixed_split_cost(engine)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
