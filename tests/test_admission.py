"""sim.admission: the lesson's slotted server (Example 7) as a scheduler run, measured on the step clock."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.admission import QueueSetup, curves, rejections, window_stats
from sim.analysis import littles_law_over_time
from sim.lesson import printed
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
