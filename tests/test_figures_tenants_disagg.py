"""Figure builders of the Tenants (figures/tenants.py) and Disaggregation (figures/disagg.py) pages."""
from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from figures import disagg as fd
from figures import tenants as ft
from plotly_util import decode
from sim import scenarios
from sim.lessons.disagg import ALL_LINKS, Setup, breakeven_bandwidth, crossovers, prompt_grid, ratio_vs_bandwidth, sweep
from sim.lessons.fairness import flood_workload, policy_configs, service_gap, vtc_bound
from sim.simulate import simulate


def as_json(fig: go.Figure) -> dict:
    spec = json.loads(fig.to_json())
    go.Figure(spec)  # validates every property
    return spec


@pytest.fixture(scope="module")
def two():
    wl = scenarios.workload("two_tenants")
    return {k: simulate(wl, c) for k, c in policy_configs().items()}


def bars(spec, run, tenant, state):
    return next(t for t in spec["data"] if t.get("meta") == {"run": run, "tenant": tenant, "state": state})


def test_timelines_draw_each_run_with_tenant_bars(two):
    spec = as_json(ft.timelines_figure(two, focus="B"))
    assert spec["layout"]["meta"]["kind"] == "bar" and spec["layout"]["meta"]["runs"] == list(two)
    run = bars(spec, "cap", "B", "running")
    assert run["type"] == "bar" and run["orientation"] == "h" and run["xaxis"] == "x3"
    got = dict(zip(run["y"], zip(decode(run["base"]).tolist(), decode(run["x"]).tolist())))
    assert got == {"B0": (1, 10), "B1": (10, 10)}  # B0 runs 1..11, B1 10..20
    wait = bars(spec, "fcfs", "B", "waiting")
    assert sorted(zip(wait["y"], decode(wait["base"]).tolist(), decode(wait["x"]).tolist())) == [
        ("B0", 1, 29), ("B1", 1, 29)]
    labels = bars(spec, "cap", "B", "finish labels")
    assert labels["text"] == ["B0@11", "B1@20"]
    # rows: requests grouped by tenant, the same order on every panel
    assert spec["layout"]["yaxis"]["categoryarray"][-2:] == ["B0", "B1"]
    assert spec["layout"]["yaxis4"]["matches"] == "y" and spec["layout"]["xaxis2"]["matches"] == "x"


