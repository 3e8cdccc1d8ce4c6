"""Figure builders of the Compare page (figures/compare.py): assert on the figure data."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from figures import compare as fc
from figures.playback import request_index
from plotly_util import decode
from sim import scenarios
from sim.analysis import compare
from sim.simulate import simulate


@pytest.fixture(scope="module")
def runs():
    wl = scenarios.workload("lesson_abc")
    return simulate(wl), simulate(wl, {"num_gpu_blocks": 16})


def as_json(fig: go.Figure) -> dict:
    return json.loads(fig.to_json())


def heat(spec: dict, yaxis: str) -> np.ndarray:
    return decode(next(t for t in spec["data"] if t["type"] == "heatmap" and t["yaxis"] == yaxis)["z"])


def test_lockstep_puts_both_runs_in_one_figure_with_shared_frames(runs):
    a, b = runs
    fig = fc.lockstep_figure(a, b, titles=("A: 8 blocks", "B: 16 blocks"))
    go.Figure(fig.to_dict())  # a valid plotly figure
    spec = as_json(fig)
    za, zb = heat(spec, "y"), heat(spec, "y2")
    idx = request_index(a)
    assert za.shape == zb.shape == (3, 7)
    assert za[2, 4] == -1 and zb[2, 4] == idx["C"]  # step 5: C preempted in A, still running in B
    assert spec["layout"]["xaxis"]["matches"] == "x2"
    # one set of frames drives both sides: each frame moves a veil + cursor on x/y and on x2/y2
    names = [f["name"] for f in spec["frames"]]
    assert names == [str(s) for s in range(1, 8)]
    for f in spec["frames"]:
        shapes = f["layout"]["shapes"]
        assert [s["xref"] for s in shapes] == ["x", "x", "x2", "x2"]
        assert [s["yref"] for s in shapes] == ["y domain"] * 2 + ["y2 domain"] * 2
        assert shapes[0]["x0"] == shapes[2]["x0"] == int(f["name"]) + 0.5  # same step on both sides
    slider = spec["layout"]["sliders"][0]
    assert [s["args"][0][0] for s in slider["steps"]] == names
    assert [b["label"] for b in spec["layout"]["updatemenus"][0]["buttons"]] == ["▶ Play", "❚❚ Pause"]
    assert spec["layout"]["meta"] == {"frames": 7, "last_step": [7, 7], "slots": [3, 3]}
    # a legend entry is drawn once even though both sides have it
    shown = [t["name"] for t in spec["data"] if t.get("showlegend") is not False and t["type"] == "scatter"]
    assert len(shown) == len(set(shown))


def test_lockstep_with_runs_of_different_length():
    wl = scenarios.workload("lesson_abc")
    a, b = simulate(wl), simulate(wl, {"scheduler": "static"})
    spec = as_json(fc.lockstep_figure(a, b))
    assert spec["layout"]["meta"]["last_step"] == [7, 10]
    assert len(spec["frames"]) == 10  # frames cover the longer run
    assert any("all done at step 7" in a["text"] for a in spec["layout"]["annotations"])
    assert "padding (faded)" in [t["name"] for t in spec["data"] if t.get("showlegend") is not False]


def test_lockstep_frames_are_capped_and_small():
    wl = scenarios.workload("random_500")
    a, b = simulate(wl), simulate(wl, {"num_gpu_blocks": 600})
    fig = fc.lockstep_figure(a, b, max_frames=120)
    assert len(fig.frames) == 120
    frames_bytes = len(json.dumps([f.to_plotly_json() for f in fig.frames], default=str))
    assert frames_bytes < 150_000  # layout deltas only, never the grids


def test_first_difference(runs):
    a, b = runs
    assert fc.first_difference(a, b) == 5  # C is preempted at step 5 only with 8 blocks
    assert fc.first_difference(a, a) is None


def test_diff_table_says_which_side_is_better(runs):
    m, _ = compare(*runs)
    t = fc.diff_table(m).set_index("key")
    assert t.loc["preemptions", "better"] == "B" and t.loc["preemptions", "B - A"] == -1
    assert t.loc["itl_worst", "better"] == "B" and t.loc["itl_worst", "change %"] == pytest.approx(-50)
    assert t.loc["steps", "better"] == "same"
    assert "jain_index" not in t.index  # NaN on both sides (one tenant): left out
    assert t.loc["e2e_mean", "metric"] == "end-to-end latency, mean"


def test_change_figure_sorts_and_colours_requests(runs):
    _, d = compare(*runs)
    spec = as_json(fc.change_figure(d, "e2e", "units"))
    bar = spec["data"][0]
    assert bar["type"] == "bar"
    assert list(bar["x"]) == ["C", "A", "B"] and list(decode(bar["y"])) == [-10, 0, 0]
    assert bar["marker"]["color"] == [fc.FASTER, fc.SAME, fc.SAME]
    assert spec["layout"]["meta"] == {"metric": "e2e", "faster": 1, "slower": 0, "same": 2, "missing": 0}


def test_change_figure_past_the_bar_limit_uses_webgl_markers():
    n = 50
    d = pd.DataFrame({"ttft_A": np.arange(n, dtype=float), "ttft_B": np.arange(n, dtype=float)[::-1]},
                     index=pd.Index([f"r{i}" for i in range(n)], name="request"))
    d["ttft_change"] = d["ttft_B"] - d["ttft_A"]
    d.loc["r3", "ttft_change"] = np.nan
    spec = as_json(fc.change_figure(d, "ttft", max_bars=10))
    tr = spec["data"][0]
    assert tr["type"] == "scattergl"
    y = decode(tr["y"])
    assert len(y) == n - 1 and (np.diff(y) >= 0).all()
    assert spec["layout"]["meta"]["missing"] == 1


def test_change_figure_past_the_point_limit_draws_evenly_spaced_ranks_with_both_ends():
    n = 5_001
    rng = np.random.default_rng(4)
    a = rng.uniform(0, 100, n)
    d = pd.DataFrame({"e2e_A": a, "e2e_B": a + rng.normal(0, 10, n)},
                     index=pd.Index([f"r{i}" for i in range(n)], name="request"))
    d["e2e_change"] = d["e2e_B"] - d["e2e_A"]
    spec = as_json(fc.change_figure(d, "e2e", max_bars=10, max_points=101))
    tr = spec["data"][0]
    x, y = decode(tr["x"]), decode(tr["y"])
    full = np.sort(d["e2e_change"].to_numpy())
    assert len(x) == 101 and x[0] == 0 and x[-1] == n - 1 and (np.diff(x) == 50).all()
    assert np.allclose(y, full[x]) and len(tr["customdata"]) == 101
    meta = spec["layout"]["meta"]
    assert meta["faster"] + meta["slower"] + meta["same"] == n          # the counts are of every request
    assert "101 evenly spaced shown" in spec["layout"]["xaxis"]["title"]["text"]
