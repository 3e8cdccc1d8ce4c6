"""Figures for the Live engine page: pure functions from a Trace (a live one from
sim.live.LiveRun, or the engine's finished run) and sim.calibrate's comparison to Plotly figures.

- live_figure: one figure, one step axis, three rows: slot lanes (figures.playback's lane
  traces), the measured step time split by phase, and queue lengths with tokens/s.
- phase_figure: a whole run's step times split by phase (binned past MAX_BARS steps).
- calibration_figure: predicted vs measured, two scatters: each step's time under the fitted
  cost model, and each request's TTFT in the simulator's replay.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sim.live import PHASES, throughput
from sim.trace import Trace

from .common import FONT, MAX_BARS, PREEMPT, REQUEST_PALETTE, TEMPLATE, themed, tick_room
from .playback import lane_traces

PHASE_LABELS = {"t_schedule": "schedule", "t_swap": "swap", "t_prepare": "prepare", "t_forward": "forward",
                "t_sample": "sample", "t_update": "update", "t_model": "model"}
PHASE_COLOURS = {"t_schedule": "#F28E2B", "t_swap": "#B07AA1", "t_prepare": "#EDC948", "t_forward": "#4E79A7",
                 "t_sample": "#59A14F", "t_update": "#9CA3AF", "t_model": "#4E79A7"}
RUNNING, WAITING, RATE = "#2563EB", "#9333EA", "#059669"
LEGEND = {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0, "bgcolor": "rgba(0,0,0,0)",
          "font": {"size": 12}, "traceorder": "normal"}


def _phase_bars(trace: Trace, max_bars: int = MAX_BARS) -> tuple[list[dict], np.ndarray, np.ndarray, int]:
    """Stacked bars of the phase times (ms) per step, as trace dicts: (bars, x, total per bar,
    bin size k). Past max_bars steps, each bar is the mean over k steps. Phases never measured
    (or too thin to see: swap and update under 0.05 ms) are left out. The phases are the
    trace's own (meta["phases"]: a vLLM recording has schedule / model / update), else the engine's."""
    s = trace.steps
    steps = s["step"].to_numpy(dtype=float)
    phases = trace.meta.get("phases") or PHASES
    cols = {p: s[p].to_numpy(dtype=float) if p in s.columns else np.full(len(s), np.nan) for p in phases}
    k = max(1, math.ceil(len(steps) / max_bars)) if len(steps) else 1
    x = steps
    if k > 1:
        nb = math.ceil(len(steps) / k)
        pad = nb * k - len(steps)

        def binned(a, how):
            return how(np.concatenate([a, np.full(pad, np.nan)]).reshape(nb, k), axis=1)
        x = binned(steps, np.nanmin)
        cols = {p: binned(v, np.nanmean) for p, v in cols.items()}
    total = np.nansum(np.vstack(list(cols.values())), axis=0) if len(x) else np.zeros(0)
    bars = []
    for p, v in cols.items():
        if not np.isfinite(v).any() or (p in ("t_swap", "t_update") and np.nanmax(v, initial=0) < 0.05):
            continue
        bar = {"type": "bar", "x": x, "y": np.nan_to_num(v), "name": PHASE_LABELS[p],
               "marker": {"color": PHASE_COLOURS[p], "line": {"width": 0}},
               "hovertemplate": f"step %{{x}}<br>{PHASE_LABELS[p]}: %{{y:.3~g}} ms<extra></extra>"}
        if k > 1:
            bar.update(width=k, offset=0)
        bars.append(bar)
    return bars, x, total, k


def _preempt_marks(trace: Trace, y_at: pd.Series, showlegend: bool = True) -> dict | None:
    """Red × over the steps that preempted, at height y_at[step] (a trace dict)."""
    s = trace.steps
    hit = s["preempted"].to_numpy() > 0
    if not hit.any():
        return None
    st = s["step"].to_numpy()[hit]
    return {"type": "scatter", "x": st, "y": y_at.reindex(st).to_numpy(dtype=float), "mode": "markers",
            "name": "preemption", "showlegend": showlegend,
            "marker": {"symbol": "x", "size": 11, "color": PREEMPT, "line": {"width": 1, "color": "white"}},
            "customdata": s["preempted"].to_numpy()[hit],
            "hovertemplate": "step %{x}: %{customdata} preempted<extra></extra>"}


def _domains(heights: list[int], gap: float) -> list[tuple[float, float]]:
    """Paper-y domains of stacked rows, top first, in proportion to `heights`, `gap` apart."""
    free = 1.0 - gap * (len(heights) - 1)
    out, top = [], 1.0
    for h in heights:
        lo = top - free * h / sum(heights)
        out.append((max(lo, 0.0), top))
        top = lo - gap
    return out


def live_figure(trace: Trace, height: int | None = None) -> go.Figure:
    """Slot lanes, step time by phase and queues over the same steps (one shared x axis).

    Rows: 1 lanes (heatmap first trace, z = request index, -1 idle; red × = preempted there),
    2 step time stacked by phase (ms; × = a step that preempted), 3 running and waiting
    requests (left axis, y3) and tokens/s over the last second (right axis, y4). Each row has
    its own legend (legend, legend2, legend3) on the right of its title.
    layout.meta: {"steps": [first, last], "slots", "bin"}.

    Rebuilt every half second while the engine runs, so it is assembled from plain dicts
    without plotly's validation (5-10x cheaper than make_subplots + update_*); tests validate.
    """
    lanes, info = lane_traces(trace)
    n_slots = info["slots"]
    lane_h = int(min(300, max(120, 26 * n_slots + 40)))
    height = height or lane_h + 480
    data = []
    for t in lanes:
        t = dict(t, xaxis="x", yaxis="y", legend="legend")
        if t.get("type") == "heatmap":  # labels unreadable at live widths; hover says it all
            for k in ("text", "texttemplate", "textfont"):
                t.pop(k, None)
        if t.get("name") == "preempted here":
            t["name"] = "preemption"
        data.append(t)
    bars, x, total, k = _phase_bars(trace)
    data += [dict(b, xaxis="x2", yaxis="y2", legend="legend2") for b in bars]
    s = trace.steps
    if k == 1:
        mark = _preempt_marks(trace, pd.Series(total, index=x.astype(np.int64)), showlegend=False)
        if mark is not None:
            data.append(dict(mark, xaxis="x2", yaxis="y2", legend="legend2"))
    steps = s["step"].to_numpy()
    row3 = {"xaxis": "x3", "yaxis": "y3", "legend": "legend3", "mode": "lines", "type": "scatter"}
    tp = throughput(trace)
    data += [
        dict(row3, x=steps, y=s["running"].to_numpy(), name="running",
             line={"color": RUNNING, "width": 2, "shape": "hv"},
             hovertemplate="step %{x}: %{y} running<extra></extra>"),
        dict(row3, x=steps, y=s["waiting"].to_numpy(), name="waiting", fill="tozeroy",
             fillcolor="rgba(147,51,234,0.10)", line={"color": WAITING, "width": 2, "shape": "hv"},
             hovertemplate="step %{x}: %{y} waiting<extra></extra>"),
        dict(row3, yaxis="y4", x=tp["step"].to_numpy(), y=tp["tokens_per_s"].to_numpy(),
             name="tokens/s (last second)", line={"color": RATE, "width": 2, "dash": "dot"},
             hovertemplate="step %{x}: %{y:.4~g} tokens/s<extra></extra>"),
    ]
    lo = float(steps[0]) - 0.5 if len(steps) else 0.5
    hi = float(steps[-1]) + 0.5 if len(steps) else 1.5
    doms = _domains([lane_h, 240, 190], 0.075)
    titles = ("Slot lanes (colour = request)", "Measured step time by phase (ms)", "Queues and throughput")
    x_common = {"range": [lo, hi], "showgrid": False, "zeroline": False}
    layout = {
        "height": height, "template": TEMPLATE, "font": FONT, "barmode": "stack", "bargap": 0.1,
        "margin": {"l": 60, "r": 60, "t": 40, "b": 40}, "hoverlabel": {"font": {"size": 12}}, "uirevision": "live",
        "xaxis": {**x_common, "anchor": "y", "matches": "x3", "showticklabels": False},
        "xaxis2": {**x_common, "anchor": "y2", "matches": "x3", "showticklabels": False},
        "xaxis3": {**x_common, "anchor": "y3", "title": {"text": "step"}},
        "yaxis": {"domain": doms[0], "anchor": "x", "title": {"text": "slot"}, "autorange": "reversed",
                  "showgrid": False, "zeroline": False,
                  **({"tickmode": "array", "tickvals": list(range(n_slots))} if n_slots <= 16 else {})},
        "yaxis2": {"domain": doms[1], "anchor": "x2", "title": {"text": "ms"}, "rangemode": "tozero"},
        "yaxis3": {"domain": doms[2], "anchor": "x3", "title": {"text": "requests"}, "rangemode": "tozero"},
        "yaxis4": {"anchor": "x3", "overlaying": "y3", "side": "right",
                   "title": {"text": "tokens/s", "font": {"color": RATE}}, "tickfont": {"color": RATE},
                   "rangemode": "tozero", "showgrid": False, "tickmode": "auto"},   # round ticks, not "sync"
        "annotations": [{"text": t, "x": 0, "xref": "paper", "xanchor": "left", "y": d[1], "yref": "paper",
                         "yanchor": "bottom", "showarrow": False, "font": {"size": 13, "color": "#374151"}}
                        for t, d in zip(titles, doms)],
        "meta": {"steps": [int(steps[0]), int(steps[-1])] if len(steps) else [], "slots": n_slots, "bin": k},
    }
    for name, d in zip(("legend", "legend2", "legend3"), doms):
        layout[name] = {"orientation": "h", "x": 1, "xanchor": "right", "y": d[1], "yanchor": "bottom",
                        "bgcolor": "rgba(0,0,0,0)", "font": {"size": 12}, "traceorder": "normal"}
    return go.Figure(data=data, layout=layout, _validate=False)


def phase_figure(trace: Trace, max_bars: int = MAX_BARS) -> go.Figure:
    """A whole run's measured step times, stacked by phase, with the tokens in each step on a
    second axis (what the time was spent on). layout.meta: {"bin": k, "phases": [...]}."""
    bars, x, total, k = _phase_bars(trace, max_bars)
    fig = go.Figure(data=bars)
    s = trace.steps
    if k == 1:
        mark = _preempt_marks(trace, pd.Series(total, index=x.astype(np.int64)))
        if mark is not None:
            fig.add_trace(mark)
        fig.add_trace(go.Scatter(x=s["step"], y=s["num_tokens"], name="tokens in the step", yaxis="y2",
                                 mode="lines", line={"color": "#6B7280", "width": 1.2, "shape": "hv"},
                                 hovertemplate="step %{x}: %{y} tokens<extra></extra>"))
    tokens = float(s["num_tokens"].max()) if k == 1 and len(s) else 0.0
    themed(fig).update_layout(height=320, font=FONT, barmode="stack", bargap=0 if len(x) > 200 else 0.1,
                      margin={"l": 60 + tick_room(1.15 * float(np.nanmax(total, initial=0))),
                              "r": 60 + tick_room(1.15 * tokens), "t": 44, "b": 58}, legend=LEGEND,
                      xaxis={"title": {"text": "step" + (f" (bins of {k}; bars show the mean)" if k > 1 else "")},
                             "showgrid": False},
                      yaxis={"title": {"text": "step time (ms)"}, "rangemode": "tozero"},
                      # "auto": an overlaying axis defaults to "sync" ticks, the left axis' grid in
                      # this axis' units (0, 24.2, 48.4, ...)
                      yaxis2={"title": {"text": "tokens"}, "overlaying": "y", "side": "right", "showgrid": False,
                              "rangemode": "tozero", "tickmode": "auto"},
                      meta={"bin": k, "phases": [b["name"] for b in bars]})
    return fig


def _diagonal(lo: float, hi: float, row: int, col: int, fig: go.Figure, show: bool) -> None:
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="prediction = measurement",
                             line={"color": "#6B7280", "dash": "dash", "width": 1}, hoverinfo="skip",
                             showlegend=show, legendgroup="diag"), row=row, col=col)


def calibration_figure(steps: pd.DataFrame, ttft: pd.DataFrame) -> go.Figure:
    """Left: each measured step (x) against the fitted cost model's time for the same batch (y),
    decode-only steps apart from steps with prompt work, and hollow the steps the robust fit left
    out. Right: each request's measured TTFT (x)
    against the simulator's (y), coloured by tenant. Points on the dashed diagonal are exact.

    steps: sim.calibrate SimComparison.steps (step, num_tokens, num_seqs, measured, predicted, in_fit);
    ttft: SimComparison.ttft (request, tenant, measured, simulated).
    """
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("Step time: cost model vs measured (ms)",
                                        "Time to first token: simulator vs measured (ms)"))
    decode_only = steps["num_tokens"].to_numpy() == steps["num_seqs"].to_numpy()
    used = steps["in_fit"].to_numpy(dtype=bool) if "in_fit" in steps.columns else np.ones(len(steps), dtype=bool)
    for mask, name, marker in (
            (decode_only & used, "decode-only step", {"color": "#59A14F"}),
            (~decode_only & used, "step with prompt work", {"color": "#4E79A7"}),
            (~used, "left out of the fit (slowed by something else)",
             {"color": "rgba(0,0,0,0)", "line": {"width": 1.5, "color": "#9CA3AF"}})):
        d = steps[mask]
        if d.empty:
            continue
        fig.add_trace(go.Scatter(x=d["measured"], y=d["predicted"], mode="markers", name=name,
                                 marker={"size": 7, "opacity": 0.8, "line": {"width": 0}, **marker},
                                 customdata=np.stack([d["step"], d["num_tokens"]], axis=-1),
                                 hovertemplate="step %{customdata[0]} · %{customdata[1]} tokens<br>measured "
                                               "%{x:.3~g} ms · model %{y:.3~g} ms<extra></extra>"), row=1, col=1)
    both = np.concatenate([steps["measured"].to_numpy(dtype=float), steps["predicted"].to_numpy(dtype=float)])
    if len(both):
        _diagonal(0.0, float(np.nanmax(both)) * 1.05, 1, 1, fig, True)
    t = ttft.dropna(subset=["measured", "simulated"])
    for i, (tenant, d) in enumerate(t.groupby("tenant", sort=True)):
        multi = t["tenant"].nunique() > 1
        fig.add_trace(go.Scatter(x=d["measured"], y=d["simulated"], mode="markers",
                                 name=f"request ({tenant})" if multi else "request",
                                 marker={"color": REQUEST_PALETTE[(i + 3) % len(REQUEST_PALETTE)], "size": 9,
                                         "symbol": "diamond", "line": {"width": 1, "color": "white"}},
                                 customdata=d["request"],
                                 hovertemplate="%{customdata}<br>measured %{x:.4~g} ms · simulated "
                                               "%{y:.4~g} ms<extra></extra>"), row=1, col=2)
    both = np.concatenate([t["measured"].to_numpy(dtype=float), t["simulated"].to_numpy(dtype=float)])
    if len(both):
        _diagonal(0.0, float(np.nanmax(both)) * 1.05, 1, 2, fig, False)
    themed(fig).update_layout(height=400, font=FONT, margin={"l": 60, "r": 20, "t": 70, "b": 50},
                      legend={**LEGEND, "y": -0.18, "yanchor": "top"})
    fig.update_annotations(font={"size": 13, "color": "#374151"})
    fig.update_xaxes(title_text="measured (ms)", rangemode="tozero", zeroline=False)
    fig.update_yaxes(title_text="cost model (ms)", rangemode="tozero", zeroline=False, row=1, col=1)
    fig.update_yaxes(title_text="simulator (ms)", rangemode="tozero", zeroline=False, row=1, col=2)
    return fig
