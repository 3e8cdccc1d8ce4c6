"""The config search's charts (figures/search.py)."""
from __future__ import annotations

import math

from figures.search import frontier_figure, goodput_grid, goodput_heatmap

CONFIGS = [{"a": a, "b": b, "c": c} for a in (1, 2) for b in ("x", "y") for c in (True, False)]


def _row(i):
    return {"goodput": float(i), "throughput": 10.0 + i, "ttft_p99": 100.0 - 3 * i}


def test_the_heatmap_cell_is_the_best_over_the_other_knobs():
    rows = [_row(i) for i in range(len(CONFIGS))]
    rows[7] = {"error": "cannot run"}   # a=2, b=y, c=False
    rows[6] = {"error": "cannot run"}   # a=2, b=y, c=True: that cell has nothing
    xs, ys, z = goodput_grid(rows, CONFIGS, "a", "b")
    assert xs == [1, 2] and ys == ["x", "y"]
    assert z[0, 0] == 1.0 and z[1, 0] == 3.0 and z[0, 1] == 5.0   # the max over c
    assert math.isnan(z[1, 1])
    fig = goodput_heatmap(rows, CONFIGS, "a", "b", "ms")
    assert fig.layout.meta["z"] == [[1.0, 5.0], [3.0, None]]
    assert fig.data[0].text[1][1] == "–"
    one = goodput_heatmap(rows, CONFIGS, "c", None)
    assert one.layout.meta["y"] == ["null"] and one.layout.meta["x"] == ["true", "false"]
    assert one.layout.meta["z"] == [[4.0, 5.0]]


def test_the_frontier_figure_marks_the_frontier_the_best_and_the_target():
    rows = [{"ttft_p99": 10.0, "throughput": 1.0}, {"ttft_p99": 5.0, "throughput": 2.0},
            {"ttft_p99": 20.0, "throughput": 3.0}, {"error": "x"}]
    fig = frontier_figure(rows, [{"k": i} for i in range(4)], "ms", ttft_slo=12.0, best=2)
    meta = fig.layout.meta
    assert meta["configs"] == 3 and meta["frontier"] == [2, 3] and meta["best"] == 3
    names = [t.name for t in fig.data]
    assert names == ["a config", "frontier", "best (most goodput)"]
    assert list(fig.data[1].x) == [5.0, 20.0]
    assert fig.data[2].text[0] == "config 3: k=2"
    assert any(s.x0 == 12.0 and s.x1 == 12.0 for s in fig.layout.shapes)
    plain = frontier_figure(rows, [{"k": i} for i in range(4)])
    assert not plain.layout.shapes and [t.name for t in plain.data] == ["a config", "frontier"]
