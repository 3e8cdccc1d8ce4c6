"""Arrival sources for tick-based queueing runs (admission control, Little's law).

The queue itself is the scheduler: sim.lessons.admission runs the lesson's slotted server through
sim.simulate, the one implementation of queueing and admission. For the Admission page's curves,
sim.lessons.admission.slotted_run counts the same queue tick by tick without the scheduler's per-token
work; it is checked against the scheduler's Trace, tick for tick (tests/lessons/test_admission.py), so
a change to the scheduler's admission that it does not follow fails there.
"""

from __future__ import annotations

from typing import Protocol

from .javarandom import JavaRandom


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
