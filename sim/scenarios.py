"""Built-in named scenarios: a workload plus the scheduler config it is meant to show off.

Each scenario is a function that builds its Workload from code (no files read at run time);
the registry maps a short key to a :class:`Scenario` with a title and a plain-language blurb.
Three of them are the vLLM conformance cases rebuilt from the generator that wrote them
(``shared/vllm/make_cases.py``), so what the dashboard plays is what real vLLM was traced on:
``lesson_abc``, ``preemption_pressure``, ``prefix_sharing`` and ``random_500``.

Adding one: write a function returning a Workload and decorate it with ``@scenario(...)``.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable

from .workload import Request, Workload, generate


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    blurb: str  # one or two plain sentences: what to look at
    build: Callable[[], Workload]
    cost: str = "units"  # the cost model the scenario reads best under

    def workload(self) -> Workload:
        wl = self.build()
        wl.name = self.key
        return wl


SCENARIOS: dict[str, Scenario] = {}
DEFAULT_SCENARIO = "lesson_abc"


def scenario(key: str, title: str, blurb: str, cost: str = "units"):
    def deco(fn: Callable[[], Workload]) -> Callable[[], Workload]:
        SCENARIOS[key] = Scenario(key, title, blurb, fn, cost)
        return fn
    return deco


def get(key: str) -> Scenario:
    try:
        return SCENARIOS[key]
    except KeyError:
        raise KeyError(f"unknown scenario {key!r}; known: {', '.join(SCENARIOS)}") from None


def workload(key: str) -> Workload:
    """The scenario's Workload (a fresh object every call)."""
    return get(key).workload()


# The oracle's defaults for its hand-made cases (make_cases.cfg).
def _cfg(**kw) -> dict:
    c = {"num_gpu_blocks": 64, "block_size": 16, "max_num_batched_tokens": 64, "max_num_seqs": 8,
         "policy": "fcfs", "enable_prefix_caching": False, "long_prefill_token_threshold": 0,
         "enable_chunked_prefill": True}
    c.update(kw)
    return c


def _req(i: int, arrival: int, prompt: int, out: int, prio: int = 0, seed: int | None = None,
         rid: str | None = None, tenant: str = "default") -> Request:
    return Request(id=rid or f"r{i:04d}", prompt_len=prompt, max_tokens=out, arrival_step=arrival,
                   priority=prio, prompt_seed=seed, tenant=tenant)


# ---------------------------------------------------------------------------------------------

@scenario("lesson_abc", "Lesson: A, B, C in 8 blocks",
          "The lesson's mini vLLM loop (Example 12): three requests, a budget of 8 tokens per step "
          "and 8 KV blocks of 4 tokens. A's prompt is chunked, C is preempted at step 5 when A "
          "needs a block, and C recomputes its tokens when it comes back.")
def lesson_abc() -> Workload:
    return Workload(config=_cfg(num_gpu_blocks=8, block_size=4, max_num_batched_tokens=8, max_num_seqs=3),
                    requests=[_req(0, 0, 10, 4, rid="A"), _req(1, 0, 6, 6, rid="B"), _req(2, 0, 5, 3, rid="C")])


@scenario("preemption_pressure", "Preemption pressure: 16 requests, 30 usable blocks",
          "Sixteen requests share 30 usable blocks of 8 tokens. As they decode, their KV caches grow "
          "until a running request cannot get a block: vLLM preempts the newest one, which later "
          "recomputes its prompt and the tokens it had generated.")
