"""sim.lessons.admission: the lesson's slotted server (Example 7) as a scheduler run, measured on the step clock."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.analysis import littles_law_over_time
from sim.lessons.admission import QueueRun, QueueSetup, curves, rejections, slotted_run, window_stats
from sim.lessons.lesson import printed
from sim.simulate import simulate
from sim.workload import Request, Workload


def test_queue_limit_16_reproduces_the_lesson_row():
    s = QueueSetup(p=0.44, queue_limit=16)
    tr = simulate(s.workload())
    w = window_stats(tr, s.ticks)
    assert (w["rejected"], w["arrived"]) == (815, 8831)
    assert [printed(w[k], d) for k, d in (("L", 2), ("lambda", 4), ("W", 2), ("lambda_W", 2))] == \
        [20.30, 0.3996, 50.71, 20.26]
    r = rejections(tr, s.ticks)
    assert len(r) == 815 and (r["waiting"] >= 16).all()  # turned away only when 16 were already waiting


def test_workload_and_config_follow_the_lesson_program():
    s = QueueSetup(p=0.2, ticks=200, seed=11)
    wl = s.workload()
    assert all(r.prompt_len == 1 and r.max_tokens == 20 for r in wl.requests)
    assert wl.config["max_num_seqs"] == 8 and wl.config["max_queued_requests"] == 0
    assert s.capacity == pytest.approx(0.4) and s.load == pytest.approx(0.5)
    with pytest.raises(ValueError):
        QueueSetup(p=0).workload()


def test_curves_count_arrivals_rejections_and_finishes():
    s = QueueSetup(p=0.6, queue_limit=4, ticks=400)
    tr = simulate(s.workload())
    c = curves(tr, 400)
    assert c["step"].iloc[-1] == 400 and len(c) == 400
    for col in ("arrived", "rejected", "finished"):
        assert (np.diff(c[col]) >= 0).all()
    last = c.iloc[-1]
    assert last["arrived"] == len(s.workload().requests)
    assert last["rejected"] == int(tr.requests["rejected"].sum())
    assert last["finished"] == int((tr.requests["finish_step"] <= 400).sum())
    # requests in the system never exceed the queue limit plus the slots
    assert c["in_system"].max() <= 4 + 8


def _brute_force(trace, clock):
    """The original broadcast implementation of littles_law_over_time (reference)."""
    s, r = trace.steps, trace.requests[~trace.requests["rejected"].to_numpy(dtype=bool)]
    if clock == "time":
        end, start = s["end"].to_numpy(float), s["start"].to_numpy(float)
        arr, fin = r["arrival_time"].to_numpy(float), r["finish_time"].to_numpy(float)
        t0 = float(np.nanmin(arr))
    else:
        end = s["step"].to_numpy(float)
        start = end - 1
        arr = r["arrival_step"].to_numpy(float, na_value=np.nan)
        fin = r["finish_step"].to_numpy(float, na_value=np.nan)
        t0 = 0.0
    in_sys = ((arr[None, :] <= start[:, None]) & ~(fin[None, :] <= start[:, None])).sum(axis=1)
    L = np.cumsum(in_sys * (end - start)) / np.maximum(end - t0, 1e-12)
    return in_sys, L


@pytest.mark.parametrize("clock", ["time", "step"])
def test_littles_law_over_time_matches_the_direct_count(clock):
    reqs = [Request(f"q{i}", 3 + i % 5, 4 + i % 7, arrival_step=i // 2) for i in range(60)]
    tr = simulate(Workload(reqs, config={"max_num_seqs": 4, "num_gpu_blocks": 64, "max_queued_requests": 6}))
    ll = littles_law_over_time(tr, clock=clock)
    in_sys, L = _brute_force(tr, clock)
    assert (ll["in_system"].to_numpy() == in_sys).all()
    assert np.allclose(ll["L"].to_numpy(), L)
    with pytest.raises(ValueError):
        littles_law_over_time(tr, clock="ticks")


def test_window_stats_of_an_empty_window():
    tr = simulate(QueueSetup(p=0.5, ticks=50).workload())
    assert window_stats(tr, 0)["arrived"] == 0
    assert isinstance(curves(tr), pd.DataFrame)


# Runs of every kind the page's controls reach: stable, overloaded (a backlog at the last tick),
# a run that ends before its last tick, one slot, one-tick service, block boundaries (15-17
# tokens), a queue limit of 1, many slots, no arrivals at all.
SLOTTED_CASES = [
    QueueSetup(p=0.44, queue_limit=16, ticks=3000),
    QueueSetup(p=0.44, ticks=3000),
    QueueSetup(p=1.0, slots=3, service_ticks=17, ticks=300),
    QueueSetup(p=1.0, queue_limit=1, slots=1, service_ticks=1, ticks=200),
    QueueSetup(p=0.9, queue_limit=2, slots=1, service_ticks=16, ticks=500, seed=3),
    QueueSetup(p=0.05, slots=2, service_ticks=15, ticks=1000, seed=7),
    QueueSetup(p=0.7, queue_limit=100, slots=33, service_ticks=100, ticks=1000, seed=5),
    QueueSetup(p=0.3, slots=256, service_ticks=2, ticks=400, seed=9),
    QueueSetup(p=0.01, ticks=100, seed=1),
]


@pytest.mark.parametrize("setup", SLOTTED_CASES, ids=lambda s: f"p{s.p}-q{s.queue_limit}-c{s.slots}-s{s.service_ticks}")
def test_slotted_run_is_the_schedulers_run_tick_for_tick(setup):
    wl = setup.workload()
    trace = simulate(wl, setup.config())
    whole = slotted_run(setup, wl, horizon=10**9)   # to the end, as the simulator runs
    mine, its = dict(whole.__dict__), dict(QueueRun.from_trace(trace).__dict__)
    assert mine.pop("last_step") == its.pop("last_step") == len(trace.steps)
    for k in its:
        assert np.array_equal(mine[k], its[k], equal_nan=mine[k].dtype == float), k
    for h in (setup.ticks, setup.ticks // 3):
        pd.testing.assert_frame_equal(curves(slotted_run(setup, wl, h), h), curves(trace, h), check_exact=True)
        pd.testing.assert_frame_equal(rejections(slotted_run(setup, wl, h), h), rejections(trace, h),
                                      check_exact=True, check_dtype=False)
    assert slotted_run(setup, wl).last_step == len(trace.steps)   # counted to the last tick only
    assert slotted_run(setup, wl, horizon=setup.ticks // 3).last_step in (None, len(trace.steps))


def test_slotted_run_gives_the_lessons_example_7():
    for limit, want in ((0, (447.50, 0.3996, 1019.46, 407.38, 0)), (16, (20.30, 0.3996, 50.71, 20.26, 815))):
        s = QueueSetup(p=0.44, queue_limit=limit)
        w = window_stats(slotted_run(s), s.ticks)
        assert (printed(w["L"], 2), printed(w["lambda"], 4), printed(w["W"], 2), printed(w["lambda_W"], 2),
                w["rejected"]) == want and w["arrived"] == 8831
    # stopped at the last tick: the run's backlog then (no limit: 8,831 arrived, 7,992 finished)
    run = slotted_run(QueueSetup(p=0.44))
    assert len(run.steps) == 20_000 and int(run.waiting[-1] + run.running[-1]) == 8831 - int(
        (run.finish_step <= 20_000).sum())


def test_slotted_run_refuses_arrivals_out_of_order():
    s = QueueSetup(ticks=10)
    wl = Workload([Request("a", 1, 20, arrival_step=5), Request("b", 1, 20, arrival_step=2)])
    with pytest.raises(ValueError, match="in order"):
        slotted_run(s, wl)
