"""Figure builders (figures/playback.py): assert on the figure data, as the browser receives it."""
from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from figures import playback as fp
from figures.common import MAX_DISCRETE_REQUESTS, REQUEST_PALETTE, colour_codes
from plotly_util import decode
from sim import scenarios
from sim.simulate import simulate


@pytest.fixture(scope="module")
def lesson():
    return simulate(scenarios.workload("lesson_abc"))


@pytest.fixture(scope="module")
def big():
    return simulate(scenarios.workload("random_500"))


def as_json(fig: go.Figure) -> dict:
    return json.loads(fig.to_json())


def trace_named(spec: dict, name: str) -> dict:
    return next(t for t in spec["data"] if t.get("name") == name)


# -- slot lanes ------------------------------------------------------------------------------

def test_occupancy_cells_hold_the_scheduled_request(lesson):
    spec = as_json(fp.occupancy_figure(lesson))
    heat = spec["data"][0]
    assert heat["type"] == "heatmap"
    z = decode(heat["z"])
    assert z.dtype == np.int8 and z.shape == (3, 7)  # 3 slots x 7 steps, small integer codes
    x = list(decode(heat["x"]))
    idx = fp.request_index(lesson)
    for _, e in lesson.batch.iterrows():
        assert z[int(e["slot"]), x.index(int(e["step"]))] == idx[e["request"]]
    # lesson: A alone in step 1, C runs from step 3, slot 2 is idle at step 5 (C was preempted)
    assert list(z[:, 0]) == [idx["A"], -1, -1]
    assert z[2, x.index(3)] == idx["C"]
    assert z[2, x.index(5)] == -1
    assert (z == -1).sum() == 7 * 3 - len(lesson.batch)


def test_occupancy_tells_kinds_apart_and_marks_the_preemption(lesson):
    spec = as_json(fp.occupancy_figure(lesson))
    shade = decode(trace_named(spec, "kind shading")["z"])
    x = list(decode(spec["data"][0]["x"]))
    code = fp.KIND_CODE
    assert shade[0, x.index(1)] == code["prefill"]  # A's first chunk
    assert shade[0, x.index(3)] == code["decode"]
    c6 = lesson.batch[(lesson.batch["step"] == 6) & (lesson.batch["request"] == "C")].iloc[0]
    assert c6["kind"] == "recompute"
    assert shade[int(c6["slot"]), x.index(6)] == code["recompute"]
    pre = trace_named(spec, "preempted here")
    assert list(decode(pre["x"])) == [5] and list(decode(pre["y"])) == [2]  # C, from slot 2, at step 5
    names = {t.get("name") for t in spec["data"]}
    assert {"prefill (lighter)", "decode (full colour)", "recompute (darker)"} <= names


def test_occupancy_frames_move_a_curtain_not_the_grid(lesson):
    fig = fp.occupancy_figure(lesson)
    spec = as_json(fig)
    assert [f["name"] for f in spec["frames"]] == [str(s) for s in range(1, 8)]
    for f in spec["frames"]:
        assert "data" not in f and set(f["layout"]) == {"shapes"}
    assert spec["frames"][2]["layout"]["shapes"][0]["x0"] == 3.5  # veil starts right after step 3
    slider = spec["layout"]["sliders"][0]
    assert slider["currentvalue"]["prefix"] == "step "
    assert [s["label"] for s in slider["steps"]] == [str(s) for s in range(1, 8)]
    buttons = [b["label"] for b in spec["layout"]["updatemenus"][0]["buttons"]]
    assert any("Play" in b for b in buttons) and any("Pause" in b for b in buttons)
    go.Figure(fig.to_dict())  # assembled without validation: it must still be a valid figure


def test_big_run_stays_small(big):
    fig = fp.occupancy_figure(big, max_frames=200)
    spec = as_json(fig)
    assert len(spec["frames"]) == 200  # capped (982 steps)
    frames_bytes = len(json.dumps(spec["frames"]))
    assert frames_bytes < 100_000  # ~300 bytes a frame: shapes only
    assert len(fig.to_json()) < 3_000_000
    z = decode(spec["data"][0]["z"])
    assert z.dtype == np.int16 and z.shape == (32, 982)
    go.Figure(fig.to_dict())