def test_timelines_frames_move_only_the_veils(two):
    spec = as_json(ft.timelines_figure(two, focus="B"))
    frames = spec["frames"]
    assert len(frames) == spec["layout"]["meta"]["frames"] == 42  # x = 0, 1, ..., 41 (the last finish)
    assert all(set(f) == {"name", "layout"} and len(f["layout"]["shapes"]) == 8 for f in frames)
    assert frames[11]["layout"]["shapes"][0]["x0"] == 11 and frames[11]["layout"]["shapes"][6]["xref"] == "x4"
    last = frames[-1]["layout"]["shapes"]
    assert last[0]["x0"] == last[0]["x1"] and last[1]["line"]["width"] == 0  # the end uncovers everything
    assert len(json.dumps(frames)) < 100_000
    steps = spec["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps[:3]] == ["0", "1", "2"]


def test_timelines_switch_to_scattergl_past_the_bar_limit():
    wl = flood_workload()
    runs = {k: simulate(wl, c) for k, c in policy_configs(cap=6).items()}
    spec = as_json(ft.timelines_figure(runs, focus="light", max_bars=100))
    assert spec["layout"]["meta"]["kind"] == "scattergl"
    t = bars(spec, "vtc", "light", "running")
    assert t["type"] == "scattergl" and t["mode"] == "lines"
    x = decode(t["x"]).astype(float)
    assert np.isnan(x[2::3]).all() and (x[1::3] > x[0::3]).all()
    assert not any(t.get("mode") == "text" for t in spec["data"])  # 72 rows: no per-request labels
    assert spec["layout"]["yaxis"]["showticklabels"] is False


def test_gap_figure_draws_each_run_and_the_bound(two):
    series = {k: service_gap(tr)["series"] for k, tr in two.items()}
    bound = vtc_bound(scenarios.workload("two_tenants"), {})["bound"]
    spec = as_json(ft.gap_figure(series, bound, step=11))
    names = [t["name"] for t in spec["data"]]
    assert names[:4] == ["FCFS", "Round-robin", "Round-robin + cap", "VTC"] and names[4].startswith("VTC bound")
    assert max(decode(spec["data"][0]["y"])) == 184
    assert decode(spec["data"][4]["y"]).tolist() == [288, 288]
    assert spec["layout"]["shapes"][0]["x0"] == 11  # the scrubbed step


def test_counters_figure(two):
    spec = as_json(ft.counters_figure(two["vtc"]))
    assert [t["name"] for t in spec["data"]] == ["tenant A", "tenant B"]
    b = spec["data"][1]
    assert decode(b["x"])[0] == 2 and decode(b["y"])[0] == 40  # B is lifted to A's counter on arrival
    empty = as_json(ft.counters_figure(two["fcfs"]))
    assert not empty["data"] and "no counters" in empty["layout"]["annotations"][0]["text"]


# -- disaggregation ---------------------------------------------------------------------------

LABELS = {k: v.name for k, v in ALL_LINKS.items()}


def test_growth_figure_marks_crossovers_only_when_they_exist():
    links = ["nvlink-h100", "ethernet-25g"]
    flat = Setup()
    spec = as_json(fd.growth_figure(sweep(prompt_grid(), links, flat), LABELS, crossovers(links, flat)))
    assert [t["name"] for t in spec["data"]] == ["KV cache size", "prefill compute", LABELS["nvlink-h100"],
                                                 LABELS["ethernet-25g"]]
    att = Setup(attention=True)
    spec = as_json(fd.growth_figure(sweep(prompt_grid(), links, att), LABELS, crossovers(links, att)))
    marks = [t for t in spec["data"] if t["name"].startswith("crossover")]
    assert len(marks) == 1 and 15_000 < marks[0]["x"][0] < 20_000


def test_ratio_figure_is_flat_in_the_lessons_model():
    df = sweep(prompt_grid(), ["ethernet-100g"], Setup())
    spec = as_json(fd.ratio_figure(df, LABELS))
    y = decode(spec["data"][0]["y"])
    assert np.allclose(y, y[0]) and round(float(y[0]), 1) == 32.3
    assert spec["data"][1]["name"] == "transfer = prefill"


def test_breakeven_figure_places_links_on_the_curve():
    s = Setup()
    curve = ratio_vs_bandwidth([10 ** (x / 8) for x in range(-16, 29)], [1024], s)
    spec = as_json(fd.breakeven_figure(curve, breakeven_bandwidth(s) / 1e9,
                                       {"ethernet-100g": (LABELS["ethernet-100g"], 12.5, 0.323)}, 1024))
    assert spec["data"][1]["x"] == [12.5] and spec["data"][1]["y"][0] == pytest.approx(32.3)
    assert spec["layout"]["shapes"][1]["x0"] == pytest.approx(4.0358, rel=1e-3)


def test_ttft_figure_animates_over_prompts():
    links = ["nvlink-h100", "ethernet-100g"]
    df = sweep(prompt_grid(256, 131072, per_octave=2), links, Setup(overhead_ms=1.0))
    spec = as_json(fd.ttft_figure(df, LABELS, overhead_ms=1.0, start=1024))
    assert [t["name"] for t in spec["data"]] == ["prefill compute", "KV transfer (colour = link)", "fixed overhead"]
    frames = {f["name"]: f for f in spec["frames"]}
    assert len(frames) == len(df["prompt"].unique()) and "1024" in frames
    f = frames["1024"]
    assert decode(f["data"][0]["x"]).round(1).tolist() == [33.3, 33.3]
    assert decode(f["data"][1]["x"]).round(2).tolist() == [0.30, 10.74]  # overhead drawn separately
    assert spec["layout"]["sliders"][0]["active"] == spec["layout"]["meta"]["prompts"].index(1024)
    assert len(json.dumps(spec["frames"])) < 60_000
