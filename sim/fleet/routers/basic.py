"""Routers that read only load: round robin, random, power of two, least loaded."""
from __future__ import annotations

from operator import attrgetter

from ..routing import Decision, Router, register_router

NAN = float("nan")


@register_router("round_robin")
class RoundRobin(Router):
    """The next worker in worker order, in the order requests reach the router; the first
    request goes to the first worker (vllm-router `round_robin.rs`, sglang-router
    `round_robin.rs`: an atomic counter mod the number of workers)."""

    reads_fleet = False   # its pick depends on the request alone

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        self.next = 0
        self.everyone = tuple(range(self.n))

    def route(self, request, ctx):
        i = self.next % self.n
        self.next += 1
        return Decision(i, "round_robin", self.everyone)


@register_router("random")
class RandomRouter(Router):
    """A worker drawn uniformly (vllm-router and sglang-router `random.rs`: `rng.random_range(0..n)`
    over the healthy workers). The real routers draw unseeded; here the router's seeded rng
    draws, so a run can be repeated."""

    reads_fleet = False   # its pick depends on the request alone
    drawn_reasons = frozenset({"random"})

    def route(self, request, ctx):
        i = self.rng.randrange(self.n)
        return Decision(i, "random", self.everyone)

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        self.everyone = tuple(range(self.n))


@register_router("power_of_two")
class PowerOfTwo(Router):
    """Two distinct workers drawn in random order; the lower load wins and a tie goes to the
    first drawn (vllm-project/router `src/policies/power_of_two.rs`: `idx1 = random_range(0..n)`,
    `idx2` redrawn until it differs, `if load1 <= load2 {idx1} else {idx2}`; sglang-router
    `power_of_two.rs` the same). The load is the router's in-flight count: the cached load the
    sources add to it comes from polling `GET /get_load`, which vLLM answers 404 (README of the
    fleet kit), so nothing is added. One worker: that one, nothing drawn."""

    reads_drawn = True    # it reads the two drawn replicas' counts
    reads_engine = False  # and nothing else

    @classmethod
    def drawn(cls, num_replicas: int) -> frozenset:
        # of two workers both are drawn every time: only the order (a tie's winner) is chance;
        # of more, which two were drawn is chance too
        return frozenset({"tie_first_drawn"} if num_replicas <= 2 else {"tie_first_drawn", "lower_load"})

    def route(self, request, ctx):
        n = self.n
        if n == 1:
            load = float(ctx.replicas[0].in_flight)
            return Decision(0, "single_worker", (0,), {"in_flight": [load]},
                            {"loads": (load,)})
        rng = self.rng
        a = rng.randrange(n)
        b = rng.randrange(n)
        while b == a:
            b = rng.randrange(n)
        la = ctx.replicas[a].in_flight
        lb = ctx.replicas[b].in_flight
        if la < lb:
            pick, reason = a, "lower_load"
        elif lb < la:
            pick, reason = b, "lower_load"
        else:
            pick, reason = a, "tie_first_drawn"
        loads = [NAN] * n
        loads[a] = float(la)
        loads[b] = float(lb)
        return Decision(pick, reason, (a, b), {"in_flight": loads}, {"loads": (la, lb)})


@register_router("least_loaded")
class LeastLoaded(Router):
    """The worker with the lowest load; a tie goes to the first in worker order (Rust's
    `min_by_key` keeps the first minimum, as vllm-router's and sglang-router's least-load
    fallbacks do). `signal`: in_flight (the router's own count, the default: what the real
    routers read), or the engine-reported waiting, running or kv_usage (as stale as the
    signal refresh makes them)."""

    defaults = {"signal": "in_flight"}
    SIGNALS = ("in_flight", "waiting", "running", "kv_usage")

    @classmethod
    def validate(cls, config):
        if config["signal"] not in cls.SIGNALS:
            raise ValueError(f"router least_loaded setting signal must be one of {', '.join(cls.SIGNALS)}, "
                             f"not {config['signal']!r}")

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        self.signal = self.config["signal"]
        self.reads_engine = self.signal != "in_flight"   # its own counts: no engine signal read
        self.read = attrgetter(self.signal)
        self.everyone = tuple(range(self.n))

    def route(self, request, ctx):
        loads = list(map(float, map(self.read, ctx.replicas)))
        low = min(loads)
        i = loads.index(low)               # the first of the lowest (= routing.least_loaded)
        tie = loads.count(low) > 1
        return Decision(i, "tie_first" if tie else "least_loaded", self.everyone, {self.signal: loads})