def test_lane_grid_strides_long_runs(big):
    steps, grid, _, _, stride = fp.lane_grid(big, max_columns=100)
    assert stride == 10 and grid.shape[1] == len(steps) <= 100
    assert steps[1] - steps[0] == 10


def test_colour_codes_fall_back_to_palette_for_huge_runs():
    idx = np.array([[-1, 0, MAX_DISCRETE_REQUESTS + 5]])
    z, scale, zmin, zmax = colour_codes(idx, MAX_DISCRETE_REQUESTS + 10, ["#eeeeee"])
    assert z.dtype == np.int8 and list(z[0]) == [-1, 0, (MAX_DISCRETE_REQUESTS + 5) % len(REQUEST_PALETTE)]
    assert len(scale) == 2 * (len(REQUEST_PALETTE) + 1)


# -- tokens per step ---------------------------------------------------------------------------

def test_step_tokens_stack_to_the_step_total(lesson):
    spec = as_json(fp.step_tokens_figure(lesson))
    bars = [t for t in spec["data"] if t["type"] == "bar"]
    assert {b["name"] for b in bars} == {"prefill tokens", "decode tokens", "recompute tokens"}
    total = sum(decode(b["y"]) for b in bars)
    assert list(total) == lesson.steps["num_tokens"].tolist() == [8, 8, 7, 3, 2, 8, 1]
    budget = trace_named(spec, "token budget (8)")
    assert list(decode(budget["y"])) == [8, 8]
    pre = trace_named(spec, "preemption")
    assert list(decode(pre["x"])) == [5]
    assert spec["layout"]["barmode"] == "stack"


def test_step_tokens_aggregates_past_the_bar_limit(big):
    spec = as_json(fp.step_tokens_figure(big, max_bars=100))
    bars = [t for t in spec["data"] if t["type"] == "bar"]
    assert all(len(decode(b["y"])) <= 100 for b in bars)
    mean_total = sum(np.nan_to_num(decode(b["y"])) for b in bars)
    assert abs(mean_total.mean() - big.steps["num_tokens"].mean()) < 0.05 * big.steps["num_tokens"].mean()
    assert "bins of 10 steps" in spec["layout"]["xaxis"]["title"]["text"]


# -- KV block map --------------------------------------------------------------------------------

def test_kv_map_at_lesson_step_3_is_full(lesson):
    fig = fp.kv_map_figure(lesson, 3)
    assert fig.layout.meta["free"] == 0 and fig.layout.meta["used"] == 7
    z = decode(as_json(fig)["data"][0]["z"])
    idx = fp.request_index(lesson)
    assert z.shape == (1, 8)  # 8 blocks in one row
    assert list(z[0]) == [-3] + [idx["A"]] * 3 + [idx["B"]] * 2 + [idx["C"]] * 2
    hover = as_json(fig)["data"][0]["customdata"][0]
    assert hover[0].startswith("block 0") and "null" in hover[0]
    assert hover[4] == "block 4 · held by B"


def test_kv_map_at_the_end_is_all_free(lesson):
    fig = fp.kv_map_figure(lesson, 7)
    z = decode(as_json(fig)["data"][0]["z"])
    assert list(z[0]) == [-3] + [-1] * 7
    assert fig.layout.meta["free"] == 7


def test_kv_map_shows_cached_free_and_shared_blocks():
    tr = simulate(scenarios.workload("prefix_sharing"))
    seen_cached = seen_shared = False
    for step in tr.steps["step"]:
        fig = fp.kv_map_figure(tr, int(step))
        z = decode(as_json(fig)["data"][0]["z"])
        seen_cached |= bool((z == -2).any())
        seen_shared |= any(t.name == "shared (2+ holders)" for t in fig.data)
    assert seen_cached and seen_shared


