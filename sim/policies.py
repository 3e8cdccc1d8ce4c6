"""Waiting-queue policies, each a small class registered by name.

A policy decides which waiting request the scheduler tries to admit next (`peek`) and,
for vLLM's two policies, which running request is preempted first (`victim`). The
scheduler keeps vLLM's head-of-line rule whatever the policy: if the request a policy
offers cannot get its blocks, admission stops for this step.

Adding a policy = one class here with @register("name").
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from fractions import Fraction
from typing import Callable, Iterator

POLICIES: dict[str, type["WaitingQueue"]] = {}


def register(name: str) -> Callable[[type], type]:
    def deco(cls):
        cls.name = name
        POLICIES[name] = cls
        return cls
    return deco


def make_policy(name: str, **options) -> "WaitingQueue":
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    return cls(**options)


class WaitingQueue:
    """Base: a FIFO deque, vLLM's FCFS queue. Preempted requests go back to the front."""

    name = "base"

    def __init__(self, tenant_cap: int = 0, **_ignored):
        self.q: deque = deque()
        self.tenant_cap = int(tenant_cap or 0)  # max running requests per tenant (0 = none)

    def __len__(self) -> int:
        return len(self.q)

    def __iter__(self) -> Iterator:
        return iter(self.q)

    def add(self, seq) -> None:
        self.q.append(seq)

    def prepend(self, seq) -> None:
        self.q.appendleft(seq)

    def remove(self, seq) -> None:
        self.q.remove(seq) if self.q[0] is not seq else self.q.popleft()

    def _eligible(self, seq, ctx) -> bool:
        return not self.tenant_cap or ctx.running_by_tenant.get(seq.tenant, 0) < self.tenant_cap

    def peek(self, ctx):
        """The request to try next, or None. With a tenant cap, requests of capped tenants are
        passed over (a deliberate departure from vLLM, which never skips)."""
        for seq in self:
            if self._eligible(seq, ctx):
                return seq
            if not self.tenant_cap:
                break
        return None

    def victim(self, running: list, requester):
        """vLLM FCFS: the last admitted running request (scheduler.py: running.pop())."""
        return running[-1]

    def on_sampled(self, seq) -> None:  # service hooks, used by fairness policies
        pass

    def on_prompt_tokens(self, seq, n: int) -> None:
        pass

    def state(self) -> dict:
        return {}


@register("fcfs")
class FCFS(WaitingQueue):
    """vLLM's default: arrival order."""


@register("priority")
class Priority(WaitingQueue):
    """vLLM's priority policy: a heap on (priority, arrival order, id); a smaller number is served
    first. Victim: the largest (priority, arrival), which may be a request already scheduled."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.heap: list = []

    def __len__(self):
        return len(self.heap)

    def __iter__(self):
        return (e[-1] for e in sorted(self.heap))

    def add(self, seq):
        heapq.heappush(self.heap, (seq.priority, seq.add_seq, seq.id, seq))

    prepend = add  # re-inserted by key, no front of queue

    def remove(self, seq):
        if self.heap[0][-1] is seq:
            heapq.heappop(self.heap)
        else:
            self.heap = [e for e in self.heap if e[-1] is not seq]
            heapq.heapify(self.heap)

    def peek(self, ctx):
        if not self.tenant_cap:
            return self.heap[0][-1] if self.heap else None
        return super().peek(ctx)

    def victim(self, running, requester):
        return max(running, key=lambda s: (s.priority, s.add_seq))


class KeyedQueue(WaitingQueue):
    """A queue served by the smallest key; `aging` lowers a request's key by that much per
    step waited, so a long-waiting request eventually wins (the cure for starvation).

    A heap, not a sort per step: key - aging * (step - queued_step) orders the queue as
    key + aging * queued_step does, since aging * step is the same for everyone at a step.
    With aging that rank is kept exact (a Fraction of the aging as written, 0.05 = 1/20), so two
    requests whose waits make their keys equal tie, as they should, and not by a rounding error.
    Ties go to the earlier arrival (add_seq)."""

    def __init__(self, aging: float = 0.0, **kw):
        super().__init__(**kw)
        self.aging = float(aging)
        self._aging_exact = Fraction(repr(self.aging)) if self.aging else None
        self.heap: list = []   # (rank, add_seq, seq)

    def key(self, seq) -> float:
        raise NotImplementedError

    def add_key(self, seq) -> None:
        """Work out `seq`'s key before it is first asked for (subclasses that store keys)."""

    def _rank(self, seq):
        k = self.key(seq)
        if self._aging_exact is None or math.isinf(k):
            return k
        return (k if isinstance(k, int) else Fraction(repr(float(k)))) + self._aging_exact * seq.queued_step

    def __len__(self):
        return len(self.heap)

    def members(self):
        """The queued requests, in no particular order."""
        return (e[-1] for e in self.heap)

    def __iter__(self):
        return iter(sorted(self.members(), key=lambda s: (self.key(s), s.add_seq)))

    def add(self, seq):
        self.add_key(seq)
        heapq.heappush(self.heap, (self._rank(seq), seq.add_seq, seq))

    prepend = add  # served by key: no front of the queue

    def remove(self, seq):
        if self.heap[0][-1] is seq:
            heapq.heappop(self.heap)
        else:  # a tenant cap passed over the head: rare, so a rebuild will do
            self.heap = [e for e in self.heap if e[-1] is not seq]
            heapq.heapify(self.heap)

    def peek(self, ctx):
        if not self.heap:
            return None
        if not self.tenant_cap:
            return self.heap[0][-1]
        for _, _, seq in sorted(self.heap, key=lambda e: e[:2]):
            if self._eligible(seq, ctx):
                return seq
        return None

    def ahead(self, seq) -> list:
        """The queued requests served before `seq` if it joined now (aging aside)."""
        self.add_key(seq)
        mine = self.key(seq)
        return [s for s in self.members() if self.key(s) <= mine]


