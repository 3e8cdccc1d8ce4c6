"""figures.policies: the one-server order chart and the waiting-age heatmaps."""
from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from figures.policies import age_grid, service_figure, waiting_age_figure
from plotly_util import decode
from sim.lessons.starvation import LESSON_JOBS, LONG, mean_wait, run_config, service_table, stream_jobs, workload
from sim.simulate import simulate


def _tables():
    runs = {lab: simulate(workload(LESSON_JOBS), run_config(p)) for lab, p in
            (("FCFS", "fcfs"), ("Shortest-first", "sjf"), ("Priority", "priority"))}
    return {k: service_table(t) for k, t in runs.items()}, {k: mean_wait(t) for k, t in runs.items()}


def test_service_figure_rows_bars_and_frames():
    tables, waits = _tables()
    fig = service_figure(tables, waits, [j[0] for j in LESSON_JOBS])
    go.Figure(fig.to_dict())  # valid plotly
    spec = json.loads(pio.to_json(fig))
    assert spec["layout"]["meta"]["order"]["Shortest-first"] == list("ADFBCE")
    assert spec["layout"]["meta"]["mean_wait"] == {"FCFS": 43.17, "Shortest-first": 37.0, "Priority": 47.83}
    assert spec["layout"]["yaxis"]["ticktext"][1] == "<b>Shortest-first</b><br>mean wait 37.00"
    bars = {t["name"]: t for t in spec["data"] if t["type"] == "bar"}
    assert list(bars) == list("ABCDEF")
    e = bars["E"]  # E (length 20) starts at 40+5+10+2 = 57 (FCFS), 40+2+3+5+10 = 60 (shortest-first), 45 (priority)
    assert decode(e["base"]).tolist() == [57, 60, 45] and decode(e["x"]).tolist() == [20, 20, 20]
    # frames: one per time unit 0..80, each moving only the curtain (two layout shapes)
    assert len(spec["frames"]) == 81 and all(set(f) == {"name", "layout"} for f in spec["frames"])
    assert spec["frames"][10]["layout"]["shapes"][1]["x0"] == 10
    assert [b["label"] for b in spec["layout"]["updatemenus"][0]["buttons"]] == ["▶ Play", "❚❚ Pause"]


def test_waiting_age_figure_shows_starvation_and_aging():
    wl = workload(stream_jobs())
    runs = {"no aging": simulate(wl, run_config("sjf")), "aging": simulate(wl, run_config("sjf", 1.0))}
    fig = waiting_age_figure(runs, mark=LONG)
    go.Figure(fig.to_dict())
    spec = json.loads(pio.to_json(fig))
    assert spec["layout"]["meta"]["starts"] == {"no aging": 80, "aging": 28}
    ages = decode(spec["data"][0]["z"])
    assert ages.shape == (41, 110) and ages.dtype == np.float32
    assert ages[0, 79] == 79 and np.isnan(ages[0, 80])  # LONG waited 79 units, then runs
    aged = [t for t in spec["data"] if t.get("yaxis") == "y2" and t["name"] == "waiting"][0]
    assert np.nanmax(decode(aged["z"])[0]) == 27  # aging: LONG never waits past 27
    assert spec["layout"]["coloraxis"]["cmax"] == spec["layout"]["meta"]["max_age"]
    assert any("LONG starts at 80" == a.get("text") for a in spec["layout"]["annotations"])
    assert len(spec["frames"]) == 111


def test_age_grid_thins_wide_runs():
    tr = simulate(workload(stream_jobs(count=200, length=5)), run_config("sjf"))
    t, a, served, stride = age_grid(tr, max_cells=10_000)
    assert stride > 1 and a.shape[1] == len(t) and a.size <= 10_000 + a.shape[0]
    assert served.shape == a.shape and served.any()
