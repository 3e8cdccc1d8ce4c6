"""Figure builders of the concept pages: figures.why_batch, figures.batching, figures.interference."""
from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from figures.batching import batching_figure, finish_figure
from figures.interference import budget_figure, timeline_figure
from figures.why_batch import decode_figure
from plotly_util import decode
from sim.cost import UnitsCost
from sim.lessons import lesson, sweeps
from sim.simulate import simulate


def by_name(fig: go.Figure, name: str) -> list:
    return [t for t in fig.data if t.name == name]


def frame_bytes(fig: go.Figure) -> int:
    return max(len(json.dumps(f.to_plotly_json(), default=str)) for f in fig.frames)


# --- Why batch -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def decode_fig():
    return decode_figure(sweeps.decode_sweep(range(1, 49)), sweeps.decode_limits(), start_batch=32)


def test_decode_figure_curves_and_limits(decode_fig):
    fig = decode_fig
    go.Figure(fig.to_dict())  # valid plotly
    step = by_name(fig, "step time")[0]
    assert decode(step.x).tolist() == list(range(1, 49))
    assert decode(step.y)[31] == pytest.approx(21.5245, abs=1e-3)
    assert fig.layout.meta["fit_sequences"] == 36 and fig.layout.meta["kv_over_weights_batch"] == 9
    assert fig.layout.meta["compute_bound_batch"] is None
    tinted = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(tinted) == 4 and all(s.x0 == 36.5 for s in tinted)  # "does not fit" on the four panels
    assert any("KV > weights from batch 9" in a.text for a in fig.layout.annotations)
    per_seq = by_name(fig, "tok/s, per sequence (right axis)")[0]
    assert per_seq.yaxis == "y6" and decode(per_seq.y)[0] == pytest.approx(199.456, abs=1e-3)


def test_decode_figure_frames_move_markers_and_the_memory_bar(decode_fig):
    fig = decode_fig
    assert len(fig.frames) == 48 and fig.frames[0].name == "1"
    assert fig.layout.sliders[0].active == 31 and fig.layout.sliders[0].currentvalue.prefix == "batch "
    animated = list(fig.frames[0].traces)
    assert [fig.data[i].name for i in animated][:5] == ["cursor step", "cursor throughput", "cursor util",
                                                          "cursor bytes", "cursor per_seq"]
    frames = {f["name"]: f for f in fig.to_dict()["frames"]}  # frames are assembled as plain dicts
    f32 = frames["32"]
    assert f32["data"][0]["y"][0] == pytest.approx(21.5245, abs=1e-3)  # the step-time marker
    labels = list(f32["data"][-1]["text"])
    assert labels[-1] == "batch 32: weights 4.52 GB + KV 32 × 0.537 GB = 21.70 GB of 24 GB, 2.30 GB free"
    assert labels[:2] == ["weights 4.52 GB", "KV 17.18 GB"] and labels[2] == ""  # 2.3 GB is too narrow for its label
    over = frames["48"]["data"][-1]["text"]
    assert over[-1].endswith("6.29 GB more than the card has")
    assert frame_bytes(fig) < 2500  # small deltas only


def test_decode_figure_compute_bound_marker():
    fig = decode_figure(sweeps.decode_sweep(range(1, 201), 512), sweeps.decode_limits(512))
    assert fig.layout.meta["compute_bound_batch"] == 147
    assert any("compute bound from batch 147" in a.text for a in fig.layout.annotations)
    assert len(fig.frames) == 200


# --- Static vs continuous ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def batching_runs():
    wl = sweeps.batching_workload(lesson.LESSON_OUTPUT_LENS)
    return simulate(wl, sweeps.batching_config("static", 4)), simulate(wl, sweeps.batching_config("vllm", 4))


