"""What a router is: a small class registered by name that picks a replica for each request.

A router sees the fleet through a RouterContext at the moment a request reaches it: one
ReplicaView per replica with the signals a real router has (its own in-flight count, and the
engine-reported queue, running count and KV use, which are as stale as the refresh interval
makes them), plus the prefix-cache queries the precise scorers make. It returns a Decision:
the pick, the rule that made it, the candidates and every scorer's score per replica, so that
a page can say why each request went where.

Adding a router = one class in sim/fleet/routers/ with @register_router("name"); make_router and
router_names (sim/fleet/routers/__init__.py) see every registered one.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable

from ..limits import shown

MAX_SETTING = 2**53   # a router setting's numbers: counts and thresholds, far below this
MAX_SETTING_TEXT = 100   # a router setting's text: a flavor's or a granularity's name

ROUTERS: dict[str, type["Router"]] = {}


def register_router(name: str) -> Callable[[type], type]:
    def deco(cls):
        cls.name = name
        ROUTERS[name] = cls
        return cls
    return deco


@dataclass
class ReplicaView:
    """One replica as the router sees it when a request arrives."""
    index: int
    in_flight: int          # the router's own count: dispatched, response not yet ended (+ the tail)
    waiting: int            # engine-reported queue length (at the last signal refresh)
    running: int            # engine-reported running requests (at the last signal refresh)
    kv_usage: float         # engine-reported KV-cache use, 0..1 (at the last signal refresh)
    used_blocks: int        # engine-reported KV blocks in use (at the last signal refresh)
    num_blocks: int         # usable KV blocks of the replica's pool
    block_size: int


@dataclass
class Decision:
    replica: int
    reason: str                               # the rule that picked it (e.g. prefix_hit, load_imbalance, tie)
    candidates: tuple[int, ...] = ()          # replicas considered (all of them unless the rule draws a few)
    scores: dict[str, list[float]] = field(default_factory=dict)   # scorer -> one score per replica
    detail: dict = field(default_factory=dict)                    # e.g. {"match_rate": 0.42}


class RouterContext:
    """The fleet at one routing decision. `replicas` are the views; `cached_blocks(i, req)`
    counts the leading prompt blocks of `req` held in replica i's real prefix cache (llm-d's
    precise scorer reads that from vLLM's KV events); `prompt_tokens(req)` and `prompt_text(req)`
    give the request's prompt as token ids and as text (its own text, else the ids written out)."""

    def __init__(self, time: float, replicas: list[ReplicaView], cached_blocks: Callable, prompt_tokens: Callable,
                 prompt_text: Callable, in_flight: list[int] | None = None, record_scores: bool = True):
        self._in_flight = in_flight
        # False when nothing keeps a decision's scores (a search's run): a router may then skip
        # what it computes for showing only, never what it decides on
        self.record_scores = record_scores
        self.time = time
        self.replicas = replicas
        self.cached_blocks = cached_blocks
        self.prompt_tokens = prompt_tokens
        self.prompt_text = prompt_text
        # every replica's cached_blocks at once (the loop answers it from its fleet-wide index)
        self.cached_prefix = lambda req: [cached_blocks(i, req) for i in range(len(self.replicas))]
        # the replicas whose engine signals (the views' waiting, running, KV use) may have changed
        # since the last decision, where the loop keeps that list (None: any may have): a router
        # may keep what it made of the others' signals (weighted's queue and KV terms)
        self.signals_changed: list[int] | None = None


    @property
    def in_flight(self) -> list[int]:
        """Every replica's in-flight count, in worker order (the loop's own list: read it, do
        not change it). Reading it does not bring lazy views up to date: for routers that read
        every replica."""
        if self._in_flight is not None:
            return self._in_flight
        return [v.in_flight for v in self.replicas]


