"""figures.admission: Little's law curves with a cursor and live values in the frames."""
from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio

from figures.admission import lesson_table, littles_figure, live_text
from plotly_util import decode
from sim.lessons.admission import QueueSetup, curves, rejections
from sim.simulate import simulate


def _runs(ticks=3000):
    out = {}
    for label, limit in (("no limit", 0), ("limit 4", 4)):
        tr = simulate(QueueSetup(p=0.5, queue_limit=limit, ticks=ticks).workload())
        out[label] = (curves(tr, ticks), rejections(tr, ticks))
    return out


def test_littles_figure_rows_markers_and_frames():
    runs = _runs()
    fig = littles_figure({k: v[0] for k, v in runs.items()}, {k: v[1] for k, v in runs.items()},
                         {"no limit": 0, "limit 4": 4}, slots=8)
    go.Figure(fig.to_dict())
    spec = json.loads(pio.to_json(fig))
    names = [t["name"] for t in spec["data"]]
    assert "limit 4: rejected (HTTP 503)" in names and "no limit: rejected (HTTP 503)" not in names
    rej = spec["data"][names.index("limit 4: rejected (HTTP 503)")]
    assert len(decode(rej["x"])) == len(runs["limit 4"][1]) > 0
    cap = spec["data"][names.index("limit 4: queue limit + slots (12)")]
    assert cap["y"] == [12, 12]
    assert {t.get("yaxis") for t in spec["data"]} == {"y", "y2", "y3", "y4"}
    assert spec["layout"]["yaxis4"]["type"] == "log"
    # curves are thinned to MAX_POINTS per run
    assert len(decode(spec["data"][1]["x"])) <= 2001
    # frames carry the veil and cursor (two shapes) and the live text of trace 0, nothing else
    frames = spec["frames"]
    assert len(frames) == 200 and all(set(f) == {"name", "data", "traces", "layout"} for f in frames)
    assert frames[0]["traces"] == [0] and set(frames[0]["data"][0]) == {"type", "text"}
    assert set(frames[0]["layout"]) == {"shapes"} and len(frames[0]["layout"]["shapes"]) == 2
    assert spec["data"][0]["mode"] == "text" and spec["data"][0]["text"] == frames[-1]["data"][0]["text"]
    final = spec["layout"]["meta"]["final"]
    assert final["limit 4"]["rejected"] == len(runs["limit 4"][1])
    assert final["no limit"]["rejected"] == 0
    assert "rejected 0 of" in frames[-1]["data"][0]["text"][0]
    assert f"tick {int(frames[7]['name']):,}" in frames[7]["data"][0]["text"][0]
    # the live box shows the tick, so the slider is bare: no step labels, no "step N" readout
    slider = spec["layout"]["sliders"][0]
    assert slider["currentvalue"]["visible"] is False
    assert [s["label"] for s in slider["steps"]] == [""] * 200
    assert [s["args"][0][0] for s in slider["steps"]] == [f["name"] for f in frames]


def test_play_controls_labels_each_step_unless_the_figure_shows_it():
    from figures.common import play_controls

    steps = [1, 5, 9]
    sl = play_controls(steps)["sliders"][0]
    assert [s["label"] for s in sl["steps"]] == ["1", "5", "9"] and sl["currentvalue"]["visible"] is True
    assert sl["active"] == 2 and [s["args"][0] for s in sl["steps"]] == [["1"], ["5"], ["9"]]
    bare = play_controls(steps, labelled=False)["sliders"][0]
    assert [s["label"] for s in bare["steps"]] == ["", "", ""] and bare["currentvalue"]["visible"] is False
    assert [s["args"] for s in bare["steps"]] == [s["args"] for s in sl["steps"]]   # the same frames


def test_live_text_reads_the_curves_at_a_tick():
    c = _runs(600)["limit 4"][0]
    row = c[c["step"] == 300].iloc[0]
    text = live_text({"limit 4": c}, 300)
    assert text.startswith("<b>tick 300</b>")
    assert f"L {row['L']:,.2f}" in text and f"rejected {int(row['rejected']):,} of {int(row['arrived']):,}" in text


def test_lesson_table_prints_none_for_no_limit():
    t = lesson_table([{"p": 0.2, "limit": None, "L": 1, "lambda": 1, "W": 1, "lambda_W": 1, "rejected": 0,
                       "arrived": 1}, {"p": 0.44, "limit": 16, "L": 1, "lambda": 1, "W": 1, "lambda_W": 1,
                                       "rejected": 2, "arrived": 3}])
    assert t["limit"].tolist() == ["none", "16"]
