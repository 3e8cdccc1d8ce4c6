"""Figures for the Disaggregation page: pure functions from sim.lessons.disagg's tables to Plotly figures.

- growth_figure: KV-cache size (left) and prefill vs transfer time per link (right) as the
  prompt grows, log-log, crossovers marked.
- ratio_figure: transfer time as a share of prefill time per link, with the 100% line.
- breakeven_figure: that share against the link's speed, the break-even speed marked.
- ttft_figure: prefill + transfer for each link as stacked bars, animated over prompt lengths
  (frames carry a few numbers each).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import CONTROLS_MARGIN_B, FONT, play_controls, themed

PREFILL = "#111827"
OVERHEAD = "#9CA3AF"
LINK_COLOURS = {"nvlink-h100": "#2E9E5B", "infiniband-ndr": "#4E79A7", "ethernet-100g": "#F28E2B",
                "ethernet-25g": "#E15759", "ethernet-10g": "#9C2A2A", "pcie4-x16": "#B07AA1",
                "pcie5-x16": "#7B4F9D"}
OTHER_COLOURS = ["#59A14F", "#76B7B2", "#EDC948", "#FF9DA7", "#9C755F"]


def link_colour(link: str, i: int = 0) -> str:
    return LINK_COLOURS.get(link, OTHER_COLOURS[i % len(OTHER_COLOURS)])


def _legend_top() -> dict:
    return {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "bgcolor": "rgba(0,0,0,0)"}


def _fmt_ms(v: float) -> str:
    return f"{v:,.2f} ms" if v < 100 else f"{v:,.0f} ms"


def growth_figure(df: pd.DataFrame, labels: dict[str, str], cross: pd.DataFrame | None = None,
                  marks=()) -> go.Figure:
    """Left: KV size (MiB) vs prompt. Right: prefill time and each link's transfer time (ms) vs
    prompt, log-log; a ◆ where a link's transfer equals the prefill (sim.lessons.disagg.crossover_prompt,
    when finite and inside the range). `marks`: prompt lengths to draw dotted guides at.
    Traces: [KV size, prefill, one per link (name = label), crossover markers...]."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09,
                        subplot_titles=("KV cache of one prompt", "Prefill compute vs KV transfer"))
    one = df.drop_duplicates("prompt")
    p = one["prompt"].to_numpy()
    fig.add_trace(go.Scatter(x=p, y=one["kv_mib"].to_numpy(), mode="lines", name="KV cache size",
                             line={"color": "#6B7280", "width": 2.5}, showlegend=False,
                             hovertemplate="prompt %{x:,} tokens<br>KV %{y:,.0f} MiB<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=p, y=one["prefill_ms"].to_numpy(), mode="lines", name="prefill compute",
                             line={"color": PREFILL, "width": 3},
                             hovertemplate="prompt %{x:,} tokens<br>prefill %{y:,.1f} ms<extra></extra>"), row=1, col=2)
    for i, (link, g) in enumerate(df.groupby("link", sort=False)):
        fig.add_trace(go.Scatter(x=g["prompt"].to_numpy(), y=g["transfer_ms"].to_numpy(), mode="lines",
                                 name=labels.get(link, link), line={"color": link_colour(link, i), "width": 2},
                                 customdata=np.stack([g["ratio"].to_numpy() * 100], axis=-1),
                                 hovertemplate=(f"{labels.get(link, link)}<br>prompt %{{x:,}} tokens<br>transfer "
                                                "%{y:,.2f} ms (%{customdata[0]:.1f}% of prefill)<extra></extra>")),
                      row=1, col=2)
    lo, hi = float(p.min()), float(p.max())
    if cross is not None:
        for i, row in enumerate(cross.itertuples()):
            x = row.crossover_prompt
            if not (lo <= x <= hi) or not math.isfinite(x):
                continue
            g = df[df["link"] == row.link]
            y = float(np.interp(x, g["prompt"], g["transfer_ms"]))
            fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", name=f"crossover, {labels.get(row.link, row.link)}",
                                     showlegend=False, marker={"symbol": "diamond", "size": 12, "color": "#C0392B",
                                                               "line": {"width": 1.5, "color": "white"}},
                                     hovertemplate=(f"{labels.get(row.link, row.link)}: transfer = prefill at "
                                                    f"{x:,.0f} tokens<extra></extra>")), row=1, col=2)
    for m in marks:
        for c in (1, 2):
            fig.add_vline(x=m, line={"color": "#CBD5E1", "width": 1, "dash": "dot"}, row=1, col=c)
    fig.update_xaxes(type="log", title_text="prompt length (tokens)", showgrid=True, gridcolor="#EEF0F3", dtick=1)
    fig.update_yaxes(type="log", showgrid=True, gridcolor="#EEF0F3", dtick=1)
    fig.update_yaxes(title_text="MiB", row=1, col=1)
    fig.update_yaxes(title_text="milliseconds", row=1, col=2)
    themed(fig).update_layout(height=470, font=FONT,
                      legend={"orientation": "h", "y": -0.2, "yanchor": "top", "x": 0, "bgcolor": "rgba(0,0,0,0)"},
                      margin={"l": 76, "r": 20, "t": 40, "b": 144}, hoverlabel={"font_size": 12})
    fig.update_annotations(yshift=4)
    return fig


