"""The config search's charts (the Choosing settings page): the throughput / p99 TTFT frontier and
a heatmap of goodput over two knobs. Pure Plotly over the search's rows (sim/search.py).

`rows[i]` is config i's metrics (run_local's output); `configs[i]` its knob values. Both charts
are small: at most sim.search.MAX_CONFIGS points, a heatmap cell per pair of knob values.
"""
from __future__ import annotations

import json
import math

import numpy as np
import plotly.graph_objects as go

from sim.search import describe, frontier

from .common import FONT, tick_room, themed

POINT, FRONT, BEST, SLO_LINE, FAILED = "#9CA3AF", "#4E79A7", "#E15759", "#B07AA1", "#C8CCD2"


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def frontier_figure(rows: list[dict], configs: list[dict], unit: str = "", ttft_slo: float | None = None,
                    best: int | None = None, numbers: list[int] | None = None) -> go.Figure:
    """Every config as a point: x = p99 TTFT, y = throughput (output tokens per time unit); the
    frontier (no other config is both faster to first token and higher in throughput) joined by a
    line, the best config starred, the TTFT target as a vertical line. `numbers`: each row's config
    number (1-based; default 1, 2, ...). layout.meta: {"configs", "frontier" (config numbers),
    "best", "ttft_slo"}."""
    numbers = list(range(1, len(rows) + 1)) if numbers is None else list(numbers)
    x = np.array([_num(r.get("ttft_p99")) for r in rows], dtype=float)
    y = np.array([_num(r.get("throughput")) for r in rows], dtype=float)
    ok = ~np.isnan(x) & ~np.isnan(y)
    labels = [f"config {n}: {describe(c)}" for n, c in zip(numbers, configs)]
    u = f" {unit}" if unit else ""
    hover = "%{text}<br>p99 TTFT %{x:.4~g}" + u + "<br>throughput %{y:.4~g} tokens/" + (unit or "unit") + "<extra></extra>"
    front = frontier(rows)
    fig = go.Figure()
    idx = np.flatnonzero(ok)
    fig.add_trace(go.Scatter(x=x[idx], y=y[idx], mode="markers", name="a config", text=[labels[i] for i in idx],
                             marker={"color": POINT, "size": 9}, hovertemplate=hover))
    fig.add_trace(go.Scatter(x=x[front], y=y[front], mode="lines+markers", name="frontier",
                             text=[labels[i] for i in front], line={"color": FRONT, "width": 2},
                             marker={"color": FRONT, "size": 10}, hovertemplate=hover))
    if best is not None and ok[best]:
        fig.add_trace(go.Scatter(x=[x[best]], y=[y[best]], mode="markers", name="best (most goodput)",
                                 text=[labels[best]], marker={"color": BEST, "size": 18, "symbol": "star"},
                                 hovertemplate=hover))
    if ttft_slo:
        fig.add_vline(x=ttft_slo, line_color=SLO_LINE, line_dash="dash", line_width=2,
                      annotation_text=f"TTFT target {ttft_slo:,.4g}{u}", annotation_position="top right",
                      annotation_font_color=SLO_LINE)
    top = float(np.nanmax(y)) if ok.any() else 0.0
    themed(fig).update_layout(
        height=380, font=FONT, legend={"orientation": "h", "y": -0.22, "x": 0},
        margin={"l": 71 + tick_room(top, 4), "r": 24, "t": 34, "b": 96},
        xaxis={"title": {"text": f"p99 time to first token{u}"}, "rangemode": "tozero"},
        yaxis={"title": {"text": f"throughput, tokens / {unit or 'unit'}"}, "rangemode": "tozero"},
        meta={"configs": int(ok.sum()), "frontier": [numbers[i] for i in front],
              "best": None if best is None else numbers[best], "ttft_slo": ttft_slo})
    return fig


def _key(v) -> str:
    return json.dumps(v)


def goodput_grid(rows: list[dict], configs: list[dict], kx: str, ky: str | None,
                 metric: str = "goodput") -> tuple[list, list, np.ndarray]:
    """(x values, y values, z[y, x]): per pair of the two knobs' values, the best `metric` over the
    other knobs' values (NaN where no config with that pair ran). ky None: one row."""
    xs, ys = [], []
    for c in configs:
        if _key(c.get(kx)) not in map(_key, xs):
            xs.append(c.get(kx))
        yv = c.get(ky) if ky else None
        if _key(yv) not in map(_key, ys):
            ys.append(yv)
    xi = {_key(v): i for i, v in enumerate(xs)}
    yi = {_key(v): i for i, v in enumerate(ys)}
    z = np.full((len(ys), len(xs)), np.nan)
    for c, r in zip(configs, rows):
        v = _num(r.get(metric))
        if math.isnan(v):
            continue
        j, i = yi[_key(c.get(ky) if ky else None)], xi[_key(c.get(kx))]
        z[j, i] = v if math.isnan(z[j, i]) else max(z[j, i], v)
    return xs, ys, z


def goodput_heatmap(rows: list[dict], configs: list[dict], kx: str, ky: str | None, unit: str = "",
                    metric: str = "goodput") -> go.Figure:
    """Goodput (requests per time unit that met every target) over two knobs' values; where other
    knobs were swept too, each cell is the best of them. layout.meta: {"x", "y", "z" (rows of
    numbers, None where nothing ran), "metric"}."""
    xs, ys, z = goodput_grid(rows, configs, kx, ky, metric)
    text = [["–" if math.isnan(v) else f"{v:.3g}" for v in row] for row in z]
    what = "goodput, requests" if metric == "goodput" else "throughput, tokens"
    fig = go.Figure(go.Heatmap(
        x=[str(v) for v in xs], y=[str(v) for v in ys] if ky else [""], z=z, text=text, texttemplate="%{text}",
        colorscale="Viridis", colorbar={"title": {"text": f"{what} / {unit or 'unit'}", "side": "right"}, "thickness": 18},
        hovertemplate=f"{kx} %{{x}}" + (f"<br>{ky} %{{y}}" if ky else "") + f"<br>{metric} %{{z:.4~g}}<extra></extra>"))
    themed(fig).update_layout(
        height=120 + 48 * max(len(ys), 2), font=FONT, margin={"l": 110, "r": 150, "t": 20, "b": 64},
        xaxis={"title": {"text": kx}, "type": "category"},
        yaxis={"title": {"text": ky or ""}, "type": "category"},
        meta={"x": [_key(v) for v in xs], "y": [_key(v) for v in ys],
              "z": [[None if math.isnan(v) else float(v) for v in row] for row in z], "metric": metric})
    return fig
