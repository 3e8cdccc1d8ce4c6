"""The scheduler registry: name -> scheduler class, for simulate() and the engine to look up.

Each scheduler module registers itself with ``@register_scheduler(name)``. This module imports
none of them (that would be a circle); sim.simulate imports them all, so once it is imported
SCHEDULERS is complete.
"""
from __future__ import annotations

from typing import Callable

SCHEDULERS: dict[str, Callable] = {}


def register_scheduler(name: str):
    def deco(cls):
        SCHEDULERS[name] = cls
        return cls
    return deco