def ratio_figure(df: pd.DataFrame, labels: dict[str, str], cross: pd.DataFrame | None = None) -> go.Figure:
    """Transfer time / prefill time (%) vs prompt per link, log-log, a dashed 100% line
    ("transfer = prefill") and ◆ crossovers. Traces: one per link, then the 100% line."""
    fig = go.Figure()
    for i, (link, g) in enumerate(df.groupby("link", sort=False)):
        fig.add_trace(go.Scatter(x=g["prompt"].to_numpy(), y=100 * g["ratio"].to_numpy(), mode="lines",
                                 name=labels.get(link, link), line={"color": link_colour(link, i), "width": 2.5},
                                 hovertemplate=(f"{labels.get(link, link)}<br>prompt %{{x:,}} tokens<br>transfer = "
                                                "%{y:.1f}% of prefill<extra></extra>")))
    p = df["prompt"].to_numpy()
    fig.add_trace(go.Scatter(x=[p.min(), p.max()], y=[100, 100], mode="lines", name="transfer = prefill",
                             line={"color": "#C0392B", "dash": "dash", "width": 1.5}, hoverinfo="skip"))
    if cross is not None:
        for row in cross.itertuples():
            x = row.crossover_prompt
            if math.isfinite(x) and p.min() <= x <= p.max():
                fig.add_trace(go.Scatter(x=[x], y=[100], mode="markers", showlegend=False,
                                         marker={"symbol": "diamond", "size": 12, "color": "#C0392B",
                                                 "line": {"width": 1.5, "color": "white"}},
                                         hovertemplate=f"{labels.get(row.link, row.link)}: crossover at "
                                                       f"{x:,.0f} tokens<extra></extra>"))
    top = max(150.0, float(100 * df["ratio"].max()) * 1.3) if len(df) else 150.0
    bottom = min(0.5, float(100 * df["ratio"].min()) / 1.5) if len(df) else 0.5
    # the links' colours are the growth figure's legend; the 100% line is labelled in place
    fig.add_annotation(x=0.01, y=2, xref="x domain", yref="y", xanchor="left", yanchor="top", showarrow=False,
                       text="transfer = prefill", font={"size": 12, "color": "#C0392B"})
    themed(fig).update_layout(height=360, font=FONT, showlegend=False,
                      margin={"l": 68, "r": 20, "t": 30, "b": 59}, hoverlabel={"font_size": 12})
    fig.update_xaxes(type="log", title_text="prompt length (tokens)", gridcolor="#EEF0F3", dtick=1)
    fig.update_yaxes(type="log", title_text="transfer as % of prefill", gridcolor="#EEF0F3", dtick=1,
                     range=[math.log10(bottom), math.log10(top)])
    return fig


def breakeven_figure(curve: pd.DataFrame, breakeven_gb_s: float, links: dict[str, tuple[str, float, float]],
                     prompt: int) -> go.Figure:
    """Transfer / prefill (%) against link speed (GB/s, log) for one prompt length (from
    sim.lessons.disagg.ratio_vs_bandwidth), the break-even speed as a dotted line (NaN: none) and each
    chosen link as a marker. links: key -> (label, GB/s, its transfer / prefill ratio).
    Traces: the curve, one marker per link."""
    g = curve[curve["prompt"] == prompt]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=g["gb_per_s"].to_numpy(), y=100 * g["ratio"].to_numpy(), mode="lines",
                             name=f"{prompt:,}-token prompt", line={"color": "#374151", "width": 2.5},
                             hovertemplate="%{x:.3g} GB/s: transfer = %{y:.3g}% of prefill<extra></extra>"))
    bw = g["gb_per_s"].to_numpy()
    ratio = g["ratio"].to_numpy()
    for i, (key, (label, gbs, r)) in enumerate(links.items()):
        fig.add_trace(go.Scatter(x=[gbs], y=[100 * r], mode="markers+text", name=label, text=[label.split(" (")[0]],
                                 textposition="middle right", textfont={"size": 11},
                                 marker={"size": 11, "color": link_colour(key, i), "line": {"width": 1, "color": "white"}},
                                 hovertemplate=f"{label}<br>transfer = %{{y:.3g}}% of prefill<extra></extra>",
                                 showlegend=False))
    fig.add_hline(y=100, line={"color": "#C0392B", "dash": "dash", "width": 1.5})
    y_lo, y_hi = float(100 * ratio.min()), float(100 * ratio.max())
    if math.isfinite(breakeven_gb_s):
        fig.add_vline(x=breakeven_gb_s, line={"color": "#C0392B", "dash": "dot", "width": 1.5})
        # annotations on a log axis take log10 coordinates
        fig.add_annotation(x=math.log10(breakeven_gb_s), y=1, xref="x", yref="y domain", xanchor="left",
                           yanchor="top", showarrow=False, font={"size": 12, "color": "#C0392B"},
                           text=f" break-even<br> {breakeven_gb_s:.3g} GB/s<br> ({8 * breakeven_gb_s:.3g} Gb/s)",
                           align="left")
    themed(fig).update_layout(height=360, font=FONT, showlegend=False,
                      margin={"l": 76, "r": 20, "t": 40, "b": 59}, hoverlabel={"font_size": 12})
    fig.update_xaxes(type="log", title_text="link speed, one direction (GB/s)", gridcolor="#EEF0F3", dtick=1,
                     range=[math.log10(bw.min()), math.log10(bw.max()) + 0.6])
    fig.update_yaxes(type="log", title_text="transfer as % of prefill", gridcolor="#EEF0F3", dtick=1,
                     range=[math.log10(max(y_lo, 1e-3)) - 0.2, math.log10(y_hi) + 0.2])
    return fig


