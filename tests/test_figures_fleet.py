"""figures/fleet.py: pure builders from a FleetTrace. The lanes (one row per replica on one
time axis, the state at each column's time), the signals, the routing table and a decision's
scores, where shared-prefix groups landed, and the numbers."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from figures import fleet as ff
from figures.common import MAX_HOVER_CELLS, REQUEST_PALETTE
from sim.cost import cost_from_preset
from sim.fleet import FleetSettings, simulate_fleet
from sim.fleet.metrics import group_placement, prefix_groups
from sim.fleet.scenarios import FLEET_SCENARIOS
from sim.workload import Request, Workload

P = len(REQUEST_PALETTE)


@pytest.fixture(scope="module")
def chat():
    sc = FLEET_SCENARIOS["chat"]
    wl = sc.workload()
    cost = cost_from_preset(sc.cost)
    return wl, simulate_fleet(wl, sc.a, sc.config, cost=cost), simulate_fleet(wl, sc.b, sc.config, cost=cost)


def lane_heatmaps(fig) -> list:
    return [t for t in fig.data if t.type == "heatmap" and not t.name.endswith(" kind")]


def test_the_lanes_have_one_row_per_replica_on_one_time_axis(chat):
    _, fa, _ = chat
    fig = ff.lanes_figure(fa, t=5000.0)
    go.Figure(fig.to_dict())   # a valid figure
    heat = lane_heatmaps(fig)
    assert [h.name for h in heat] == fa.names and [h.yaxis for h in heat] == ["y", "y2", "y3", "y4"]
    assert {t.xaxis for t in fig.data} == {"x"}   # ONE x axis: zoom and the marker are shared
    domains = [fig.layout[f"yaxis{'' if i == 0 else i + 1}"].domain for i in range(4)]
    assert all(a[0] > b[1] for a, b in zip(domains, domains[1:]))   # top to bottom in worker order, apart
    assert list(fig.layout.xaxis.range) == list(ff.fleet_span(fa))
    marker = fig.layout.shapes[0]
    assert (marker.x0, marker.x1, marker.yref, marker.y0, marker.y1) == (5000.0, 5000.0, "paper", 0, 1)
    m = fig.layout.meta
    assert m["replicas"] == 4 and m["slots"] == [ff.replica_slots(t) for t in fa.replicas]
    assert m["cells"] == sum(m["slots"]) * m["bins"] and m["hover"] == (m["cells"] <= MAX_HOVER_CELLS)
    assert [np.asarray(h.z).shape for h in heat] == [(s, m["bins"]) for s in m["slots"]]


def brute_force_cell(trace, t: float, slot: int) -> int:
    """The request index that held `slot` at time t (-1: idle), read off the tables directly."""
    s = trace.steps
    hit = s[(s["start"] <= t) & (t < s["end"]) & ~s["idle"]]
    if hit.empty:
        return -1
    b = trace.batch
    row = b[(b["step"] == hit["step"].iloc[0]) & (b["slot"] == slot)]
    if row.empty:
        return -1
    return int(np.flatnonzero(trace.requests["request"].to_numpy() == row["request"].iloc[0])[0])


def test_each_lane_column_shows_what_ran_at_its_time(chat):
    _, fa, _ = chat
    tr = fa.replicas[1]
    t0, t1 = 3000.0, 3400.0
    centres, grid, kinds, rows = ff.lane_time_grid(tr, t0, t1, 80)
    assert np.allclose(centres, t0 + (np.arange(80) + 0.5) * 5.0)
    busy = 0
    for j in range(0, 80, 3):
        for slot in range(grid.shape[0]):
            want = brute_force_cell(tr, centres[j], slot)
            assert grid[slot, j] == want, (j, slot)
            busy += want >= 0
    assert busy > 20   # the window is a busy one: the check compared real work
    assert ((kinds == ff.KIND_CODE["prefill"]) & (grid >= 0)).any()   # some prompt work in it too
    fig = ff.lanes_figure(fa, None, (t0, t1), bins=80)
    z = np.asarray(lane_heatmaps(fig)[1].z)
    assert np.array_equal(z, np.where(grid >= 0, grid % P, -1))   # colour = request, by palette



def test_lane_columns_between_steps_are_idle():
    reqs = [Request(id=f"r{i}", prompt_len=200, max_tokens=4, arrival_time=60.0 * i) for i in range(8)]
    wl = Workload(reqs, {"num_gpu_blocks": 64, "block_size": 16, "max_num_seqs": 4, "max_num_batched_tokens": 64})
    f = simulate_fleet(wl, FleetSettings(replicas=2, router="round_robin"), cost=cost_from_preset("a100-8B-fp16"))
    tr = f.replicas[0]
    lo, hi = ff.fleet_span(f)
    centres, grid, _, _ = ff.lane_time_grid(tr, lo, hi, 600)
    want = np.array([[brute_force_cell(tr, c, slot) for c in centres] for slot in range(grid.shape[0])])
    assert np.array_equal(grid, want)
    on = (want[0] >= 0).astype(int)
    assert (np.diff(on) == -1).sum() >= 3   # the replica went idle and busy again: gaps were compared


def test_a_window_draws_its_time_range_only_and_the_bins_are_capped(chat, monkeypatch):
    _, fa, _ = chat
    lo, hi = ff.fleet_span(fa)
    w = ff.window_of(fa, 10_000.0, 2000.0)
    assert w == (9000.0, 11000.0)
    assert ff.window_of(fa, lo, 2000.0) == (lo, lo + 2000.0)   # kept inside the run
    assert ff.window_of(fa, hi + 50, 2000.0) == (hi - 2000.0, hi)
    assert ff.window_of(fa, 10_000.0, None) == (lo, hi)
    fig = ff.lanes_figure(fa, 10_000.0, w, bins=10**6)
    assert fig.layout.meta["bins"] == ff.MAX_LANE_BINS   # whatever the run or the ask
    assert fig.layout.meta["cells"] <= ff.MAX_LANE_CELLS
    slots = sum(fig.layout.meta["slots"])
    monkeypatch.setattr(ff, "MAX_LANE_CELLS", slots * 500)   # many slots: fewer columns, the same cells at most
    assert ff.lanes_figure(fa, 10_000.0, w).layout.meta["bins"] == 500
    xs = np.concatenate([np.asarray(h.x) for h in lane_heatmaps(fig)])
    assert xs.min() > 9000.0 and xs.max() < 11000.0 and list(fig.layout.xaxis.range) == [9000.0, 11000.0]


def test_the_signals_have_a_line_per_replica_per_signal_and_keep_the_peaks(chat):
    _, fa, _ = chat
    fig = ff.signals_figure(fa, t=1234.0, max_points=250)
    go.Figure(fig.to_dict())
    assert len(fig.data) == 4 * len(ff.SIGNALS) and {t.type for t in fig.data} == {"scatter"}   # SVG: redraws fast
    assert [t.showlegend for t in fig.data[:4]] == [True, False, False, False]   # one legend entry a replica
    assert {t.yaxis for t in fig.data} == {"y", "y2", "y3", "y4"} and fig.layout.shapes[0].x0 == 1234.0
    assert all(len(t.x) <= 250 for t in fig.data) and len(fa.replicas[0].steps) > 4 * 250   # binned
    assert ff.signals_figure(fa, max_points=10**6).layout.meta["max_points"] == ff.MAX_FIGURE_POINTS // 4
    running = [t for t in fig.data if t.yaxis == "y2"]
    for i, t in enumerate(running):
        assert max(t.y) == fa.replicas[i].steps["running"].max()   # binned, the peak survives
    hit = [t for t in fig.data if t.yaxis == "y4"][0]
    r = fa.replicas[0].requests
    assert hit.y[-1] == pytest.approx(100 * r["cached_tokens"].sum() / r["prompt_len"].sum(), rel=1e-5)


def test_the_routing_table_says_why_and_scores_every_replica(chat):
    _, fa, fb = chat
    t = ff.routing_table(fa)
    assert len(t) == 600 and list(t.columns[:7]) == ["request", "tenant", "prompt", "arrival (ms)", "replica", "rule",
                                                     "candidates"]
    assert {"score: in_flight", "score: matched"} <= set(t.columns)
    k = 123
    raw = json.loads(fa.routes["scores"].iloc[k])
    assert t["score: matched"].iloc[k] == " · ".join(f"{x:g}" for x in raw["matched"])
    assert t["replica"].iloc[k] == fa.names[int(fa.routes["replica"].iloc[k])]
    rr = ff.routing_table(fb)
    assert set(rr["rule"]) == {"round_robin"} and not any(c.startswith("score:") for c in rr.columns)


def test_a_decision_is_explained_with_its_numbers_and_drawn_per_scorer(chat):
    _, fa, fb = chat
    rid = ff.first_of_reason(fa)
    row = ff.routing_row(fa, rid)
    assert row["reason"] == "prefix_hit"
    text = ff.explain_decision(fa, rid, "cache_aware")
    picked = fa.names[int(row["replica"])]
    assert f"sent it to {picked} {ff.REASON_WORDS['prefix_hit']}" in text and "match rate" in text
    fig = ff.scores_figure(fa, rid)
    go.Figure(fig.to_dict())
    assert fig.layout.meta["scorers"] == ["in_flight", "matched"] and fig.layout.meta["picked"] == picked
    for bar in fig.data:
        colours = list(bar.marker.color)
        assert colours.count(ff.PICKED) == 1 and colours.index(ff.PICKED) == int(row["replica"])
    matched = json.loads(row["scores"])["matched"]
    assert list(fig.data[1].y) == matched
    empty = ff.scores_figure(fb, "chat-0")   # round robin records no scores
    assert not empty.layout.meta["scorers"] and not empty.data
    assert ff.explain_decision(fb, "nope") == "No request nope in this fleet's routing table."


def test_a_replayed_fleet_shows_the_prediction_beside_the_served_replica(chat):
    _, fa, _ = chat
    routes = fa.routes.copy()
    routes["served"] = routes["replica"]
    routes["predicted"] = (routes["replica"] + (np.arange(len(routes)) % 10 == 0)) % 4   # every 10th differs
    routes["predicted_reason"] = routes["reason"]
    f = type(fa)(routes=routes, replicas=fa.replicas, meta=fa.meta)
    t = ff.routing_table(f)
    assert {"served by", "policy picks", "agree", "policy's rule"} <= set(t.columns) and "rule" not in t.columns
    assert t["agree"].sum() == 540
    rid = str(routes["request"].iloc[10])
    assert "(another replica)" in ff.explain_decision(f, rid)


def test_the_placement_counts_each_groups_requests_on_each_side(chat):
    wl, fa, fb = chat
    groups = prefix_groups(wl.requests)
    ta, tb = group_placement(fa, groups), group_placement(fb, groups)
    fig = ff.placement_figure([ta, tb], ["A", "B"], [fa.names, fb.names])
    go.Figure(fig.to_dict())
    za, zb = (np.asarray(t.z) for t in fig.data)
    size = groups.value_counts()
    labels = list(fig.data[0].y)
    assert list(za.sum(axis=1)) == [size[g] for g in labels] == list(zb.sum(axis=1))
    assert labels[0] == size.index[0]   # the largest group first
    m = fig.layout.meta
    assert m["spread"] == [pytest.approx((ta > 0).sum(axis=1).mean()), pytest.approx((tb > 0).sum(axis=1).mean())]
    assert m["spread"][0] < m["spread"][1]


def test_the_numbers_per_fleet_per_replica_and_per_request(chat):
    _, fa, fb = chat
    from sim.fleet import fleet_summary
    sa, sb = fleet_summary(fa), fleet_summary(fb)
    ha, hb = ff.headline(fa, sa), ff.headline(fb, sb)
    pr = ff.fleet_requests(fa)
    assert len(pr) == 600 and sorted(pr["replica"].unique()) == [0, 1, 2, 3]
    assert ha["e2e_p99"] == pytest.approx(np.percentile(pr["e2e"].dropna(), 99))
    assert ha["tpot_p50"] == pytest.approx(np.percentile(pr["itl_mean"].dropna(), 50))
    table = ff.metrics_table(ha, hb).set_index("metric")
    assert table.loc["prefix-cache hit rate (%)", "A"] == pytest.approx(100 * sa["metrics"]["prefix_hit_rate"])
    assert table.loc["TTFT p99", "better"] == ("A" if ha["ttft_p99"] < hb["ttft_p99"] else "B")
    per = ff.per_replica_table(fa, sa)
    assert per["requests"].sum() == 600 and per["busy / busiest %"].max() == pytest.approx(100.0)
    d = ff.request_changes(fa, fb)
    assert len(d) == 600 and np.allclose(d["ttft_change"], d["ttft_B"] - d["ttft_A"])
    assert d["e2e_change"].is_monotonic_increasing


def test_the_fleet_at_one_time_counts_what_the_router_saw(chat):
    _, fa, _ = chat
    t = 9000.0
    at = ff.fleet_at(fa, t)
    r = fa.routes
    live = (r["arrival"] <= t) & ~(r["released"] <= t)
    assert at["in flight (router)"].tolist() == [int((live & (r["replica"] == i)).sum()) for i in range(4)]
    for i, tr in enumerate(fa.replicas):
        step = ff.step_at(tr, t)
        row = tr.steps[tr.steps["step"] == step].iloc[0]
        assert row["start"] <= t and at["running"].iloc[i] == row["running"]
    lo, hi = ff.fleet_span(fa)
    assert lo <= ff.busiest_time(fa) <= hi


def test_a_tiny_fleet_puts_each_request_on_its_replica():
    reqs = [Request(id=f"r{i}", prompt_len=48, max_tokens=6, arrival_time=float(i)) for i in range(3)]
    wl = Workload(reqs, {"num_gpu_blocks": 64, "block_size": 16, "max_num_seqs": 4, "max_num_batched_tokens": 64})
    f = simulate_fleet(wl, FleetSettings(replicas=2, router="round_robin"), cost=cost_from_preset("a100-8B-fp16"))
    fig = ff.lanes_figure(f, bins=200)
    z = [np.asarray(h.z) for h in lane_heatmaps(fig)]
    ids = [set(tr.requests["request"]) for tr in f.replicas]
    assert ids == [{"r0", "r2"}, {"r1"}]   # round robin in arrival order
    assert set(np.unique(z[0])) == {-1, 0, 1} and set(np.unique(z[1])) == {-1, 0}
    assert pd.Series(ff.routing_table(f)["replica"]).tolist() == ["replica 0", "replica 1", "replica 0"]


def test_ids_and_names_reach_plotly_as_written_and_an_empty_replica_is_idle():
    """Plotly renders a pseudo-HTML of its own in hovers, ticks and legends (<a href>, <b>,
    <br>): a request id or a replica name from a file is escaped there. A replica the router
    sent nothing draws idle lanes (its hover text used to index an empty list)."""
    from figures.compare import change_figure
    from sim.fleet.metrics import request_changes
    reqs = [Request(id="<a href='https://evil.example'>x</a>", prompt_len=40, max_tokens=4, arrival_time=0.0)]
    wl = Workload(reqs, {"num_gpu_blocks": 64})
    fleet = simulate_fleet(wl, FleetSettings(replicas=3), cost=cost_from_preset("a100-8B-fp16"))
    fleet.meta["names"] = ["<b>r0</b>", "r1", "r2"]
    fig = ff.lanes_figure(fleet).to_plotly_json()
    heat = [t for t in fig["data"] if t["type"] == "heatmap" and not t["name"].endswith(" kind")]
    cells = [c for row in heat[0]["customdata"] for c in row if c != "idle"]
    assert cells and all(c.startswith("&lt;a href=&#x27;https://evil.example&#x27;&gt;x&lt;/a&gt;") for c in cells)
    assert heat[0]["hovertemplate"].startswith("&lt;b&gt;r0&lt;/b&gt; · slot")
    assert all(c == "idle" for t in heat[1:] for row in t["customdata"] for c in row)   # r1, r2 got nothing
    assert fig["layout"]["meta"]["names"][0] == "<b>r0</b>"   # the data keeps the name as it is
    sig = ff.signals_figure(fleet).to_plotly_json()
    assert {t["name"] for t in sig["data"]} == {"&lt;b&gt;r0&lt;/b&gt;", "r1", "r2"}
    ch = change_figure(request_changes(fleet, fleet), "e2e", "ms").to_plotly_json()
    assert list(ch["data"][0]["x"]) == ["&lt;a href=&#x27;https://evil.example&#x27;&gt;x&lt;/a&gt;"]
