"""Fewer passes of Python's cyclic garbage collector while a simulation runs (sim.simulate and
sim.fleet.simulate_fleet).

A fleet run keeps a growing heap of long-lived objects (replicas' requests and blocks, the
routers' trees and indexes) and makes millions of short-lived ones. With the default thresholds
(700, 10, 10) the collector's passes took 7-8% of a 64-replica x 20,000-request run (1.8 s of
23.8 under kv_cost, 9 of them full passes over the whole heap: 1.06 s), charged to whatever code
was running, routers included; in a single-replica run of 100,000 requests (bench_sim.big_workload),
12.0 s of CPU against 10.7-11.0 s with these thresholds, at the same peak RSS (470 MB).
Raised thresholds make the young passes rare and the full ones wait until the run is over;
cycles among young objects are still collected, and the run's results do not depend on when
the collector runs. Counted, so that runs in several threads
(Streamlit sessions) restore the thresholds once, when the last one ends.
"""
from __future__ import annotations

import functools
import gc
import threading
from contextlib import contextmanager

YOUNG = 100_000      # container allocations between two young passes (the default is 700)
MIDDLE = 50          # young passes between two passes of the middle generation (default 10)
OLD = 1_000_000      # middle passes before a full one: not during a run

_lock = threading.Lock()
_depth = [0]
_saved: list = []


@contextmanager
def fewer_gc_passes():
    with _lock:
        _depth[0] += 1
        if _depth[0] == 1:
            _saved.append(gc.get_threshold())
            gc.set_threshold(YOUNG, MIDDLE, OLD)
    try:
        yield
    finally:
        with _lock:
            _depth[0] -= 1
            if _depth[0] == 0:
                gc.set_threshold(*_saved.pop())


def with_fewer_gc_passes(run):
    """`run` (a simulation) called inside fewer_gc_passes()."""
    @functools.wraps(run)
    def wrapped(*args, **kwargs):
        with fewer_gc_passes():
            return run(*args, **kwargs)
    return wrapped