def ttft_figure(df: pd.DataFrame, labels: dict[str, str], overhead_ms: float = 0.0, start: int | None = None,
                frame_ms: int = 250) -> go.Figure:
    """Time to first token on a decode GPU for each link: prefill, then the KV transfer (and a
    fixed overhead if any), stacked horizontal bars; frames step through the prompt lengths of
    `df` (each frame: the bar lengths and the axis range). Traces: prefill, transfer[, overhead].
    The figure opens on `start` (default: the first prompt length)."""
    prompts = sorted(df["prompt"].unique())
    links = list(dict.fromkeys(df["link"]))
    names = [labels.get(k, k).split(" (")[0] for k in links]
    start = start if start in prompts else prompts[0]

    def bars(p: int) -> tuple[list[dict], float]:
        g = df[df["prompt"] == p].set_index("link").reindex(links)
        pre = g["prefill_ms"].to_numpy()
        tr = g["transfer_ms"].to_numpy() - overhead_ms
        ov = np.full(len(links), overhead_ms)
        total = pre + tr + ov
        text = [f"{_fmt_ms(t)} (+{100 * (x + o) / pf:.1f}%)" for t, x, o, pf in zip(total, tr, ov, pre)]
        data = [{"x": pre, "customdata": np.stack([pre], axis=-1)},
                {"x": tr, "text": text, "customdata": np.stack([tr, 100 * tr / pre], axis=-1)}]
        if overhead_ms:
            data.append({"x": ov})
        return data, float(total.max()) * 1.35

    first, x_max = bars(start)
    fig = go.Figure()
    fig.add_trace(go.Bar(y=names, orientation="h", name="prefill compute", marker_color=PREFILL, **first[0],
                         hovertemplate="%{y}: prefill %{customdata[0]:,.1f} ms<extra></extra>"))
    fig.add_trace(go.Bar(y=names, orientation="h", name="KV transfer (colour = link)", marker_color=[link_colour(k, i) for i, k in
                                                                                     enumerate(links)],
                         textposition="outside", cliponaxis=False, textfont={"size": 12}, **first[1],
                         hovertemplate="%{y}: transfer %{customdata[0]:,.2f} ms (%{customdata[1]:.1f}% of "
                                       "prefill)<extra></extra>"))
    if overhead_ms:
        fig.add_trace(go.Bar(y=names, orientation="h", name="fixed overhead", marker_color=OVERHEAD, **first[2],
                             hovertemplate="%{y}: overhead %{x:,.2f} ms<extra></extra>"))
    frames = []
    for p in prompts:
        d, xm = bars(p)
        frames.append({"name": str(int(p)), "data": d, "traces": list(range(len(d))),
                       "layout": {"xaxis": {"range": [0, xm]}}})
    ctl = play_controls(prompts, frame_ms)
    ctl["sliders"][0]["currentvalue"]["prefix"] = "prompt "
    ctl["sliders"][0]["currentvalue"]["suffix"] = " tokens"
    ctl["sliders"][0]["active"] = prompts.index(start)
    for b in ctl["updatemenus"][0]["buttons"]:  # bars change data: let plotly redraw them
        b["args"][1]["frame"]["redraw"] = True
    for step in ctl["sliders"][0]["steps"]:
        step["args"][1]["frame"]["redraw"] = True
        step["label"] = f"{int(step['label']):,}"
    fig.frames = [go.Frame(**f) for f in frames]
    themed(fig).update_layout(barmode="stack", height=170 + 48 * len(links), font=FONT,
                      legend=_legend_top(), margin={"l": 178, "r": 30, "t": 50, "b": CONTROLS_MARGIN_B},
                      xaxis={"range": [0, x_max], "title": {"text": "time to first token on the decode side (ms)"},
                             "gridcolor": "#EEF0F3"},
                      yaxis={"autorange": "reversed"}, hoverlabel={"font_size": 12},
                      meta={"prompts": [int(p) for p in prompts], "start": int(start)}, **ctl)
    return fig
