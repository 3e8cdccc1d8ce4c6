"""A tick-based queueing model: an arrival source feeding a pool of identical servers.

Used for admission control and Little's law (L = lambda * W).  Each tick:

1. the arrival source yields some number of new requests; each is queued, or rejected when
   the waiting queue already holds ``queue_limit`` requests;
2. free slots take requests from the head of the queue (lowest slot first);
3. everything queued or in service counts as "in the system" for this tick;
4. every busy slot serves one tick; a request whose service is complete leaves at the end of
   the tick, having spent ``tick + 1 - arrival_tick`` ticks in the system.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

from sim.javarandom import JavaRandom


class ArrivalSource(Protocol):
    def arrivals(self, tick: int) -> int:
        """How many requests arrive at ``tick``."""


class BernoulliArrivals:
    """At most one arrival per tick, with probability ``p``.

    Draws come from Java's ``java.util.Random(seed).nextDouble()`` (an arrival when the draw is
    below ``p``), so a run reproduces the numbers of a Java program using the same seed.
    """

    def __init__(self, p: float, seed: int) -> None:
        if not 0 <= p <= 1:
            raise ValueError("p must be a probability")
        self.p = p
        self._rng = JavaRandom(seed)

    def arrivals(self, tick: int) -> int:
        return 1 if self._rng.next_double() < self.p else 0


@dataclass(frozen=True)
class QueueStats:
    ticks: int
    arrived: int
    rejected: int
    finished: int
    time_in_system_sum: int  # over finished requests
    in_system_sum: int  # over ticks

    @property
    def mean_in_system(self) -> float:
        """L: mean number of requests queued or in service."""
        return self.in_system_sum / self.ticks

    @property
    def throughput(self) -> float:
        """lambda: completed requests per tick."""
        return self.finished / self.ticks

    @property
    def mean_time_in_system(self) -> float:
        """W: mean ticks from arrival to completion, over finished requests."""
        return self.time_in_system_sum / self.finished if self.finished else 0.0


class SlotServer:
    """``slots`` identical servers; each request occupies one for ``service_ticks`` ticks.

    ``queue_limit`` bounds the waiting queue (``None`` for unbounded); an arrival that finds it
    full is rejected.
    """

    def __init__(self, slots: int, service_ticks: int, queue_limit: int | None = None) -> None:
        if slots <= 0 or service_ticks <= 0:
            raise ValueError("slots and service_ticks must be positive")
        if queue_limit is not None and queue_limit < 0:
            raise ValueError("queue_limit must be >= 0 or None")
        self.slots = slots
        self.service_ticks = service_ticks
        self.queue_limit = queue_limit

    @property
    def capacity(self) -> float:
        """Requests per tick the server completes when always busy."""
        return self.slots / self.service_ticks

    def run(self, source: ArrivalSource, ticks: int) -> QueueStats:
        queue: deque[int] = deque()  # arrival tick of each waiting request
        remaining = [0] * self.slots  # ticks of service left; 0 = free
        arrival_of = [0] * self.slots
        arrived = rejected = finished = time_sum = in_system_sum = 0
        for tick in range(ticks):
            for _ in range(source.arrivals(tick)):
                arrived += 1
                if self.queue_limit is not None and len(queue) >= self.queue_limit:
                    rejected += 1
                else:
                    queue.append(tick)
            busy = 0
            for slot in range(self.slots):
                if remaining[slot] == 0 and queue:
                    arrival_of[slot] = queue.popleft()
                    remaining[slot] = self.service_ticks
                if remaining[slot]:
                    busy += 1
            in_system_sum += len(queue) + busy
            for slot in range(self.slots):
                if remaining[slot]:
                    remaining[slot] -= 1
                    if remaining[slot] == 0:
                        finished += 1
                        time_sum += tick + 1 - arrival_of[slot]
        return QueueStats(ticks, arrived, rejected, finished, time_sum, in_system_sum)
