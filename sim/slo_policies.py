"""The seed's SLO-minded scheduling rules ("What a Practical Scheduler Optimizes"), each a
small registered class:

- ``edf``: earliest deadline first, the deadline being arrival + the request's TTFT target;
- ``sjf_predicted``: shortest job first on a *predicted* output length, the prediction the
  true length times a seeded lognormal error (sigma 0 is the oracle ``sjf``);
- ``short_long``: short and long prompts in separate queues, and a share of every step's token
  budget kept for the short class while it has work (the scheduler reads ``long_token_cap``);
- admission control (``ADMISSIONS``: ``reject``, ``defer``): an arriving request whose TTFT
  target cannot be met, given the prefill work ahead of it and the cost model, is rejected or
  deferred (served only when nothing else waits).

The queue policies register in sim.policies.POLICIES like the others; the scheduler imports
this module, so the registry is complete once sim.scheduler is loaded. Their settings are
SchedulerConfig keys (slo, slo_admission, sjf_error_sigma, predictor_seed,
short_prompt_threshold, short_budget_share); defaults leave every other policy untouched.
"""
from __future__ import annotations

import math
import zlib
from collections import deque
from typing import Callable

import numpy as np

from .policies import KeyedQueue, WaitingQueue, register
from .slo import SLO


def _slo_of(config) -> SLO:
    return SLO.parse(getattr(config, "slo", None)) if config is not None else SLO()


def _arrival(seq, clock: Callable[[], float]) -> float:
    at = seq.req.arrival_time
    return float(at) if at is not None else float(clock())


@register("edf")
class EarliestDeadlineFirst(KeyedQueue):
    """Earliest TTFT deadline first: arrival time + the request's TTFT target (per tenant or
    priority when the SLO says so). A request without a target has an infinite deadline, so
    with no targets at all this is FCFS. A preempted request keeps its deadline."""

    def __init__(self, config=None, clock: Callable[[], float] = lambda: 0.0, **kw):
        super().__init__(**kw)
        self.slo = _slo_of(config)
        self.clock = clock
        self.deadlines: dict[str, float] = {}

    def key(self, seq):
        return self.deadlines[seq.id]

    def add_key(self, seq):
        if seq.id not in self.deadlines:
            ttft = self.slo.ttft_for(seq.tenant, seq.priority)
            self.deadlines[seq.id] = math.inf if ttft is None else _arrival(seq, self.clock) + ttft

    def state(self):  # deadlines are per request, not per tenant: nothing to chart as counters
        return {}


def predicted_length(request_id: str, true_length: int, sigma: float, seed: int) -> float:
    """The predictor's guess: true length x exp(sigma * z), z standard normal drawn from
    (seed, request id), so a request's guess does not depend on who else is queued."""
    if sigma == 0:
        return float(true_length)
    z = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(request_id.encode())]).standard_normal()
    return float(true_length) * math.exp(sigma * z)


@register("sjf_predicted")
class PredictedShortestJobFirst(KeyedQueue):
    """Shortest job first on a predicted output length, the predictor's error a setting
    (sjf_error_sigma: the sigma of a multiplicative lognormal error; predictor_seed)."""

    def __init__(self, config=None, **kw):
        super().__init__(**kw)
        self.sigma = float(getattr(config, "sjf_error_sigma", 0.0) or 0.0)
        self.seed = int(getattr(config, "predictor_seed", 0) or 0)
        self.predicted: dict[str, float] = {}

    def add_key(self, seq):
        if seq.id not in self.predicted:
            self.predicted[seq.id] = predicted_length(seq.id, seq.max_tokens, self.sigma, self.seed)

    def key(self, seq):
        return self.predicted[seq.id]