@register("spf")
class ShortestPromptFirst(KeyedQueue):
    """Shortest prompt first: the prompt length is known on arrival."""

    def key(self, seq):
        return seq.prompt_len


@register("sjf")
class ShortestJobFirst(KeyedQueue):
    """Shortest job first by output length (an oracle: real servers do not know it)."""

    def key(self, seq):
        return seq.max_tokens


@register("priority_aging")
class PriorityAging(KeyedQueue):
    """Priority order with aging (vLLM has no aging; this is the textbook fix)."""

    def key(self, seq):
        return seq.priority


class PerTenantQueue(WaitingQueue):
    """Per-tenant FIFO queues; subclasses choose the tenant."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.queues: dict[str, deque] = {}

    def __len__(self):
        return sum(len(q) for q in self.queues.values())

    def __iter__(self):
        return (s for t in self.tenant_order() for s in self.queues[t])

    def add(self, seq):
        self.queues.setdefault(seq.tenant, deque()).append(seq)

    def prepend(self, seq):
        self.queues.setdefault(seq.tenant, deque()).appendleft(seq)

    def remove(self, seq):
        q = self.queues[seq.tenant]
        q.popleft() if q[0] is seq else q.remove(seq)
        self.served(seq.tenant)

    def served(self, tenant: str) -> None:
        pass

    def tenant_order(self) -> list[str]:
        return list(self.queues)

    def peek(self, ctx):
        for t in self.tenant_order():
            q = self.queues[t]
            if q and self._eligible(q[0], ctx):
                return q[0]
        return None


@register("round_robin")
class RoundRobin(PerTenantQueue):
    """Take the next request from each tenant's queue in turn."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.last: str | None = None

    def served(self, tenant):
        self.last = tenant

    def tenant_order(self):
        names = list(self.queues)
        if self.last not in names:
            return names
        i = names.index(self.last) + 1
        return names[i:] + names[:i]


@register("vtc")
class VirtualTokenCounter(PerTenantQueue):
    """Virtual Token Counter (Sheng et al., OSDI 2024): serve the backlogged tenant whose
    weighted service so far is lowest. Input tokens weigh `w_in`, output tokens `w_out`.
    A tenant that becomes backlogged has its counter lifted to the lowest backlogged
    counter, so idleness banks no credit."""

    def __init__(self, w_in: float = 1.0, w_out: float = 2.0, **kw):
        super().__init__(**kw)
        self.w_in, self.w_out = float(w_in), float(w_out)
        self.counters: dict[str, float] = {}
        self.last_served: float = 0.0

    def add(self, seq):
        t = seq.tenant
        if not self.queues.get(t):
            backlogged = [self.counters[u] for u, q in self.queues.items() if q and u != t]
            floor = min(backlogged) if backlogged else self.last_served
            self.counters[t] = max(self.counters.get(t, 0.0), floor)
        super().add(seq)

    def served(self, tenant):
        self.last_served = self.counters.get(tenant, 0.0)

    def tenant_order(self):
        # lowest counter first; ties by first appearance (dict order, stable sort)
        return sorted(self.queues, key=lambda t: self.counters.get(t, 0.0))

    def on_prompt_tokens(self, seq, n):
        self.counters[seq.tenant] = self.counters.get(seq.tenant, 0.0) + self.w_in * n

    def on_sampled(self, seq):
        self.counters[seq.tenant] = self.counters.get(seq.tenant, 0.0) + self.w_out

    def state(self):
        return dict(self.counters)