@pytest.mark.parametrize("blocks", [100, 2000, 20000])
def test_kv_map_row_labels_stand_apart_and_name_each_row_s_first_block(blocks):
    """A big pool's rows are a few px each: only every k-th row is labelled (~18 px apart, not one
    on top of another), each with the id of the block its row starts with."""
    wl = scenarios.workload("prefix_sharing")
    tr = simulate(type(wl)(wl.requests, {**wl.config, "num_gpu_blocks": blocks}))
    fig = fp.kv_map_figure(tr, 1)
    rows, cols = decode(as_json(fig)["data"][0]["z"]).shape
    y = fig.layout.yaxis
    vals, text = list(y.tickvals), list(y.ticktext)
    assert len(vals) > 1 and vals[0] == 0 and text == [str(v * cols) for v in vals]
    every = vals[1] - vals[0]
    assert set(np.diff(vals)) == {every} and rows - 1 - vals[-1] < every   # evenly, down to the last rows
    assert every * (fig.layout.height - 150) / rows >= 18


# -- step inspector --------------------------------------------------------------------------------

def test_inspector_tables(lesson):
    batch, events = fp.inspector_tables(lesson, 6)
    assert batch[["request", "kind", "tokens"]].values.tolist() == [["B", "decode", 1], ["C", "recompute", 7]]
    assert list(batch.columns) == ["request", "tenant", "slot", "kind", "tokens", "computed before", "sampled"]
    _, events5 = fp.inspector_tables(lesson, 5)
    assert ["C", "preempt"] in events5[["request", "event"]].values.tolist()


def test_themed_gives_the_json_of_a_validated_template_and_leaves_the_template_alone():
    from figures.animate import from_spec
    from figures.common import TEMPLATE, themed

    before = TEMPLATE.to_plotly_json()
    checked = go.Figure(go.Bar(x=[1, 2], y=[3, 4]))
    checked.update_layout(template=TEMPLATE, height=300, font={"size": 13})
    fast = themed(go.Figure(go.Bar(x=[1, 2], y=[3, 4]))).update_layout(height=300, font={"size": 13})
    assert json.loads(fast.to_json()) == json.loads(checked.to_json())
    assert json.loads(fast.to_json())["layout"]["template"]["layout"]["plot_bgcolor"] == "white"
    fast.layout.template.layout.font.size = 99  # the figure's copy, not the shared template
    assert TEMPLATE.to_plotly_json() == before
    # a cached figure dict comes back as the same figure, frames included
    anim = go.Figure(go.Scatter(x=[1], y=[1]), frames=[go.Frame(name="0", layout={"title": {"text": "t"}})])
    again = from_spec(anim.to_plotly_json())
    assert json.loads(again.to_json()) == json.loads(anim.to_json())


def test_rejected_arrivals_are_marked_on_lanes_and_tokens():
    from figures.compare import lockstep_figure
    from figures.playback import rejected_per_step, step_tokens_figure
    from sim.workload import generate
    wl = generate(30, seed=3, arrival="poisson", rate=0.9,
                  config={"max_num_seqs": 3, "max_queued_requests": 2, "num_gpu_blocks": 400})
    tr = simulate(wl)
    ev = tr.events[tr.events["kind"] == "reject"]
    assert len(ev) > 0
    rej = rejected_per_step(tr)
    assert rej["count"].sum() == len(ev) and rej["step"].tolist() == sorted(ev["step"].unique())
    lanes = next(t for t in fp.occupancy_figure(tr).data if t.name == "rejected (queue full or SLO admission)")
    assert list(lanes.x) == rej["step"].tolist() and all(y < -0.5 for y in lanes.y)  # above slot 0
    assert [int(c) for c in lanes.customdata[:, 0]] == rej["count"].tolist()
    tok = step_tokens_figure(tr)
    marks = next(t for t in tok.data if t.name == "rejected (queue full or SLO admission)")
    waiting = dict(zip(tr.steps["step"], tr.steps["waiting"]))
    assert marks.yaxis == "y2" and list(marks.y) == [waiting[s] for s in rej["step"]]
    binned = next(t for t in step_tokens_figure(tr, max_bars=10).data if t.name == "rejected (queue full or SLO admission)")
    assert sum(int(c) for c in binned.customdata[:, 0]) == len(ev)
    no_limit = simulate(wl, {"max_queued_requests": 0})
    both = lockstep_figure(tr, no_limit)
    assert [t.yaxis for t in both.data if t.name == "rejected (queue full or SLO admission)"] == ["y"]   # only A turned any away