@register("short_long")
class ShortLongSplit(WaitingQueue):
    """Short and long prompts apart (the seed's mice and elephants): two FIFO queues, the short
    one tried first, and `short_budget_share` of each step's token budget kept from long
    prefills while a short request waits or is still prefilling. A prompt is short when it has
    at most `short_prompt_threshold` tokens. A long request's decode token is never held back."""

    splits_budget = True

    def __init__(self, config=None, **kw):
        super().__init__(**kw)
        self.threshold = int(getattr(config, "short_prompt_threshold", 512))
        self.share = float(getattr(config, "short_budget_share", 0.25))
        self.short: deque = deque()
        self.q = deque()  # the long class (the base's deque, so victim/iteration stay vLLM's)

    def is_long(self, seq) -> bool:
        return seq.prompt_len > self.threshold

    def _queue(self, seq) -> deque:
        return self.q if self.is_long(seq) else self.short

    def __len__(self):
        return len(self.short) + len(self.q)

    def __iter__(self):
        yield from self.short
        yield from self.q

    def add(self, seq):
        self._queue(seq).append(seq)

    def prepend(self, seq):
        self._queue(seq).appendleft(seq)

    def remove(self, seq):
        q = self._queue(seq)
        q.popleft() if q[0] is seq else q.remove(seq)

    def peek(self, ctx):
        for seq in self:  # the short queue's head first
            if self._eligible(seq, ctx):
                return seq
        return None

    def ahead(self, seq) -> list:
        return list(self.short) if not self.is_long(seq) else list(self)

    def long_token_cap(self, budget: int, running) -> int | None:
        """Tokens long prefills may take this step: the budget less the short class's share,
        or None (no cap) when no short request waits or prefills (the share is not wasted)."""
        short_busy = bool(self.short) or any(
            not self.is_long(s) and s.num_computed < s.prompt_len for s in running)
        return budget - int(self.share * budget) if short_busy else None


# -- admission --------------------------------------------------------------------------------

ADMISSIONS: dict[str, type["TTFTAdmission"]] = {}
ADMISSION_MODES = ("off", "reject", "defer")


def register_admission(name: str):
    def deco(cls):
        cls.name = name
        ADMISSIONS[name] = cls
        return cls
    return deco


def make_admission(name: str, config):
    """The admission controller for config.slo_admission, or None when "off"."""
    if name in (None, "", "off"):
        return None
    try:
        return ADMISSIONS[name](config)
    except KeyError:
        raise ValueError(f"unknown slo_admission {name!r}; known: {', '.join(ADMISSION_MODES)}") from None


def predicted_ttft(sched, seq, cost) -> float:
    """How long from now until `seq`'s first token, if the scheduler works through the prefill
    ahead of it (the running requests' remaining prefill and the waiting requests the policy
    would serve before it: all of them unless the policy says, via `ahead`) and then its own
    prompt, `max_num_batched_tokens` a step, each running request's decode token taking one.
    Every step is priced full when the server has other work: chunked prefill fills the step in
    which this prompt ends with whatever comes behind it (pricing that step at this prompt's
    share alone let one admitted request in seven miss on a roofline run). Blocks,
    max_num_seqs and requests that finish meanwhile are left out: the queue-and-budget estimate."""
    cfg = sched.cfg
    running = sched.running
    left = [s.num_tokens - s.num_computed for s in running]
    ahead = sum(n for n in left if n > 1)  # running prefills (a decode has one token left)
    decoders = sum(1 for n in left if n <= 1)
    # the policy's order where it can say (the SLO policies), else the whole queue (FCFS: exact)
    queued = sched.waiting.ahead(seq) if hasattr(sched.waiting, "ahead") else sched.waiting
    ahead += sum(s.num_tokens - s.num_computed for s in queued)
    tokens = ahead + seq.num_tokens
    budget = cfg.max_num_batched_tokens
    decoders = min(decoders, budget - 1)
    per_step = budget - decoders
    steps = -(-tokens // per_step)
    context = sum(s.num_tokens for s in running)
    busy = bool(running) or tokens > seq.num_tokens
    last = budget if busy else decoders + tokens - (steps - 1) * per_step
    return (steps - 1) * cost.step_time_totals(budget, context) + cost.step_time_totals(last, context)


class TTFTAdmission:
    """Refuse an arriving request whose TTFT target is already out of reach."""

    name = "base"

    def __init__(self, config):
        self.slo = _slo_of(config)

    def hopeless(self, sched, seq, cost) -> bool:
        target = self.slo.ttft_for(seq.tenant, seq.priority)
        if target is None or not getattr(cost, "ready", True):
            return False   # no target, or no estimate yet (a live run's cost model still measuring)
        # arrival is the step's start (or the request's own time, which is at most that)
        late = sched.clock - (seq.req.arrival_time if seq.req.arrival_time is not None else sched.clock)
        return late + predicted_ttft(sched, seq, cost) > target * (1 + 1e-9)


@register_admission("reject")
class RejectHopeless(TTFTAdmission):
    """Reject it on arrival (an HTTP 503 the client can retry elsewhere)."""


@register_admission("defer")
class DeferHopeless(TTFTAdmission):
    """Keep it aside and serve it only when nothing else waits: it will miss its TTFT anyway,
    so it should not make requests that can still meet theirs miss too."""