def preemption_pressure() -> Workload:
    rng = random.Random(5)  # make_cases.preempt_fcfs: the same 16 requests vLLM was traced on
    reqs = [_req(i, i // 2, rng.randint(30, 90), rng.randint(10, 60)) for i in range(16)]
    return Workload(config=_cfg(num_gpu_blocks=31, block_size=8, max_num_batched_tokens=64, max_num_seqs=8),
                    requests=reqs)


@scenario("lesson_preemption", "Lesson: KV memory runs out (Example 8)",
          "The lesson's Example 8: four requests with prompts of 60, 50, 70 and 40 tokens decode "
          "in 20 blocks of 16 tokens until the KV cache is full; then vLLM preempts the newest running "
          "request, which must recompute its tokens later.", cost="rtx4090-8B")
def lesson_preemption() -> Workload:
    return Workload(config=_cfg(num_gpu_blocks=21, block_size=16, max_num_batched_tokens=256, max_num_seqs=8),
                    requests=[_req(i, 0, p, 60, rid=f"r{i}") for i, p in enumerate((60, 50, 70, 40))])


@scenario("long_prompt", "Long prompt among chatters (chunked prefill)",
          "Four short chats are decoding when a 4,000-token prompt arrives (lesson Examples 4 and 5). "
          "With a budget of 512 tokens per step the prompt is cut into chunks and the chats keep "
          "getting a token every step; raise the budget to 4,096 to see one huge step stall them.")
def long_prompt() -> Workload:
    chats = [_req(i, 0, 16 + 4 * i, 40, rid=f"chat{i}") for i in range(4)]
    late = [_req(5 + i, 12 + 6 * i, 24, 20, rid=f"chat{4 + i}") for i in range(2)]
    long = [_req(4, 3, 4000, 8, rid="long")]
    return Workload(config=_cfg(num_gpu_blocks=400, block_size=16, max_num_batched_tokens=512, max_num_seqs=8),
                    requests=sorted(chats + long + late, key=lambda r: r.arrival_step))


@scenario("two_tenants", "Two tenants (fairness)",
          "Lesson Example 9: tenant A sends 12 requests at once, tenant B sends 2 a step later, and "
          "there are 4 slots. Under FCFS B waits behind all of A; round-robin by tenant (the "
          "default here) lets B in as soon as a slot frees; try VTC or a per-tenant cap of 3.")
def two_tenants() -> Workload:
    reqs = [_req(i, 0, 8, 10, rid=f"A{i}", tenant="A") for i in range(12)]
    reqs += [_req(12 + i, 1, 8, 10, rid=f"B{i}", tenant="B") for i in range(2)]
    return Workload(config=_cfg(num_gpu_blocks=64, block_size=16, max_num_batched_tokens=64, max_num_seqs=4,
                                policy="round_robin"),
                    requests=reqs)


@scenario("prefix_sharing", "Prefix sharing (prefix caching on)",
          "Groups of requests share a prompt prefix. With prefix caching on, a later member finds "
          "the group's full blocks already computed (a ◆ marks a block shared by several requests, "
          "teal a free block that still caches a prefix) and skips that part of its prefill, even "
          "after the first member has finished.")
def prefix_sharing() -> Workload:
    reqs, i = [], 0  # make_cases.prefix_workload: traced in real vLLM with caching on and off
    for g, (plen, n) in enumerate([(64, 4), (40, 3), (100, 3), (17, 3)]):
        for k in range(n):
            reqs.append(_req(i, 4 * k + g, plen + 8 * (k % 2), 6 + k, seed=1000 + g))
            i += 1
    i += 4
    reqs += [_req(i - 4 + j, 2 * j, 30, 10) for j in range(4)]
    for k in range(3):
        reqs.append(_req(i + k, 24, 18 + 8 * k, 3, seed=2000))
    return Workload(config=_cfg(num_gpu_blocks=40, block_size=8, max_num_batched_tokens=64, max_num_seqs=6,
                                enable_prefix_caching=True),
                    requests=reqs)


@scenario("random_500", "Random mix: 500 requests",
          "500 requests with mixed prompt (1-600 tokens) and output (1-128 tokens) lengths arriving "
          "over about 500 steps, on 300 blocks of 16 tokens with a 512-token budget and 32 sequences: "
          "a busy server with occasional preemptions. The same workload real vLLM was traced on.")
def random_500() -> Workload:
    # make_cases.random_workload(500, 1, "fcfs", False, 300, 16, 512, 32, 0), draw for draw
    rng = random.Random(1)
    reqs, t = [], 0
    for i in range(500):
        t += rng.choice([0, 0, 0, 1, 1, 2, 3])
        plen = rng.choice([rng.randint(1, 32), rng.randint(16, 200), rng.randint(100, 600)])
        out = rng.choice([rng.randint(1, 16), rng.randint(8, 128)])
        shared = rng.random() < 0.4
        reqs.append(_req(i, t, plen, out, seed=(rng.randrange(20) if shared else None)))
    return Workload(config=_cfg(num_gpu_blocks=300, block_size=16, max_num_batched_tokens=512, max_num_seqs=32),
                    requests=reqs)


@scenario("poisson_stream", "Poisson stream: 300 requests",
          "A steady random stream (Poisson arrivals, 0.4 per step on average) with long-tailed "
          "prompt and output lengths: the queue grows and drains as bursts come and go.")
def poisson_stream() -> Workload:
    return generate(300, seed=7, arrival="poisson", rate=0.4,
                    prompt={"dist": "lognormal", "median": 120, "sigma": 0.8, "max": 1500},
                    output={"dist": "lognormal", "median": 60, "sigma": 0.7, "max": 400},
                    config=_cfg(num_gpu_blocks=600, block_size=16, max_num_batched_tokens=512, max_num_seqs=24))


@scenario("tenant_flood", "Flooding tenant vs a light one (fairness)",
          "Tenant 'flood' sends 60 long requests at once; tenant 'light' sends a short one every 6 steps. "
          "8 slots. Under FCFS the light tenant waits behind the whole flood; round-robin and VTC let it in "
          "as soon as a slot frees, and VTC, which counts tokens rather than requests, serves it sooner "
          "still; a per-tenant cap keeps a slot free for it at the cost of throughput.")
def tenant_flood() -> Workload:
    return flood_workload()  # the Tenants page's generator, with its defaults


def flood_workload(flood_requests: int = 60, flood_prompt: int = 96, flood_output: int = 48,
                   light_requests: int = 12, light_every: int = 6, light_prompt: int = 24,
                   light_output: int = 12, slots: int = 8, seed: int = 0) -> Workload:
    """A flooding tenant against a light one. Tenant "flood" sends ``flood_requests`` long
    requests at step 0; tenant "light" sends a short one every ``light_every`` steps from step 2.
    Lengths vary by +-25% (seeded). ``slots`` running requests at a time, a 512-token budget and
    a KV cache that holds every request at once (so only the scheduler's order matters)."""
    rng = random.Random(seed)

    def jitter(n: int) -> int:
        return max(1, int(round(n * rng.uniform(0.75, 1.25))))

    reqs = [Request(f"F{i:02d}", jitter(flood_prompt), jitter(flood_output), arrival_step=0, tenant="flood")
            for i in range(flood_requests)]
    reqs += [Request(f"L{i:02d}", jitter(light_prompt), jitter(light_output), arrival_step=2 + i * light_every,
                     tenant="light") for i in range(light_requests)]
    reqs.sort(key=lambda q: q.arrival_step)
    tokens = sum(q.prompt_len + q.max_tokens for q in reqs)
    blocks = 1 + math.ceil(tokens / 16) + len(reqs)
    return Workload(config={"num_gpu_blocks": int(blocks), "block_size": 16, "max_num_batched_tokens": 512,
                            "max_num_seqs": int(slots), "policy": "vtc"}, requests=reqs)
