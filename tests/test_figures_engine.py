"""Figure builders of the Live engine page (figures/engine.py): assert on what the browser receives."""
from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from figures import engine as fe
from plotly_util import decode
from sim.calibrate import compare_with_simulator
from sim.cost import CalibratedCost
from sim.live import PHASES
from sim.simulate import simulate
from sim.workload import Request, Workload


def as_json(fig: go.Figure) -> dict:
    return json.loads(fig.to_json())


def named(spec: dict, name: str) -> list[dict]:
    return [t for t in spec["data"] if t.get("name") == name]


def _engine_like(n=8, blocks=24):
    """A simulator run in ms with the engine's phase columns (forward = most of each step)."""
    reqs = [Request(f"r{i}", 20 + 9 * i, 6 + 2 * i, arrival_time=30.0 * i) for i in range(n)]
    wl = Workload(reqs, {"num_gpu_blocks": blocks, "block_size": 8, "max_num_batched_tokens": 32, "max_num_seqs": 4})
    tr = simulate(wl, cost=CalibratedCost(0.4, 0.01, 9.0))
    dt = (tr.steps["end"] - tr.steps["start"]).to_numpy()
    split = {"t_schedule": 0.05, "t_swap": 0.0, "t_prepare": 0.1, "t_forward": 0.75, "t_sample": 0.08, "t_update": 0.02}
    for p in PHASES:
        tr.steps[p] = dt * split[p]
    return wl, tr


@pytest.fixture(scope="module")
def run():
    return _engine_like()


def test_live_figure_rows_share_one_step_axis(run):
    _, tr = run
    spec = as_json(fe.live_figure(tr))
    heat = spec["data"][0]
    assert heat["type"] == "heatmap" and heat["xaxis"] == "x" and "texttemplate" not in heat
    z = decode(heat["z"])
    assert z.shape == (4, tr.num_steps) and z.max() == len(tr.requests) - 1
    bars = [t for t in spec["data"] if t["type"] == "bar"]
    assert {b["name"] for b in bars} == {"schedule", "prepare", "forward", "sample", "update"}  # swap: never used
    assert all(b["xaxis"] == "x2" and b["legend"] == "legend2" for b in bars)
    total = sum(decode(b["y"]) for b in bars)
    assert np.allclose(total, (tr.steps["end"] - tr.steps["start"]).to_numpy(), rtol=1e-9)
    (run_line,) = named(spec, "running")
    assert run_line["yaxis"] == "y3" and run_line["legend"] == "legend3"
    (rate,) = named(spec, "tokens/s (last second)")
    assert rate["yaxis"] == "y4"  # the secondary axis of row 3
    lay = spec["layout"]
    assert lay["meta"]["steps"] == [1, tr.num_steps] and lay["meta"]["slots"] == 4
    assert {"legend", "legend2", "legend3"} <= set(lay)
    assert lay["legend2"]["y"] == pytest.approx(lay["yaxis2"]["domain"][1])
    assert lay["xaxis"]["matches"] == lay["xaxis2"]["matches"] == "x3"  # one step axis
    doms = [lay[a]["domain"] for a in ("yaxis", "yaxis2", "yaxis3")]
    assert all(d[0] < d[1] for d in doms) and doms[0][0] > doms[1][1] > doms[1][0] > doms[2][1]
    go.Figure(fe.live_figure(tr).to_dict())  # built without validation: plotly accepts every key


def test_live_figure_marks_preemptions_and_bins_long_runs():
    _, tr = _engine_like(n=10, blocks=18)
    assert tr.steps["preempted"].sum() > 0
    spec = as_json(fe.live_figure(tr))
    marks = named(spec, "preemption")
    assert len(marks) == 2  # on the lanes and over the step-time bars; one legend entry
    assert sum(m.get("showlegend", True) for m in marks) == 1
    hit = tr.steps[tr.steps["preempted"] > 0]["step"].to_numpy()
    bar_mark = next(m for m in marks if m["xaxis"] == "x2")
    assert decode(bar_mark["x"]).tolist() == hit.tolist()
    fig = fe.phase_figure(tr, max_bars=5)
    assert fig.layout.meta["bin"] == int(np.ceil(tr.num_steps / 5))
    assert len(fig.data[0].x) <= 5


def test_phase_figure_leaves_out_unmeasured_phases(run):
    _, tr = run
    spec = as_json(fe.phase_figure(tr))
    assert spec["layout"]["meta"]["phases"] == ["schedule", "prepare", "forward", "sample", "update"]
    assert named(spec, "tokens in the step")[0]["yaxis"] == "y2"
    bare = tr.steps.drop(columns=list(PHASES))
    tr2 = type(tr)(tr.requests, bare, tr.batch, tr.events, tr.kv, tr.counters, tr.meta)
    assert as_json(fe.phase_figure(tr2))["layout"]["meta"]["phases"] == []


def test_calibration_figure_plots_each_step_and_request(run):
    wl, tr = run
    tr = type(tr)(tr.requests, tr.steps.copy(), tr.batch, tr.events, tr.kv, tr.counters, tr.meta)
    tr.steps.loc[3, "end"] += 400.0  # a stalled step: left out of the fit, drawn hollow
    cmp = compare_with_simulator(tr, wl.requests)
    spec = as_json(fe.calibration_figure(cmp.steps, cmp.ttft))
    pts = [t for t in spec["data"] if t.get("xaxis", "x") == "x" and t["mode"] == "markers"]
    assert sum(len(decode(t["x"])) for t in pts) == len(cmp.steps)
    (out,) = [t for t in pts if t["name"].startswith("left out")]
    assert len(decode(out["x"])) == cmp.cost.fit_info["outliers"] >= 1
    req = [t for t in spec["data"] if t.get("xaxis") == "x2" and t["mode"] == "markers"]
    assert sum(len(decode(t["x"])) for t in req) == cmp.ttft[["measured", "simulated"]].notna().all(axis=1).sum()
    diag = named(spec, "prediction = measurement")
    assert len(diag) == 2 and sum(d.get("showlegend", True) for d in diag) == 1
