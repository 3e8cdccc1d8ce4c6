#!/usr/bin/env python3
"""Random configurations and workloads nobody chose, each traced with vLLM 0.34.0's real scheduler
classes in both modes (trace034.py): the fixtures of tests/test_vllm034_random.py.

    /tmp/oracle034/bin/python bench/vllm_oracle/make_random.py [--out tests/fixtures/vllm034_random]
        [--count 40] [--extra 6] [--seed 34000]   # --no-trace: only the workloads (no vLLM needed)
        [--wide N] [--pressure N] [--dup N] --vllm 0.34|0.33|0.32|0.31|...|0.25   # stranger draws

Draw k (k = 0..count-1) uses random.Random(seed + k) and writes rand034_<k>.workload.json (its
config carries "vllm_version": "0.34" and no async key), rand034_<k>.sync.vllm.jsonl (Scheduler,
EngineCore.step) and rand034_<k>.async.vllm.jsonl (AsyncScheduler, step_with_batch_queue).
tight034_<k> and tiny034_<k> (k < extra) take draw k and press it: a pool barely above one
longest request (draw_tight), or budgets of a few tokens and prompts about a block (draw_tiny).
What varies: max_num_seqs, max_num_batched_tokens, num_gpu_blocks (from a pool barely above one
longest request, which preempts, to ample), block_size, chunked prefill, the long-prefill
threshold, prefix caching with shared-prefix groups, fcfs or priority, cache-aware admission
(window and threshold; fcfs with caching), scheduler_reserve_full_isl, the watermark, an explicit
max_model_len, and the arrivals (one burst, bursts, spread, with idle gaps). Workloads stay small
(the fixtures are committed). Only configs vLLM 0.34 starts with are drawn (chunked prefill off
needs max_num_batched_tokens >= max_model_len; max_num_batched_tokens >= max_num_seqs).
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _arrivals(rng: random.Random, n: int) -> list[int]:
    kind = rng.choice(["burst", "bursts", "spread", "gaps"])
    if kind == "burst":
        return [0] * n
    if kind == "bursts":
        at, out = 0, []
        while len(out) < n:
            out += [at] * min(n - len(out), rng.randint(2, 8))
            at += rng.randint(1, 25)
        return out
    rate = rng.uniform(0.2, 2.0)  # requests per step
    at, out = 0.0, []
    for _ in range(n):
        at += rng.expovariate(rate)
        if kind == "gaps" and rng.random() < 0.12:
            at += rng.randint(30, 90)  # the engine runs dry, idles, and starts again
        out.append(int(at))
    return out


def draw(k: int, seed: int, scale: float = 1.0) -> dict:
    """Draw k; `scale` stretches the request count and lengths (the fixtures use 1)."""
    rng = random.Random(seed + k)
    bs = rng.choice([1, 2, 4, 4, 8, 8, 16, 16, 32, 64])
    n = rng.randint(6, max(6, int(24 * scale)))
    long_tail = rng.random() < 0.5
    caching = rng.random() < 0.5
    groups = [rng.randrange(1, 10**6) for _ in range(rng.randint(1, 4))] if caching else []
    reqs = []
    for i, at in enumerate(sorted(_arrivals(rng, n))):
        prompt = (rng.randint(1, 40) if not long_tail or rng.random() < 0.6
                  else rng.randint(40, int(220 * scale)))
        r = {"id": f"r{i:03d}", "arrival_step": at, "prompt_len": prompt,
             "max_tokens": rng.choice([1, 1, 2, 3]) if rng.random() < 0.2 else rng.randint(1, int(40 * scale))}
        if groups and rng.random() < 0.7:
            r["prompt_seed"] = rng.choice(groups)  # a shared prefix: the shorter prompt heads the longer
        reqs.append(r)
    policy = "priority" if rng.random() < 0.3 else "fcfs"
    if policy == "priority":
        for r in reqs:
            r["priority"] = rng.randint(0, 3)
    longest = max(r["prompt_len"] + r["max_tokens"] for r in reqs)
    max_len = longest if rng.random() < 0.8 else longest + rng.randint(1, 64)
    chunked = rng.random() < 0.75
    max_seqs = rng.choice([1, 2, 3, 4, 6, 8, 16, 32, 256])
    budget = rng.choice([8, 16, 24, 32, 48, 64, 96, 128, 256, 512])
    if not chunked:
        budget = max(budget, max_len)  # vLLM refuses a budget below max_model_len without chunking
    budget = max(budget, min(max_seqs, 64))
    max_seqs = min(max_seqs, budget)
    need = -(-max_len // bs)  # blocks of one longest request
    tight = rng.random() < 0.5
    blocks = need + 1 + (rng.randint(0, need) if tight else rng.randint(need, 8 * need + 40))
    cfg = _config(rng, blocks, bs, budget, max_seqs, policy, caching, chunked, max_len, longest,
                  thresholds=((1, 16), (8, 64)), odds=0.2, watermarks=[0.01, 0.02, 0.05, 0.1],
                  admission=(0.6, (2, 10), [0.0, 0.2, 0.5, 0.5, 0.8]))
    cfg["vllm_version"] = "0.34"
    _keep_startable(cfg, need)
    return {"config": cfg, "requests": reqs}


def _config(rng, blocks, bs, budget, max_seqs, policy, caching, chunked, max_len, longest, *, thresholds,
            odds, watermarks, admission) -> dict:
    """A draw's config from its sizes; the rest drawn in the order the committed draws drew it:
    the long-prefill threshold (0 or from one of the two `thresholds` ranges), the full-ISL
    reservation off and a watermark each with probability `odds`, and cache-aware admission
    ((probability, window range, thresholds), or None for none) with fcfs and caching."""
    cfg = {"num_gpu_blocks": blocks, "block_size": bs, "max_num_batched_tokens": budget,
           "max_num_seqs": max_seqs, "policy": policy, "enable_prefix_caching": caching,
           "long_prefill_token_threshold": rng.choice([0, 0, rng.randint(*thresholds[0]), rng.randint(*thresholds[1])]),
           "enable_chunked_prefill": chunked}
    if max_len != longest:
        cfg["max_model_len"] = max_len
    cfg["long_prefill_token_threshold"] = min(cfg["long_prefill_token_threshold"], max_len)
    if rng.random() < odds:
        cfg["scheduler_reserve_full_isl"] = False
    if rng.random() < odds:
        cfg["watermark"] = rng.choice(watermarks)
    if admission is not None and caching and policy == "fcfs" and rng.random() < admission[0]:
        cfg["cache_aware_admission_window"] = rng.randint(*admission[1])
        cfg["cache_aware_admission_threshold"] = rng.choice(admission[2])
    return cfg


def _keep_startable(cfg: dict, need: int) -> None:
    """A watermark that leaves fewer blocks than one longest request would keep it out forever."""
    if cfg.get("watermark") and need > cfg["num_gpu_blocks"] - 1 - int(cfg["watermark"] * cfg["num_gpu_blocks"]):
        del cfg["watermark"]


def draw_tight(k: int, seed: int) -> dict:
    """A draw under pressure: a pool barely above one longest request, often priority, few lanes,
    admission on the first chunk only."""
    wl = draw(k, seed)
    rng = random.Random(10**6 + seed + k)
    wl["requests"] = wl["requests"][:14]  # pressure makes many steps: fewer requests keep the fixture small
    c, reqs = wl["config"], wl["requests"]
    need = -(-c.get("max_model_len", max(r["prompt_len"] + r["max_tokens"] for r in reqs)) // c["block_size"])
    c["num_gpu_blocks"] = need + 1 + rng.randint(0, max(1, need // 2))
    if rng.random() < 0.4:
        c["scheduler_reserve_full_isl"] = False
    if rng.random() < 0.4 and "cache_aware_admission_window" not in c:
        c["policy"] = "priority"
        for r in reqs:
            r["priority"] = rng.randint(0, 3)
    if rng.random() < 0.3:
        c["max_num_seqs"] = min(c["max_num_batched_tokens"], rng.choice([1, 2, 3]))
    _keep_startable(c, need)
    return wl


def draw_tiny(k: int, seed: int) -> dict:
    """A draw at the edges: budgets of a few tokens, thresholds of 1-3, prompts of 1 or 2 tokens or
    about a block, a pool with 0-3 blocks to spare."""
    wl = draw(k, seed)
    rng = random.Random(7 * 10**6 + seed + k)
    wl["requests"] = wl["requests"][:8]
    c, reqs = wl["config"], wl["requests"]
    if rng.random() < 0.8:
        c["enable_chunked_prefill"] = True
    c["long_prefill_token_threshold"] = rng.choice([0, 1, 2, 3])
    if rng.random() < 0.5:
        bs = c["block_size"]
        for r in reqs:
            r["prompt_len"] = rng.choice([1, 1, 2, bs, bs + 1, 2 * bs])
            r["max_tokens"] = rng.choice([1, 2, 3, 5])
        c.pop("max_model_len", None)
    longest = max(r["prompt_len"] + r["max_tokens"] for r in reqs)
    if c["enable_chunked_prefill"]:
        c["max_num_batched_tokens"] = rng.choice([1, 2, 3, 5, 7, 13])
    else:
        c["max_num_batched_tokens"] = max(c["max_num_batched_tokens"], c.get("max_model_len", longest))
    c["max_num_seqs"] = min(c["max_num_seqs"], c["max_num_batched_tokens"])
    need = -(-max(c.get("max_model_len", longest), c["long_prefill_token_threshold"]) // c["block_size"])
    c["num_gpu_blocks"] = need + 1 + rng.randint(0, 3)
    _keep_startable(c, need)
    return wl


def draw_wide(k: int, seed: int, version: str = "0.34") -> dict:
    """A bigger, stranger draw (to hunt): 30-120 requests, prompts up to 1,500 tokens, up to 12
    shared-prefix groups, budgets up to 8,192 and up to 1,024 lanes, block sizes up to 128,
    priorities that repeat and go below 0, long-prefill thresholds up to 1,024, a watermark up to
    0.2, cache-aware admission windows up to 40 (0.34); `version` is written in the config."""
    rng = random.Random(seed + k)
    bs = rng.choice([16, 16, 32, 8, 64, 128])
    n = rng.randint(30, 120)
    caching = rng.random() < 0.7
    groups = [rng.randrange(1, 10**6) for _ in range(rng.randint(1, 12))] if caching else []
    reqs = []
    for i, at in enumerate(sorted(_arrivals(rng, n))):
        kind = rng.random()
        prompt = rng.randint(1, 16) if kind < 0.2 else rng.randint(16, 300) if kind < 0.85 else rng.randint(300, 1500)
        r = {"id": f"r{i:03d}", "arrival_step": at, "prompt_len": prompt,
             "max_tokens": rng.choice([1, 1, 2]) if rng.random() < 0.15 else rng.randint(1, 120)}
        if groups and rng.random() < 0.8:
            r["prompt_seed"] = rng.choice(groups)
        reqs.append(r)
    policy = "priority" if rng.random() < 0.35 else "fcfs"
    if policy == "priority":
        for r in reqs:
            r["priority"] = rng.choice([0, 0, 1, 5, -1])
    longest = max(r["prompt_len"] + r["max_tokens"] for r in reqs)
    max_len = longest if rng.random() < 0.7 else longest + rng.randint(1, 500)
    chunked = rng.random() < 0.85
    max_seqs = rng.choice([4, 8, 16, 32, 64, 128, 256, 1024])
    budget = rng.choice([64, 128, 256, 512, 1024, 2048, 8192])
    if not chunked:
        budget = max(budget, max_len)
    budget = max(budget, min(max_seqs, 64))
    max_seqs = min(max_seqs, budget)
    need = -(-max_len // bs)
    r = rng.random()
    blocks = need + 1 + (rng.randint(0, need) if r < 0.4 else rng.randint(need, 4 * need) if r < 0.8
                         else rng.randint(4 * need, 30 * need))
    cfg = _config(rng, blocks, bs, budget, max_seqs, policy, caching, chunked, max_len, longest,
                  thresholds=((1, 64), (64, 1024)), odds=0.3, watermarks=[0.01, 0.02, 0.05, 0.1, 0.2],
                  admission=(0.5, (1, 40), [0.0, 0.1, 0.5, 0.9, 1.0]) if version == "0.34" else None)
    cfg["vllm_version"] = version
    _keep_startable(cfg, need)
    return {"config": cfg, "requests": reqs}


def draw_pressure(k: int, seed: int, version: str = "0.34") -> dict:
    """draw_wide k pressed (to hunt): mostly the priority policy (priorities -2 to 3), a pool of
    one longest request and up to a third more, often 2-8 lanes."""
    wl = draw_wide(k, seed, version)
    rng = random.Random(5 * 10**6 + seed + k)
    c, reqs = wl["config"], wl["requests"]
    if rng.random() < 0.7 and "cache_aware_admission_window" not in c:
        c["policy"] = "priority"
        for r in reqs:
            r["priority"] = rng.choice([0, 1, 2, 3, -2])
    longest = max(r["prompt_len"] + r["max_tokens"] for r in reqs)
    need = -(-c.get("max_model_len", longest) // c["block_size"])
    c["num_gpu_blocks"] = need + 1 + rng.randint(0, max(1, need // 3))
    if rng.random() < 0.5:
        c["max_num_seqs"] = min(c["max_num_batched_tokens"], rng.choice([2, 3, 4, 8]))
    _keep_startable(c, need)
    return wl


def draw_dup(k: int, seed: int, version: str = "0.34") -> dict:
    """A draw of repeated prompts (to hunt): 10-60 requests over 1-5 prompts (a seed and a length,
    often whole blocks, sometimes one token or a block more or less), prefix caching on, block
    sizes 1-32: whole-prompt cache hits, the last token computed again, evictions."""
    rng = random.Random(seed + k)
    bs = rng.choice([1, 2, 4, 8, 16, 16, 32])
    n = rng.randint(10, 60)
    shapes = [(rng.randrange(1, 10**6), rng.choice([bs, 2 * bs, 3 * bs + 1, rng.randint(1, 200)]))
              for _ in range(rng.randint(1, 5))]
    reqs = []
    for i, at in enumerate(sorted(_arrivals(rng, n))):
        s, length = rng.choice(shapes)
        if rng.random() < 0.2:
            length = max(1, length + rng.choice([-1, 1, bs]))
        reqs.append({"id": f"r{i:03d}", "arrival_step": at, "prompt_len": length, "prompt_seed": s,
                     "max_tokens": rng.choice([1, 1, 2, 3, 8, 30, 60])})
    policy = "priority" if rng.random() < 0.3 else "fcfs"
    if policy == "priority":
        for r in reqs:
            r["priority"] = rng.randint(0, 2)
    longest = max_len = max(r["prompt_len"] + r["max_tokens"] for r in reqs)
    chunked = rng.random() < 0.8
    max_seqs = rng.choice([1, 2, 4, 8, 32, 256])
    budget = rng.choice([4, 16, 64, 256, 2048])
    if not chunked:
        budget = max(budget, max_len)
    budget = max(budget, min(max_seqs, 64))
    max_seqs = min(max_seqs, budget)
    need = -(-max_len // bs)
    blocks = need + 1 + (rng.randint(0, need) if rng.random() < 0.6 else rng.randint(need, 6 * need))
    cfg = _config(rng, blocks, bs, budget, max_seqs, policy, True, chunked, max_len, longest,
                  thresholds=((1, 16), (16, 128)), odds=0.2, watermarks=[0.01, 0.05, 0.1],
                  admission=(0.6, (1, 20), [0.0, 0.3, 0.5, 0.9]) if version == "0.34" else None)
    cfg["vllm_version"] = version
    _keep_startable(cfg, need)
    return {"config": cfg, "requests": reqs}


def draw_fork(k: int, seed: int, version: str = "0.34") -> dict:
    """A draw of forking prompts (to hunt): 8-60 prompts given as token ids that share a trunk (1-5
    trunks of up to 400 tokens) for a random length, often ending mid-block, then go their own way;
    prefix caching on, block sizes 1-32, budgets down to one token, 1-64 lanes."""
    rng = random.Random(seed * 7919 + k)
    bs = rng.choice([1, 2, 4, 4, 8, 16, 16, 32])
    n = rng.randint(8, 60)
    trunks = [[rng.randrange(10, 32000) for _ in range(rng.randint(1, 400))] for _ in range(rng.randint(1, 5))]
    reqs = []
    for i, at in enumerate(sorted(_arrivals(rng, n))):
        trunk = rng.choice(trunks)
        keep = rng.randint(0, len(trunk))
        tail = [rng.randrange(10, 32000) for _ in range(rng.choice([0, 0, 1, 3, rng.randint(1, 200)]))]
        ids = trunk[:keep] + tail or [rng.randrange(10, 32000)]
        reqs.append({"id": f"f{i:03d}", "arrival_step": at, "prompt_len": len(ids), "prompt_token_ids": ids,
                     "max_tokens": rng.choice([1, 2, 3]) if rng.random() < 0.3 else rng.randint(1, 60)})
    policy = "priority" if rng.random() < 0.4 else "fcfs"
    if policy == "priority":
        for r in reqs:
            r["priority"] = rng.choice([0, 0, 1, 2, -1])
    longest = max(r["prompt_len"] + r["max_tokens"] for r in reqs)
    chunked = rng.random() < 0.8
    max_seqs = rng.choice([1, 2, 3, 4, 8, 16, 64])
    budget = rng.choice([1, 2, 4, 8, 16, 33, 64, 128, 512]) if chunked else longest + rng.randint(0, 300)
    budget = max(budget, max_seqs)
    need = -(-longest // bs)
    blocks = need + 1 + (rng.randint(0, need // 2 + 1) if rng.random() < 0.6 else rng.randint(need, 5 * need))
    cfg = {"num_gpu_blocks": blocks, "block_size": bs, "max_num_batched_tokens": budget, "max_num_seqs": max_seqs,
           "policy": policy, "enable_prefix_caching": True, "enable_chunked_prefill": chunked,
           "long_prefill_token_threshold": rng.choice([0, 0, 0, 1, 3, 16, 100]),
           "scheduler_reserve_full_isl": rng.random() < 0.7}
    if has_watermark(version) and rng.random() < 0.3:
        cfg["watermark"] = rng.choice([0.01, 0.05, 0.1])
        _keep_startable(cfg, need)
    if version == "0.34" and policy == "fcfs" and rng.random() < 0.3:
        cfg["cache_aware_admission_window"] = rng.randint(1, 20)
        cfg["cache_aware_admission_threshold"] = rng.choice([0.0, 0.3, 0.5, 0.9])
    cfg["vllm_version"] = version
    return {"config": cfg, "requests": reqs}


PROFILES = {"rand034": draw, "tight034": draw_tight, "tiny034": draw_tiny}


def has_watermark(version: str) -> bool:
    """SchedulerConfig.watermark came in 0.24."""
    return int(version.split(".")[1]) >= 24


def has_async(version: str) -> bool:
    """AsyncScheduler came in 0.10."""
    return int(version.split(".")[1]) >= 10


def for_older(wl: dict, version: str) -> dict:
    """A draw as vLLM 0.33 to 0.8 can run it: no cache-aware admission, no watermark before 0.24,
    FCFS in 0.8 (its V1 scheduler has no priority policy), that vllm_version."""
    c = wl["config"]
    c.pop("cache_aware_admission_window", None)
    c.pop("cache_aware_admission_threshold", None)
    if not has_watermark(version):
        c.pop("watermark", None)
    if int(version.split(".")[1]) <= 8 and c.get("policy") == "priority":
        c["policy"] = "fcfs"
        for r in wl["requests"]:
            r.pop("priority", None)
    c["vllm_version"] = version
    return wl


def older_draw(name: str, version: str, seed: int = 34000) -> dict:
    """The draw an older vLLM's fixture is named for ("rand031_05"; "rand033a_05" for those traced
    async only), as for_older makes it."""
    profile, k = name.rsplit("_", 1)
    short = version.replace(".", "")
    return for_older(PROFILES[profile.replace(f"{short}a", "034").replace(short, "034")](int(k), seed), version)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "vllm034_random"))
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--seed", type=int, default=34000)
    ap.add_argument("--extra", type=int, default=6, help="draws of each of the tight and tiny profiles")
    ap.add_argument("--scale", type=float, default=1.0, help="longer workloads (to hunt; the fixtures use 1)")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--gzip", action="store_true", help="write each trace gzipped (.vllm.jsonl.gz; no timestamp)")
    ap.add_argument("--wide", type=int, default=0,
                    help="instead: this many draws of draw_wide (bigger and stranger; named wide<v>_<k>, "
                         "for the --vllm version, sync and async)")
    ap.add_argument("--pressure", type=int, default=0,
                    help="instead: this many draws of draw_pressure (wide draws under pressure; pressure<v>_<k>)")
    ap.add_argument("--dup", type=int, default=0,
                    help="instead: this many draws of draw_dup (repeated prompts; dup<v>_<k>)")
    ap.add_argument("--fork", type=int, default=0,
                    help="instead: this many draws of draw_fork (prompts that share a trunk then part; fork<v>_<k>)")
    ap.add_argument("--vllm", default="0.34", choices=tuple(f"0.{m}" for m in range(34, 7, -1)),
                    help="0.33 or 0.32: the same draws without cache-aware admission (they have none), traced "
                         "with that vLLM's AsyncScheduler only; named rand033a_<k> etc. "
                         "(tests/fixtures/vllm033_async_random, vllm032_async_random); 0.31 to 0.22: those "
                         "draws in both modes, rand031_<k> etc. (tests/fixtures/vllm031_random ... vllm022_random; "
                         "0.23 and 0.22 without a watermark, which they do not have; 0.9 and 0.8 sync only, "
                         "0.8 under FCFS, and a draw on which the vLLM stops with an AssertionError is left "
                         "out)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.no_trace:
        sys.path.insert(0, str(HERE))
        import trace034
        print(f"vLLM {trace034.installed_version()}", file=sys.stderr)
    todo = [(f"rand034_{k:02d}", draw(k, a.seed, a.scale)) for k in range(a.count)]
    todo += [(f"{p}_{k:02d}", PROFILES[p](k, a.seed)) for p in ("tight034", "tiny034") for k in range(a.extra)]
    modes = (("sync", False), ("async", True))
    if a.wide or a.pressure or a.dup or a.fork:
        v = a.vllm.replace(".", "")
        todo = [(f"wide{v}_{k:03d}", draw_wide(k, a.seed, a.vllm)) for k in range(a.wide)]
        todo += [(f"pressure{v}_{k:03d}", draw_pressure(k, a.seed, a.vllm)) for k in range(a.pressure)]
        todo += [(f"dup{v}_{k:03d}", draw_dup(k, a.seed, a.vllm)) for k in range(a.dup)]
        todo += [(f"fork{v}_{k:03d}", draw_fork(k, a.seed, a.vllm)) for k in range(a.fork)]
        if not has_watermark(a.vllm):
            for _, wl in todo:
                wl["config"].pop("watermark", None)
    elif a.vllm != "0.34":
        short = a.vllm.replace(".", "")
        both = a.vllm not in ("0.33", "0.32")   # held in sync mode too (0.32's sync is held by its recordings)
        todo = [(name.replace("034", short if both else f"{short}a"), for_older(wl, a.vllm)) for name, wl in todo]
        if not both:
            modes = (("async", True),)
        elif not has_async(a.vllm):
            modes = (("sync", False),)
    for name, wl in todo:
        (out / f"{name}.workload.json").write_text(json.dumps(wl, separators=(",", ":")) + "\n")
        if a.no_trace:
            continue
        for mode, is_async in modes:
            buf = io.StringIO()
            try:
                lines = trace034.trace(wl, buf, is_async)
            except AssertionError:
                # vLLM 0.9 to 0.10.1 assert when the priority policy preempts a request already
                # scheduled in the step (their engine dies there): no trace to hold
                print(f"{name} {mode}: vLLM stopped with an AssertionError; left out", file=sys.stderr)
                for f in out.glob(f"{name}.*"):
                    f.unlink()
                break
            data = buf.getvalue().encode()
            path = out / f"{name}.{mode}.vllm.jsonl"
            if a.gzip:   # no timestamp in the header: the same trace gives the same bytes
                path, data = path.with_name(path.name + ".gz"), gzip.compress(data, compresslevel=9, mtime=0)
            path.write_bytes(data)
            print(f"{name} {mode}: {lines} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
