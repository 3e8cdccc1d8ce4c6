"""sim/overview.py and figures/overview.py: a long run per time bucket, and the chart a window is
dragged on."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from figures.overview import overview_figure, selected_range
from sim import scenarios
from sim.cost import cost_from_preset
from sim.fleet import FleetSettings, simulate_fleet
from sim.fleet.scenarios import chat
from sim.overview import MAX_BUCKETS, bucket_width, fleet_overview, overview, step_span
from sim.simulate import simulate


@pytest.fixture(scope="module")
def busy():
    tr = simulate(scenarios.workload("random_500"), {"enable_prefix_caching": True})
    assert tr.requests["preemptions"].sum() > 0
    return tr


@pytest.fixture(scope="module")
def fleet():
    return simulate_fleet(chat(240), FleetSettings(replicas=3, router="round_robin"),
                          cost=cost_from_preset("a100-8B-fp16"))


def _totals(ov: pd.DataFrame) -> dict:
    return {c: float(np.nansum(ov[c].to_numpy(dtype=float))) for c in
            ("steps", "prefill_tokens", "decode_tokens", "recompute_tokens", "preemptions", "arrivals")}


def _trace_totals(tr) -> dict:
    s = tr.steps
    return {"steps": float(len(s)), "prefill_tokens": float(s["prefill_tokens"].sum()),
            "decode_tokens": float(s["decode_tokens"].sum()), "recompute_tokens": float(s["recompute_tokens"].sum()),
            "preemptions": float(s["preempted"].sum()), "arrivals": float(len(tr.requests))}


@pytest.mark.parametrize("clock", ["steps", "time"])
@pytest.mark.parametrize("max_buckets", [MAX_BUCKETS, 37])
def test_the_buckets_add_up_to_the_run(busy, clock, max_buckets):
    ov = overview(busy, clock, max_buckets=max_buckets)
    assert _totals(ov) == _trace_totals(busy)
    assert _trace_totals(busy)["recompute_tokens"] > 0 and _trace_totals(busy)["preemptions"] > 0
    assert len(ov) <= max_buckets + 1
    w = ov.attrs["width"]
    assert np.allclose(np.diff(ov["start"].to_numpy()), w) and (ov["end"] - ov["start"]).round(9).eq(round(w, 9)).all()
    # a round width: 1, 2 or 5 times a power of ten
    mant = w / 10 ** np.floor(np.log10(w))
    assert round(mant, 9) in (1.0, 2.0, 5.0)


def test_bucket_width_is_the_smallest_round_one_that_fits():
    assert bucket_width(360_000, 1500) == 500
    assert bucket_width(3_000, 1500) == 2
    assert bucket_width(10, 1500) == 1            # never below one step
    assert bucket_width(10, 1500, whole=False) == 0.01
    for span in (7, 999, 12_345, 360_033, 3.6e6):
        w = bucket_width(span, 1500)
        assert span / w <= 1500 and (w == 1 or span / (w / 2.5) > 1500 or span / (w / 2) > 1500)


def test_means_peaks_and_ttft_quantiles_are_those_of_each_bucket(busy):
    ov = overview(busy, max_buckets=40)
    w, start = ov.attrs["width"], ov["start"].iloc[0]
    s = busy.steps
    b = ((s["step"].to_numpy() - start) // w).astype(int)
    for col, how in (("running", "mean"), ("waiting", "mean"), ("waiting", "max")):
        want = pd.Series(s[col].to_numpy(dtype=float)).groupby(b).agg(how)
        got = ov["peak_waiting" if how == "max" else col].to_numpy()[want.index.to_numpy()]
        assert np.allclose(got, want.to_numpy()), col
    nb = busy.num_blocks
    want_kv = pd.Series(1 - s["free_blocks"].to_numpy(dtype=float) / (nb - 1)).groupby(b).mean()
    assert np.allclose(ov["kv_use"].to_numpy()[want_kv.index.to_numpy()], want_kv.to_numpy())
    r = busy.requests
    arr = r["arrival_step"].to_numpy(dtype=float)
    ttft = r["first_token_step"].to_numpy(dtype=float) - arr
    rb = ((arr - start) // w).astype(int)
    for k in np.unique(rb):
        v = ttft[rb == k]
        v = v[~np.isnan(v)]
        assert ov["ttft_p50"].iloc[k] == pytest.approx(np.median(v))
        assert ov["ttft_p90"].iloc[k] == pytest.approx(np.percentile(v, 90))
    assert ov["ttft_p90"].max() > ov["ttft_p50"].min()   # not one value everywhere


def test_rates_are_per_step_on_the_step_clock_and_per_second_on_ms():
    tr = simulate(scenarios.workload("random_500"))
    ov = overview(tr, max_buckets=50)
    assert ov.attrs["rate_unit"] == "step"
    assert np.allclose(ov["decode_per"], ov["decode_tokens"] / ov.attrs["width"], equal_nan=True)


def test_the_fleet_overview_shares_buckets_and_adds_up_per_replica(fleet):
    fo = fleet_overview(fleet)
    assert fo.attrs["unit"] == "ms" and fo.attrs["rate_unit"] == "s" and fo.attrs["replicas"] == 3
    starts = [g["start"].to_numpy() for _, g in fo.groupby("replica")]
    assert all(np.array_equal(starts[0], s) for s in starts[1:])
    for i, tr in enumerate(fleet.replicas):
        g = fo[fo["replica"] == i]
        assert _totals(g)["decode_tokens"] == float(tr.steps["decode_tokens"].sum())
        assert _totals(g)["steps"] == float(tr.num_steps)
        assert _totals(g)["arrivals"] == float(len(tr.requests))
        assert np.allclose(g["decode_per"], g["decode_tokens"] / (fo.attrs["width"] / 1000), equal_nan=True)


def test_a_selection_maps_to_the_steps_under_it(busy, fleet):
    ov = overview(busy)
    assert step_span(ov, 99.5, 300.2) == (100, 300)
    assert step_span(ov, -1e9, -1e8) is None
    rep = fleet.replicas[0]
    fo = overview(rep, "time")
    s = rep.steps
    t0, t1 = float(s["start"].iloc[100]), float(s["start"].iloc[200])
    a, b = step_span(fo, t0, t1)
    inside = s["step"].to_numpy()[(s["start"].to_numpy() >= t0) & (s["start"].to_numpy() <= t1)]
    assert a <= inside.min() and b >= inside.max() and b - a < len(s) / 2


def test_the_same_run_gives_the_same_overview(busy):
    pd.testing.assert_frame_equal(overview(busy), overview(busy))


def test_the_chart_shares_x_shades_the_window_and_can_be_box_selected(busy):
    ov = overview(busy)
    fig = overview_figure(ov, (200, 400))
    lay = fig.layout
    assert lay.dragmode == "select" and lay.selectdirection == "h"
    assert [s.x0 for s in lay.shapes] == [200] and [s.x1 for s in lay.shapes] == [400]
    assert lay.xaxis2.matches == "x" and lay.xaxis5.matches == "x" and lay.xaxis5.showticklabels
    assert {t.type for t in fig.data} == {"scatter", "bar"}   # bars: what a box selects
    names = {t.name for t in fig.data}
    assert {"running", "waiting", "KV in use %", "prefill tokens / step", "decode tokens / step",
            "recompute tokens / step", "preemptions", "TTFT p50 of arrivals"} <= names
    assert lay.meta["buckets"] == len(ov) and lay.meta["window"] == [200, 400]
    assert overview_figure(ov).layout.shapes == ()
    fig.to_json()   # Plotly validates it


def test_the_fleet_chart_draws_a_line_per_replica(fleet):
    fig = overview_figure(fleet_overview(fleet), names=fleet.names)
    running = [t for t in fig.data if t.yaxis == "y" and t.line.dash is None]
    assert len(running) == 3 and len({t.line.color for t in running}) == 3
    assert fig.layout.meta["replicas"] == 3


@pytest.mark.parametrize("sel,want", [
    (None, None), ({}, None), ({"selection": {"box": [], "points": []}}, None),
    ({"selection": {"box": [{"x": [400.5, 120.0], "y": [0, 3], "xref": "x3"}], "points": []}}, (120.0, 400.5)),
    ({"selection": {"box": [], "points": [{"x": 7}, {"x": 3}]}}, (3.0, 7.0)),
    ({"selection": {"box": [{"x": ["a", None]}]}}, None),
])
def test_the_dragged_range_is_read_from_the_chart_state(sel, want):
    assert selected_range(sel) == want
