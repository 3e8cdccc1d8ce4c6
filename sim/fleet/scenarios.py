"""Built-in fleet scenarios: a workload, the fleet it runs on and the router A/B it is meant to
show. Built from code with seeded generators (nothing read at run time).

- chat: chat traffic on 4 replicas, every conversation opening with one of 24 shared system
  prompts (1,024 tokens): a cache-aware router keeps each system prompt on one replica, round
  robin makes every replica compute them all.
- bursty: a steady chat tenant and a "batch" tenant that sends bursts of long prompts: which
  router keeps the chat tenant's TTFT low while the bursts land.
- stale: a router that sends each request to the replica with the lowest reported KV use, its
  signals refreshed every 200 ms against exact: between refreshes every request herds onto the
  replica that looked emptiest (BLIS reported +354% p99 TTFT from a 100 ms refresh).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..workload import PROMPT_BLOCK_TOKENS, Request, Workload
from .fleet import FleetSettings

COST = "a100-8B-fp16"   # every scenario's steps cost ms on this roofline


@dataclass(frozen=True)
class FleetScenario:
    key: str
    title: str
    blurb: str
    build: Callable[[], Workload]
    a: FleetSettings                 # the first router of the A/B (what the page opens on)
    b: FleetSettings                 # the second
    config: dict = field(default_factory=dict)
    cost: str = COST

    def workload(self) -> Workload:
        wl = self.build()
        wl.name = self.key
        return wl


FLEET_SCENARIOS: dict[str, FleetScenario] = {}
DEFAULT_FLEET_SCENARIO = "chat"


def _add(s: FleetScenario) -> None:
    FLEET_SCENARIOS[s.key] = s


def _poisson(rng: np.random.Generator, n: int, rate_per_s: float) -> np.ndarray:
    return np.cumsum(rng.exponential(1000.0 / rate_per_s, n))


def chat(n: int = 600, seed: int = 11, rate_per_s: float = 16.0, groups: int = 24) -> Workload:
    """n conversations; each opens with one of `groups` 1,024-token system prompts (two
    512-token prompt blocks, shared by every request of the group), then its own turn."""
    rng = np.random.default_rng(seed)
    at = _poisson(rng, n, rate_per_s)
    sys_blocks = 1024 // PROMPT_BLOCK_TOKENS
    reqs = []
    for i in range(n):
        g = int(rng.integers(groups))
        user = int(rng.integers(32, 256))
        reqs.append(Request(id=f"chat-{i}", prompt_len=1024 + user, max_tokens=int(rng.integers(32, 256)),
                            arrival_time=round(float(at[i]), 3), tenant=f"system-{g}",
                            prompt_blocks=tuple(range(g * sys_blocks, (g + 1) * sys_blocks))))
    # a pool that holds a few system prompts beside the running requests, not all 24
    return Workload(reqs, {"enable_prefix_caching": True, "num_gpu_blocks": 2000, "block_size": 16,
                           "max_num_seqs": 64, "max_num_batched_tokens": 2048})


def bursty(seed: int = 12) -> Workload:
    """A chat tenant at 16 requests/s for 20 s; a batch tenant sending 5 bursts of 12 prompts of
    3-6k tokens."""
    rng = np.random.default_rng(seed)
    reqs = []
    at = _poisson(rng, 320, 16.0)
    for i, t in enumerate(at):
        reqs.append(Request(id=f"chat-{i}", prompt_len=int(rng.integers(64, 512)), max_tokens=int(rng.integers(32, 200)),
                            arrival_time=round(float(t), 3), tenant="chat"))
    for b in range(5):
        t0 = 2000.0 + 4000.0 * b
        for j in range(12):
            reqs.append(Request(id=f"batch-{b}-{j}", prompt_len=int(rng.integers(3000, 6000)),
                                max_tokens=int(rng.integers(16, 64)), arrival_time=round(t0 + 5.0 * j, 3),
                                tenant="batch"))
    return Workload(reqs, {"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 64,
                           "max_num_batched_tokens": 2048})


def stale(seed: int = 13) -> Workload:
    rng = np.random.default_rng(seed)
    at = _poisson(rng, 500, 40.0)
    reqs = [Request(id=f"req-{i}", prompt_len=int(rng.integers(256, 2048)), max_tokens=int(rng.integers(64, 256)),
                    arrival_time=round(float(t), 3)) for i, t in enumerate(at)]
    return Workload(reqs, {"num_gpu_blocks": 3000, "block_size": 16, "max_num_seqs": 48,
                           "max_num_batched_tokens": 2048})


_add(FleetScenario(
    "chat", "Chat with shared system prompts (4 replicas)",
    "24 system prompts, each shared by every conversation that opens with it. Cache-aware routing keeps "
    "each prompt on one replica, so it is computed once; round robin computes each on every replica.",
    chat, a=FleetSettings(replicas=4, router="cache_aware"), b=FleetSettings(replicas=4, router="round_robin")))
_add(FleetScenario(
    "bursty", "A bursty mix with a long-prompt tenant (4 replicas)",
    "Steady chat traffic, and a batch tenant that sends bursts of 3-6k-token prompts. Least loaded spreads "
    "each burst over the replicas; power of two draws two replicas at random for each request.",
    bursty, a=FleetSettings(replicas=4, router="least_loaded"), b=FleetSettings(replicas=4, router="power_of_two")))
_add(FleetScenario(
    "stale", "Stale signals that herd (4 replicas)",
    "Each request goes to the replica reporting the lowest KV use. Refreshed every 200 ms, the signal "
    "lags: everything arriving in between piles onto the replica that looked emptiest. Refreshed at every "
    "decision, the load spreads.",
    stale, a=FleetSettings(replicas=4, router="least_loaded", router_config={"signal": "kv_usage"},
                           refresh_interval=200.0),
    b=FleetSettings(replicas=4, router="least_loaded", router_config={"signal": "kv_usage"})))


def get_fleet_scenario(key: str) -> FleetScenario:
    try:
        return FLEET_SCENARIOS[key]
    except KeyError:
        raise KeyError(f"unknown fleet scenario {key!r}; known: {', '.join(FLEET_SCENARIOS)}") from None