class Router:
    """Base router. `defaults` lists every knob and its default; a config may set only those."""

    name = "base"
    defaults: dict = {}
    # False for a router that reads nothing of the fleet (no view, no prefix cache): the loop
    # then need not run the replicas up to each decision, and runs each one through at the end
    reads_fleet = True
    # True for a router that reads only the views of the few replicas it draws (ctx.replicas[i])
    # and keeps nothing about the others in released/prefill_done: the loop then runs a replica
    # up to the decision's time only when its view is read (each replica runs long stretches in
    # one go: at 64 replicas, half the time of running them all to every decision), and the
    # decisions are the same as if every replica had been run
    reads_drawn = False
    # True for a router that asks ctx.cached_prefix at every decision: the loop then keeps a
    # fleet-wide index of the replicas' cached blocks (sim/fleet/prefix_index.py)
    reads_prefix_cache = False
    # False for a router that reads of the fleet only its own in-flight counts (ctx.in_flight, a
    # view's in_flight), no engine-reported signal and no prefix cache: the loop then runs a
    # replica only when one of its responses could have ended (fleet.py, `counts_only`)
    reads_engine = True
    # the decision reasons whose pick the router's own random draw made (a tie drawn, a softmax
    # draw): a real router draws its own, so a replay agrees with it there only by chance
    drawn_reasons: frozenset = frozenset({"tie_random", "softmax"})

    @classmethod
    def drawn(cls, num_replicas: int) -> frozenset:
        """drawn_reasons for a fleet of num_replicas."""
        return cls.drawn_reasons

    def __init__(self, num_replicas: int, config: dict | None = None, seed: int = 0):
        self.n = int(num_replicas)
        self.config = self.check_config(config)
        self.rng = random.Random(seed)   # the only randomness a router may use: seeded

    @classmethod
    def check_config(cls, config: dict | None) -> dict:
        """The defaults overridden by `config`; ValueError (one plain sentence) on an unknown
        key or a value of the wrong kind (NaN, infinite, negative where a count is meant)."""
        config = dict(config or {})
        unknown = sorted(set(config) - set(cls.defaults))
        if unknown:
            known = ", ".join(sorted(cls.defaults)) or "none"
            msg = f"router {cls.name} has no setting {shown(unknown[0])}"
            raise ValueError(f"{msg} (its settings: {known})" if len(msg) + len(known) < 180 else msg)
        out = dict(cls.defaults)
        for k, v in config.items():
            d = cls.defaults[k]
            # values shown by sim.limits.shown: a 5,000-digit number or a long text stays one short
            # line; the upper bound keeps math.isfinite from overflowing on a huge int
            if isinstance(d, bool):
                if not isinstance(v, bool):
                    raise ValueError(f"router setting {k} must be true or false, not {shown(v)}")
            elif isinstance(d, (int, float)):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_SETTING:
                    what = "from 0 to 2**53" if isinstance(v, (int, float)) and v == v and v > 0 else "0 or more"
                    raise ValueError(f"router setting {k} must be a finite number, {what}, not "
                                     f"{repr(v) if isinstance(v, float) else shown(v)}")
                if isinstance(d, int) and not isinstance(d, bool) and v != int(v):
                    raise ValueError(f"router setting {k} must be a whole number, not {shown(v)}")
            elif isinstance(d, str):
                if not isinstance(v, str):
                    raise ValueError(f"router setting {k} must be text, not {shown(v)}")
                if len(v) > MAX_SETTING_TEXT:   # a name; a router's own check would quote it whole
                    raise ValueError(f"router setting {k} is {len(v):,} characters long; at most {MAX_SETTING_TEXT}")
            out[k] = v
        cls.validate(out)
        return out

    @classmethod
    def validate(cls, config: dict) -> None:
        """Extra checks a router's knobs need (a choice among names, weights not all 0)."""

    def route(self, request, ctx: RouterContext) -> Decision:
        """Pick a replica for `request`. State that depends on where the request went (a
        tree of what was sent) is updated in `dispatched`, not here: replaying a real fleet,
        the router is told where the real router sent each request, so that one wrong guess
        does not poison every later one."""
        raise NotImplementedError

    def dispatched(self, request, replica: int, ctx: RouterContext) -> None:
        """`request` was sent to `replica` (by this router's decision, or, replaying a real
        fleet, by the real router's)."""

    def released(self, request, replica: int, time: float) -> None:
        """The response of `request` ended at the router (its in-flight count dropped)."""

    def prefill_done(self, request, replica: int, time: float) -> None:
        """The first output token of `request` reached the router (its prefill is over). Only
        routers that count pending prefill work use it (kv_cost: Dynamo marks a request's
        prefill complete on its first token); a loop that never calls it leaves that work
        counted until `released`."""


def least_loaded(loads: list[float], among=None) -> int:
    """The replica with the lowest load; a tie goes to the first in worker order."""
    idx = range(len(loads)) if among is None else among
    return min(idx, key=lambda i: (loads[i], i))