def test_batching_figure_lanes_padding_and_returns(batching_runs):
    static, cont = batching_runs
    fig = batching_figure(static, cont)
    heat = [t for t in fig.data if t.type == "heatmap" and t.name == "slot lanes"]
    assert [t.yaxis for t in heat] == ["y", "y2"]
    assert decode(heat[0].z).shape == (4, 35) and decode(heat[1].z).shape == (4, 27)
    assert "padding (faded)" in [t.name for t in fig.data]  # static's finished members shaded
    z_cont = decode(heat[1].z)
    assert (z_cont == -1).sum() == 108 - 75  # continuous: the tail's empty slot-steps
    ret = by_name(fig, "result returned")
    assert sorted(decode(ret[0].x).tolist()) == [20.5] * 4 + [35.5] * 4
    assert sorted(decode(ret[1].x).tolist()) == sorted(f + 0.5 for f in [12, 3, 7, 20, 8, 16, 12, 27])
    r1 = list(ret[0].customdata).index("r1")
    assert "r1: result returned at step 20 · 3 tokens" in ret[0].text[r1]
    assert len(fig.frames) == 35 and all(set(f.to_plotly_json()) <= {"name", "layout"} for f in fig.frames)
    assert fig.layout.yaxis.title.text == "static: slot"


def test_finish_figure():
    fig = finish_figure(["r0", "r1"], [12, 3], [20, 20], [12, 3], 20.0, 7.5)
    assert [list(t.y) for t in fig.data] == [[20, 20], [12, 3]]
    assert {s.y0 for s in fig.layout.shapes} == {20.0, 7.5}


# --- Prefill interference ----------------------------------------------------------------------

def run_case(budget):
    wl, config, horizon = sweeps.interference_case(4, 4000, budget)
    return simulate(wl, config, cost=UnitsCost()), horizon


def test_timeline_figure_example_4():
    trace, horizon = run_case(4004)
    fig = timeline_figure(trace, horizon)
    go.Figure(fig.to_dict())
    assert fig.layout.meta["worst_gap"] == pytest.approx(80.08) and fig.layout.meta["usual_gap"] == pytest.approx(10)
    gaps = by_name(fig, "decoders' wait for a token")[0]
    assert list(gaps.y) == pytest.approx([10, 10, 10, 80.08, 10, 10, 10])
    chunk = by_name(fig, "prompt chunk")[0]
    assert list(chunk.text) == ["chunk 4,000"] and chunk.base[0] == pytest.approx(30)
    assert chunk.customdata[0][:5].tolist() == ["long", "default", "prefill", "4000", "4"]  # request, tenant, kind, tokens, step
    assert fig.layout.meta["lanes"] == ["long prompt", "d0", "d1", "d2", "d3"]
    assert len(fig.frames) == 7 and fig.frames[3].layout.shapes[0].x0 == pytest.approx(110.08)
    assert frame_bytes(fig) < 1500


def test_timeline_figure_chunked():
    trace, horizon = run_case(512)
    fig = timeline_figure(trace, horizon)
    assert len(by_name(fig, "prompt chunk")[0].x) == 8
    assert fig.layout.meta["worst_gap"] == pytest.approx(10.24)
    assert max(by_name(fig, "decoders' wait for a token")[0].y) == pytest.approx(10.24)


def test_budget_figure_marks_sweet_spot_lesson_and_chosen():
    out = sweeps.budget_sweep(4, 4000, UnitsCost(), [24, 256, 504, 512, 2048, 4004])
    fig = budget_figure(out, chosen=2048)
    assert fig.layout.meta["sweet_spot"]["budget"] == 504 and fig.layout.meta["chosen"] == 2048
    lesson_marks = by_name(fig, "the lesson's budgets")
    assert list(lesson_marks[0].text) == ["160.00", "81.68", "80.16", "80.08"]
    assert list(lesson_marks[1].text) == ["10.00", "10.24", "40.96", "80.08"]
    star = by_name(fig, "sweet spot")
    assert star[0].x == (504,) and star[1].y[0] == pytest.approx(10.08)
    assert {s.x0 for s in fig.layout.shapes if s.xref == "x"} == {504, 2048}
    assert fig.layout.yaxis.range[1] < 300  # the 24-token budget's huge first token is cut off, and said so
    assert any("smaller budgets: up to" in a.text for a in fig.layout.annotations)
    pio.to_json(fig)


def test_lane_hover_names_request_tenant_kind_and_tokens(batching_runs):
    hover = batching_figure(*batching_runs).data[0].customdata
    assert hover[1][0] == "r1 · tenant default · prefill 1 tok · computed before 0"
    assert hover[1][5] == "r1 · tenant default · padding 0 tok · computed before 3"
