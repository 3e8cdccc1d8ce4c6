"""figures.slo (the SLO timeline and the misses table) and figures.policies' predictor figure,
built from real runs."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from figures.policies import predictor_gain_figure
from figures.slo import misses_table, slo_timeline_figure
from plotly_util import decode
from sim.lessons.predictor import predictor_summary, predictor_sweep, predictor_workload
from sim.simulate import simulate
from sim.slo import SLO, slo_table
from sim.workload import Request, Workload


def run():
    # six 500-token prompts at once (one prompt per 10-unit step) and a queue of four: two rejected
    reqs = [Request(f"r{i}", 500, 3) for i in range(6)]
    return simulate(Workload(reqs, config={"max_num_batched_tokens": 500, "max_queued_requests": 4}))


def test_timeline_marks_met_missed_and_rejected():
    tab = slo_table(run(), SLO(ttft=35, tpot=10))
    fig = slo_timeline_figure(tab, "units", 35)
    go.Figure(fig.to_dict())
    meta = fig.layout.meta
    n_rej = int(tab["rejected"].sum())
    assert n_rej == 2 and meta["rejected"] == n_rej
    assert meta["met"] + meta["missed"] + meta["rejected"] == len(tab)
    by = {t.name: t for t in fig.data}
    assert (decode(by["missed"].y) > 35).all() and (decode(by["met"].y) <= 35).all()
    assert "missed: TTFT +" in by["missed"].text[0]
    assert fig.layout.shapes[0].y0 == 35  # the target line


def test_misses_table_in_order_of_the_miss():
    tab = slo_table(run(), SLO(ttft=35, e2e=55))
    m = misses_table(tab)
    assert len(m) == int((~tab["met"]).sum())
    assert m["missed at"].is_monotonic_increasing
    rejected = m[m["missed"] == "rejected"]
    assert len(rejected) == 2 and (rejected["missed at"] == 0).all()
    assert any("E2E +" in s and "TTFT +" in s for s in m["missed"])


def test_predictor_sweep_and_figure():
    wl = predictor_workload(n=40)
    table = predictor_sweep((0.0, 1.0, 4.0), seeds=2, workload=wl)
    assert list(table["policy"][:2]) == ["fcfs", "sjf"]
    assert (table["policy"] == "sjf_predicted").sum() == 1 + 2 + 2  # sigma 0 needs one seed
    s = predictor_summary(table)
    assert s["gain_kept"].iloc[0] == 1.0 and s["gain_kept"].iloc[-1] < s["gain_kept"].iloc[0]
    assert (s["gain_low"] <= s["gain_kept"]).all() and (s["gain_kept"] <= s["gain_high"]).all()
    fig = predictor_gain_figure(table, s, 1.0)
    go.Figure(fig.to_dict())
    assert set(fig.layout.meta["gain_kept"]) == {"0", "1", "4"}
    assert np.allclose(decode(fig.data[1].y), 100 * s["gain_kept"].to_numpy())


def test_hover_escapes_names_from_the_workload():
    tr = simulate(Workload([Request("<a href='x'>r</a>", 10, 2, tenant="<b>t</b>")]))
    fig = slo_timeline_figure(slo_table(tr, SLO(ttft=1)), "units")
    text = " ".join(t for tr_ in fig.data for t in tr_.text)
    assert "<a" not in text and "<b>" not in text and "&lt;a href=" in text and "&lt;b&gt;t" in text
