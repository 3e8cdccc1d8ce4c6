"""Figures for the Tenants and fairness page: pure functions from Traces to Plotly figures.

- timelines_figure: per-request Gantt lanes (waiting faint, running solid, one colour per
  tenant) for several runs of the same arrivals side by side, one shared step axis, animated by
  a veil that uncovers the steps (frames carry only the veil shapes).
- gap_figure: the service gap between backlogged tenants as each run goes, against VTC's bound.
- counters_figure: the VTC counters per tenant over steps.

Step axis: step s spans [s-1, s], so a request that ran steps 2..11 is a bar from 1 to 11 and
"finished at 11", as the lesson counts.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.lessons.fairness import request_segments
from sim.trace import Trace

from .animate import assemble
from .common import CONTROLS_MARGIN_B, FONT, MAX_BARS, REQUEST_PALETTE, TEMPLATE, pick_frames, play_controls, themed

SHORT_TITLES = {"fcfs": "FCFS", "round_robin": "Round-robin", "cap": "Round-robin + cap", "vtc": "VTC"}
POLICY_COLOURS = {"fcfs": "#6B7280", "round_robin": "#4E79A7", "cap": "#B07AA1", "vtc": "#2E9E5B"}
MAX_ROW_LABELS = 40  # request names on the y axis up to this many rows
MAX_FINISH_LABELS = 40  # "B0@11" labels at bar ends up to this many focus requests per panel


def tenant_colours(tenants) -> dict[str, str]:
    """A fixed colour per tenant (sorted names: the same colour in every figure)."""
    return {t: REQUEST_PALETTE[i % len(REQUEST_PALETTE)] for i, t in enumerate(sorted(map(str, tenants)))}


def _faint(hex_colour: str, alpha: float = 0.28) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _veil(x: float, x_end: float, axis: int, cursor: bool = True) -> list[dict]:
    """The shapes of one frame on subplot `axis` (1-based): a veil over x > `x` and a cursor
    (drawn with no width when `cursor` is False)."""
    xref = "x" if axis == 1 else f"x{axis}"
    return [
        {"type": "rect", "xref": xref, "yref": "paper", "x0": x, "x1": x_end, "y0": 0, "y1": 1,
         "fillcolor": "rgba(255,255,255,0.85)", "line": {"width": 0}, "layer": "above"},
        {"type": "line", "xref": xref, "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
         "line": {"color": "#111827", "width": 2 if cursor else 0}, "layer": "above"},
    ]


def _row_order(trace: Trace) -> list[str]:
    """Requests grouped by tenant (sorted), in workload order within a tenant."""
    r = trace.requests
    return [rid for _, g in r.groupby("tenant", sort=True) for rid in g["request"].tolist()]


def timelines_figure(runs: dict[str, Trace], focus: str | None = None, titles: dict[str, str] | None = None,
                     max_frames: int = 120, frame_ms: int | None = None, max_bars: int = MAX_BARS) -> go.Figure:
    """One panel per run (same requests, left to right), rows = requests grouped by tenant.

    Traces per panel: for each tenant, its waiting bars then its running bars (go.Bar with
    base = start, x = length, orientation h; go.Scattergl segments when all panels together
    would draw more than `max_bars` bars), then "R@finish" labels for the `focus` tenant.
    Every trace's meta is {"run", "tenant", "state"}. layout.meta: {"runs", "kind": "bar" or
    "scattergl", "frames", "x_end"}.
    """
    titles = titles or SHORT_TITLES
    keys = list(runs)
    first = runs[keys[0]]
    rows = _row_order(first)
    colours = tenant_colours(first.requests["tenant"].unique())
    segs = {k: request_segments(tr) for k, tr in runs.items()}
    n_bars = sum(len(s) for s in segs.values())
    kind = "bar" if n_bars <= max_bars else "scattergl"
    x_last = float(max((s["end"].max() for s in segs.values() if len(s)), default=1))
    x_end = x_last + 1
    labelled = focus is not None and len(rows) <= MAX_ROW_LABELS
    x_max = x_end + (0.2 * x_end if labelled else 0)  # room for the "B0@40" labels
    data: list[dict] = []
    for i, k in enumerate(keys, start=1):
        xa, ya = ("x", "y") if i == 1 else (f"x{i}", f"y{i}")
        s = segs[k]
        for t in sorted(colours):
            for state in ("waiting", "running"):
                g = s[(s["tenant"].to_numpy() == t) & (s["state"].to_numpy() == state)]
                name = f"tenant {t}, {state}"
                colour = colours[t] if state == "running" else _faint(colours[t])
                hover = (g["request"].astype(str) + " (tenant " + t + ") · " + state + " from step "
                         + g["start"].astype(str) + " to " + g["end"].astype(str) + " · "
                         + g["steps"].astype(str) + " steps").to_numpy()
                common = {"name": name, "legendgroup": name, "showlegend": i == 1, "xaxis": xa, "yaxis": ya,
                          "meta": {"run": k, "tenant": t, "state": state}}
                if kind == "bar":
                    data.append({"type": "bar", "orientation": "h", "y": g["request"].to_numpy(),
                                 "base": g["start"].to_numpy(), "x": g["steps"].to_numpy(),
                                 "marker": {"color": colour, "line": {"width": 0.5 if state == "running" else 0,
                                                                      "color": "white"}},
                                 "customdata": hover, "hovertemplate": "%{customdata}<extra></extra>",
                                 "width": 0.72, **common})
                else:
                    n = len(g)
                    xs = np.full(3 * n, np.nan)
                    ys = np.empty(3 * n, dtype=object)
                    xs[0::3], xs[1::3] = g["start"].to_numpy(), g["end"].to_numpy()
                    ys[0::3] = ys[1::3] = g["request"].to_numpy()
                    ys[2::3] = None
                    data.append({"type": "scattergl", "mode": "lines", "x": xs, "y": ys,
                                 "line": {"color": colour, "width": 4 if state == "running" else 3},
                                 "hoverinfo": "skip", **common})
        if focus is not None:
            r = runs[k].requests
            mine = r[(r["tenant"] == focus).to_numpy() & r["finish_step"].notna().to_numpy()]
            if labelled and 0 < len(mine) <= MAX_FINISH_LABELS:
                fin = mine["finish_step"].astype(int).to_numpy()
                data.append({"type": "scatter", "mode": "text", "x": fin + 0.4, "y": mine["request"].to_numpy(),
                             "text": [f"{q}@{f}" for q, f in zip(mine["request"], fin)], "textposition": "middle right",
                             "textfont": {"size": 12, "color": "#111827"}, "hoverinfo": "skip", "showlegend": False,
                             "cliponaxis": False, "xaxis": xa, "yaxis": ya,
                             "meta": {"run": k, "tenant": focus, "state": "finish labels"}})
    n = len(keys)
    gap = 0.03
    width = (1 - gap * (n - 1)) / n
    height = int(min(900, max(300, 130 + 17 * len(rows)))) + 110
    layout: dict = {
        "height": height, "template": TEMPLATE, "font": FONT, "barmode": "overlay", "bargap": 0.2,
        "hoverlabel": {"font": {"size": 12}}, "margin": {"l": 92, "r": 30, "t": 70, "b": CONTROLS_MARGIN_B},
        "legend": {"orientation": "h", "y": 1.06, "yanchor": "bottom", "x": 0, "bgcolor": "rgba(0,0,0,0)"},
        "annotations": [],
        "meta": {"runs": keys, "kind": kind, "x_end": x_end},
    }
    for i, k in enumerate(keys, start=1):
        x0 = (width + gap) * (i - 1)
        xname, yname = ("xaxis", "yaxis") if i == 1 else (f"xaxis{i}", f"yaxis{i}")
        layout[xname] = {"domain": [x0, x0 + width], "range": [0, x_max], "anchor": "y" if i == 1 else f"y{i}",
                         "title": {"text": "step"}, "showgrid": True, "gridcolor": "#EEF0F3", "zeroline": False,
                         **({} if i == 1 else {"matches": "x"})}
        layout[yname] = {"anchor": "x" if i == 1 else f"x{i}", "type": "category", "categoryorder": "array",
                         "categoryarray": rows, "autorange": "reversed", "showgrid": False,
                         "showticklabels": i == 1 and len(rows) <= MAX_ROW_LABELS,
                         **({"title": {"text": "request (grouped by tenant)"}} if i == 1 else {"matches": "y"})}
        layout["annotations"].append({"text": f"<b>{titles.get(k, k)}</b>", "xref": "paper", "yref": "paper",
                                      "x": x0 + width / 2, "y": 1.0, "yanchor": "bottom", "xanchor": "center",
                                      "showarrow": False, "font": {"size": 14}})
    fsteps = pick_frames(np.arange(0, int(x_end)), max_frames)
    # the last frame uncovers everything (the finish labels right of the last step too)
    frames = []
    for j, s in enumerate(fsteps):
        done = j == len(fsteps) - 1
        shapes = [sh for i in range(1, n + 1) for sh in _veil(x_max if done else float(s), x_max, i, not done)]
        frames.append({"name": str(int(s)), "layout": {"shapes": shapes}})
    layout["shapes"] = frames[-1]["layout"]["shapes"] if frames else []
    layout.update(play_controls(fsteps, frame_ms))
    layout["meta"]["frames"] = len(frames)
    return assemble(data, layout, frames)


def gap_figure(series: dict[str, pd.Series], bound: float | None, step: int | None = None,
               titles: dict[str, str] | None = None) -> go.Figure:
    """Per run, the service gap between backlogged tenants reached so far in the current
    backlogged interval (sim.lessons.fairness.service_gap's series), and VTC's bound as a dashed line.
    Trace order: one line per run, then the bound (name starts with "VTC bound")."""
    titles = titles or SHORT_TITLES
    fig = go.Figure()
    top = 0.0
    for k, s in series.items():
        top = max(top, float(s.max()) if len(s) else 0.0)
        fig.add_trace(go.Scatter(x=s.index.to_numpy(), y=s.to_numpy(), mode="lines", name=titles.get(k, k),
                                 line={"color": POLICY_COLOURS.get(k, "#111827"), "width": 2, "shape": "hv"},
                                 hovertemplate=f"{titles.get(k, k)}<br>step %{{x}}: gap %{{y:,.0f}}<extra></extra>"))
    x_max = max((float(s.index.max()) for s in series.values() if len(s)), default=1.0)
    if bound is not None:
        fig.add_trace(go.Scatter(x=[0, x_max], y=[bound, bound], mode="lines", name=f"VTC bound ({bound:,.0f})",
                                 line={"color": "#C0392B", "dash": "dash", "width": 1.5},
                                 hovertemplate=f"bound 2·max(w_in·L_input, w_out·M) = {bound:,.0f}<extra></extra>"))
        top = max(top, bound)
    _cursor(fig, step)
    themed(fig).update_layout(height=330, font=FONT, margin={"l": 68, "r": 20, "t": 90, "b": 59},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
                      hoverlabel={"font_size": 12})
    fig.update_xaxes(title_text="step", showgrid=False, range=[0, x_max + 0.5])
    fig.update_yaxes(title_text="service gap (weighted tokens)", rangemode="tozero", range=[0, top * 1.08 or 1])
    return fig


def counters_figure(trace: Trace, step: int | None = None) -> go.Figure:
    """The VTC counter of each tenant after each step (trace.counters), one line per tenant.
    An empty figure with a note if the run kept no counters."""
    c = trace.counters
    fig = go.Figure()
    colours = tenant_colours(trace.requests["tenant"].unique())
    for t in sorted(colours):
        g = c[c["tenant"].astype(str).to_numpy() == t]
        if g.empty:
            continue
        fig.add_trace(go.Scatter(x=g["step"].to_numpy(), y=g["value"].to_numpy(), mode="lines",
                                 name=f"tenant {t}", line={"color": colours[t], "width": 2.5, "shape": "hv"},
                                 hovertemplate=f"tenant {t}<br>after step %{{x}}: counter %{{y:,.0f}}<extra></extra>"))
    if not len(fig.data):
        fig.add_annotation(text="This run kept no counters (only VTC does).", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
    _cursor(fig, step)
    themed(fig).update_layout(height=330, font=FONT, margin={"l": 68, "r": 20, "t": 51, "b": 59},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
                      hoverlabel={"font_size": 12})
    fig.update_xaxes(title_text="step", showgrid=False)
    fig.update_yaxes(title_text="counter (weighted tokens)", rangemode="tozero")
    return fig


def _cursor(fig: go.Figure, step: int | None) -> None:
    if step is not None:
        fig.add_vline(x=step, line={"color": "#111827", "width": 1.5, "dash": "dot"})
