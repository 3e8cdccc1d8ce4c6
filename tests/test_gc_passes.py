"""The collector's thresholds a simulation raises (sim/gc_passes.py) come back after it, and
when the collector runs changes no result."""
from __future__ import annotations

import gc
import threading

from sim import simulate
from sim.fleet import FleetSettings, simulate_fleet
from sim.gc_passes import YOUNG, fewer_gc_passes, with_fewer_gc_passes
from sim.workload import Request, Workload


def small_workload() -> Workload:
    reqs = [Request(id=f"r{i}", prompt_len=600 + 7 * i, max_tokens=8, arrival_time=float(i), prompt_blocks=(i % 3,))
            for i in range(40)]
    return Workload(reqs, {"enable_prefix_caching": True, "num_gpu_blocks": 400, "block_size": 16})


def test_a_fleet_run_restores_the_gc_thresholds_and_gives_the_same_routes():
    wl = small_workload()
    before = gc.get_threshold()
    a = simulate_fleet(wl, FleetSettings(replicas=3, router="cache_aware"))
    assert gc.get_threshold() == before
    gc.disable()   # the collector's timing must not change a route
    try:
        b = simulate_fleet(wl, FleetSettings(replicas=3, router="cache_aware"))
    finally:
        gc.enable()
    assert a.routes.equals(b.routes)


def test_a_run_raises_the_thresholds_while_it_runs_and_restores_them_after_an_error():
    seen = []

    @with_fewer_gc_passes
    def run(fail: bool):
        seen.append(gc.get_threshold()[0])
        if fail:
            raise ValueError("bad input")
        return simulate(small_workload())

    before = gc.get_threshold()
    assert run(False).requests is not None
    try:
        run(True)
    except ValueError:
        pass
    assert seen == [YOUNG, YOUNG]
    assert gc.get_threshold() == before


def test_fewer_gc_passes_nested_and_in_threads_restore_once():
    before = gc.get_threshold()
    inside, go = threading.Event(), threading.Event()

    def other():
        with fewer_gc_passes():
            inside.set()
            go.wait(5)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    with fewer_gc_passes():
        assert gc.get_threshold() != before
    assert gc.get_threshold() != before   # the other thread's run is still going
    go.set()
    t.join(5)
    assert gc.get_threshold() == before
