"""Figures for the "Prefill interference and chunked prefill" page (lesson Examples 4 and 5).

- timeline_figure: a run of decoders plus one long prompt on a time axis. Top: one lane per
  request, a bar per step it took part in (the prompt's chunks labelled), a dot where a token
  comes out. Bottom: the decoders' inter-token gaps, one bar per token spanning the wait for
  it, so a long step stands out as a tall, wide bar. Frames (one per step) move a veil and a
  cursor (two layout shapes), never the data.
- budget_figure: over token budgets, the long request's first token and the decoders' worst
  gap, with the lesson's budgets, the chosen budget and the sweet spot marked.

Inputs: a Trace of sim.lessons.sweeps.interference_case's workload and its horizon;
sim.lessons.sweeps.budget_sweep's dict.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sim.trace import Trace

from .animate import assemble
from .common import CONTROLS_MARGIN_B, FONT, KIND_COLOURS, TEMPLATE, pick_frames, play_controls, themed

LONG = "long"
STALL, LONGER, NORMAL = "#C0392B", "#E8A33D", "#9CA3AF"  # waits: 1.5x the usual or more, a little longer, usual
SWEET, CHOSEN, LESSON = "#D4A017", "#2563EB", "#6B7280"


def _veil(x0: float, x_end: float) -> list[dict]:
    """A veil over the time not yet played and a cursor at x0, across both rows."""
    return [
        {"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x_end, "y0": 0, "y1": 1,
         "fillcolor": "rgba(255,255,255,0.82)", "line": {"width": 0}, "layer": "above"},
        {"type": "line", "xref": "x", "yref": "paper", "x0": x0, "x1": x0, "y0": 0, "y1": 1,
         "line": {"color": "#111827", "width": 2}, "layer": "above"},
    ]


def timeline_figure(trace: Trace, horizon: int, max_lanes: int = 8, max_frames: int = 200,
                    frame_ms: int | None = None) -> go.Figure:
    """The run up to step `horizon`: request lanes (axes x/y) above the decoders' gaps (x2/y2).

    Traces: "prompt chunk" and "decode" bars (customdata: request, tenant, kind, tokens, step),
    "token" markers, "first token" (the long request's), "gap" bars (y = the wait for each of
    d0's tokens). layout.meta: worst_gap, usual_gap, horizon, frames, lanes.
    """
    unit = trace.time_unit
    s = trace.steps[trace.steps["step"].to_numpy() <= horizon]
    start = dict(zip(s["step"].astype(int), s["start"].astype(float)))
    end = dict(zip(s["step"].astype(int), s["end"].astype(float)))
    b = trace.batch[trace.batch["step"].to_numpy() <= horizon]
    tenants = trace.requests.set_index("request")["tenant"]
    decoders = [r for r in trace.requests["request"].astype(str) if r != LONG]
    shown = decoders[:max_lanes]
    lanes = [LONG] + shown
    lane_label = {LONG: "long prompt", **{d: d for d in shown}}
    b = b[b["request"].isin(lanes).to_numpy()]
    steps_b = b["step"].to_numpy(dtype=np.int64)
    x0 = np.array([start[int(v)] for v in steps_b])
    x1 = np.array([end[int(v)] for v in steps_b])
    req = b["request"].astype(str).to_numpy()
    kind = b["kind"].astype(str).to_numpy()
    tok = b["tokens"].to_numpy(dtype=np.int64)
    tenant = tenants.reindex(req).astype(str).to_numpy()
    y = np.array([lane_label[r] for r in req], dtype=object)
    times = [f"{a:.6g} → {e:.6g} {unit}" for a, e in zip(x0, x1)]
    custom = np.stack([req, tenant, kind, tok.astype(str), steps_b.astype(str), np.array(times, dtype=object)],
                      axis=-1) if len(req) else None
    hover = ("%{customdata[0]} · tenant %{customdata[1]}<br>%{customdata[2]}, %{customdata[3]} tokens in step "
             "%{customdata[4]}<br>%{customdata[5]}<extra></extra>")
    data: list = []
    for name, mask, colour in (("prompt chunk", req == LONG, KIND_COLOURS["prefill"]),
                               ("decode", req != LONG, KIND_COLOURS["decode"])):
        if not mask.any():
            continue
        data.append(go.Bar(
            name=name, orientation="h", base=x0[mask], x=(x1 - x0)[mask], y=y[mask], marker_color=colour,
            marker_line={"width": 1, "color": "white"}, customdata=custom[mask], hovertemplate=hover,
            text=[f"chunk {n:,}" for n in tok[mask]] if name == "prompt chunk" else None,
            textposition="inside", insidetextanchor="middle", textfont={"color": "white", "size": 12},
            xaxis="x", yaxis="y"))
    sampled = b["sampled"].to_numpy(dtype=bool)
    dec = sampled & (req != LONG)
    data.append(go.Scatter(name="token out", x=x1[dec], y=y[dec], mode="markers", xaxis="x", yaxis="y",
                           marker={"size": 6, "color": "#111827"}, hoverinfo="skip"))
    first = sampled & (req == LONG)
    if first.any():
        data.append(go.Scatter(name="long request's first token", x=x1[first], y=y[first], mode="markers",
                               xaxis="x", yaxis="y", marker={"size": 16, "symbol": "star", "color": SWEET,
                                                             "line": {"width": 1, "color": "#111827"}},
                               hovertemplate=f"first token of the long request at %{{x:.4~g}} {unit}<extra></extra>"))

    # decoder d0's gaps: one bar per token, spanning the wait for it
    d0 = b[(b["request"] == (shown[0] if shown else "")).to_numpy() & sampled]
    t_tok = np.array([end[int(v)] for v in d0["step"]])
    prev = np.concatenate([[0.0], t_tok[:-1]])
    gaps = t_tok - prev
    usual = float(gaps.min()) if len(gaps) else 0.0
    worst = float(gaps.max()) if len(gaps) else 0.0
    tokens_in = s.set_index("step")["num_tokens"].reindex(d0["step"]).to_numpy()
    colour = np.where(gaps >= usual * 1.5, STALL, np.where(gaps > usual * 1.001, LONGER, NORMAL))
    data.append(go.Bar(
        name="decoders' wait for a token", x=(prev + t_tok) / 2, y=gaps, width=gaps, xaxis="x2", yaxis="y2",
        marker_color=colour.tolist(), marker_line={"width": 1, "color": "white"},
        customdata=np.stack([d0["step"].astype(str).to_numpy(), tokens_in.astype(np.int64).astype(str),
                             np.array([f"{t:.6g}" for t in t_tok], dtype=object)], axis=-1) if len(gaps) else None,
        hovertemplate=f"token at %{{customdata[2]}} {unit}, after a wait of %{{y:.4~g}} {unit}<br>"
                      "step %{customdata[0]}: %{customdata[1]} tokens<extra></extra>"))

    x_end = float(s["end"].max()) if len(s) else 1.0
    fsteps = pick_frames(s["step"].to_numpy(dtype=np.int64), max_frames)
    frames = [{"name": str(int(v)), "layout": {"shapes": _veil(end[int(v)], x_end * 1.001)}} for v in fsteps]
    shapes = frames[-1]["layout"]["shapes"] if frames else []
    ann = [{"text": f"<b>Requests</b> (one bar per step they are in)", "xref": "paper", "yref": "paper", "x": 0,
            "y": 1.0, "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": {"size": 14}},
           {"text": f"<b>Decoders: wait for each token</b> ({unit})", "xref": "paper", "yref": "paper", "x": 0,
            "y": 0.34, "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": {"size": 14}}]
    if len(gaps):
        ann.append({"text": f"usual gap {usual:.4g}", "xref": "paper", "yref": "y2", "x": 1, "y": usual,
                    "xanchor": "right", "yanchor": "bottom", "showarrow": False,
                    "font": {"size": 11, "color": "#374151"}})
        i = int(np.argmax(gaps))
        if worst > usual * 1.001:
            ann.append({"text": f"worst gap {worst:.4g}", "xref": "x2", "yref": "y2", "x": float(t_tok[i]),
                        "y": worst, "xanchor": "left", "yanchor": "top", "showarrow": False, "xshift": 4,
                        "font": {"size": 12, "color": STALL}})
    n_lanes = len(lanes)
    layout = {
        "height": int(min(760, 430 + 28 * n_lanes)), "template": TEMPLATE, "font": FONT, "barmode": "overlay",
        "hoverlabel": {"font": {"size": 12}}, "margin": {"l": 96, "r": 27, "t": 74, "b": CONTROLS_MARGIN_B},
        "legend": {"orientation": "h", "y": 1.07, "yanchor": "bottom", "x": 0, "bgcolor": "rgba(0,0,0,0)"},
        "uniformtext": {"mode": "hide", "minsize": 10},
        "xaxis": {"anchor": "y", "range": [0, x_end * 1.001], "matches": "x2", "showgrid": True,
                  "gridcolor": "#F3F4F6", "zeroline": False},
        "xaxis2": {"anchor": "y2", "range": [0, x_end * 1.001], "showgrid": True, "gridcolor": "#F3F4F6",
                   "zeroline": False, "title": {"text": f"time ({unit})"}},
        "yaxis": {"domain": [0.44, 0.97], "anchor": "x", "type": "category", "autorange": "reversed",
                  "categoryorder": "array", "categoryarray": [lane_label[r] for r in lanes], "showgrid": False},
        "yaxis2": {"domain": [0, 0.32], "anchor": "x2", "range": [0, max(worst * 1.12, usual * 2.2, 1e-9)],
                   "title": {"text": "gap"},
                   "showgrid": True, "gridcolor": "#F3F4F6"},
        "annotations": ann, "shapes": shapes,
        **play_controls(fsteps, frame_ms),
        "meta": {"worst_gap": worst, "usual_gap": usual, "horizon": int(horizon), "frames": len(frames),
                 "lanes": [lane_label[r] for r in lanes], "decoders": len(decoders)},
    }
    if len(gaps):
        layout["shapes"] = shapes + [{"type": "line", "xref": "x2 domain", "yref": "y2", "x0": 0, "x1": 1,
                                      "y0": usual, "y1": usual, "line": {"color": "#6B7280", "dash": "dash",
                                                                         "width": 1.5}}]
        for f in frames:  # frames replace layout.shapes: keep the baseline in each
            f["layout"]["shapes"] = f["layout"]["shapes"] + layout["shapes"][len(shapes):]
    return assemble(data, layout, frames)


def budget_figure(sweep: dict, chosen: int | None = None, lesson_budgets=(4004, 2048, 512, 256)) -> go.Figure:
    """The long request's first token (top, axes x/y) and the decoders' worst gap (bottom,
    x2/y2) over token budgets (log axis). Traces: "first token", "worst gap", then markers
    for the lesson's budgets, the sweet spot and the chosen budget. layout.meta: sweet_spot
    (its row), best_gap, tolerance, chosen."""
    rows = pd.DataFrame(sweep["rows"])
    unit = sweep["time_unit"]
    sweet = sweep["sweet_spot"]
    x = rows["budget"].to_numpy()
    custom = np.stack([rows["steps"].to_numpy(), rows["first_token"].to_numpy(), rows["worst_gap"].to_numpy()], axis=-1)
    hv = ("budget %{x:,}: prompt in %{customdata[0]} steps<br>first token %{customdata[1]:.4~g} " + unit
          + "<br>worst decoder gap %{customdata[2]:.4~g} " + unit + "<extra></extra>")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=rows["first_token"], name="long request's first token", mode="lines+markers",
                             marker={"size": 5}, line={"color": KIND_COLOURS["prefill"], "width": 2.5},
                             customdata=custom, hovertemplate=hv, xaxis="x", yaxis="y"))
    fig.add_trace(go.Scatter(x=x, y=rows["worst_gap"], name="decoders' worst gap", mode="lines+markers",
                             marker={"size": 5}, line={"color": STALL, "width": 2.5}, customdata=custom,
                             hovertemplate=hv, xaxis="x2", yaxis="y2"))
    les = rows[rows["budget"].isin(lesson_budgets).to_numpy()]
    for col, axes in (("first_token", ("x", "y")), ("worst_gap", ("x2", "y2"))):
        fig.add_trace(go.Scatter(x=les["budget"], y=les[col], mode="markers+text", name="the lesson's budgets",
                                 legendgroup="lesson", showlegend=col == "first_token",
                                 text=[f"{v:.2f}" for v in les[col]], textposition="top center",
                                 textfont={"size": 11, "color": "#374151"},
                                 marker={"symbol": "diamond", "size": 10, "color": LESSON},
                                 hoverinfo="skip", xaxis=axes[0], yaxis=axes[1]))
    for col, axes in (("first_token", ("x", "y")), ("worst_gap", ("x2", "y2"))):
        fig.add_trace(go.Scatter(x=[sweet["budget"]], y=[sweet[col]], mode="markers", name="sweet spot",
                                 legendgroup="sweet", showlegend=col == "first_token",
                                 marker={"symbol": "star", "size": 18, "color": SWEET,
                                         "line": {"width": 1, "color": "#111827"}},
                                 hovertemplate=f"sweet spot: budget {sweet['budget']:,}<br>first token "
                                               f"{sweet['first_token']:.4g} {unit}, worst gap {sweet['worst_gap']:.4g} "
                                               f"{unit}<extra></extra>", xaxis=axes[0], yaxis=axes[1]))
    shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": sweet["budget"], "x1": sweet["budget"], "y0": 0,
               "y1": 1, "line": {"color": SWEET, "width": 2, "dash": "dot"}, "layer": "below"},
              {"type": "line", "xref": "x2 domain", "yref": "y2", "x0": 0, "x1": 1, "y0": sweep["best_gap"],
               "y1": sweep["best_gap"], "line": {"color": "#6B7280", "width": 1, "dash": "dash"}}]
    ann = [{"text": f"<b>sweet spot: {sweet['budget']:,} tokens</b>", "xref": "x", "yref": "paper",
            "x": np.log10(sweet["budget"]), "y": 1.0, "xanchor": "center", "yanchor": "bottom", "showarrow": False,
            "font": {"size": 12, "color": "#8A6A00"}},
           {"text": f"<b>Long request: time to first token</b> ({unit})", "xref": "paper", "yref": "paper", "x": 0,
            "y": 1.0, "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": {"size": 14}},
           {"text": f"<b>Decoders: worst gap between two tokens</b> ({unit})", "xref": "paper", "yref": "paper",
            "x": 0, "y": 0.45, "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": {"size": 14}}]
    if chosen is not None:
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": chosen, "x1": chosen, "y0": 0, "y1": 1,
                       "line": {"color": CHOSEN, "width": 2, "dash": "dash"}})
        ann.append({"text": f"your budget {chosen:,}", "xref": "x", "yref": "paper", "x": np.log10(chosen), "y": 0.5,
                    "xanchor": "left", "yanchor": "middle", "showarrow": False, "xshift": 4,
                    "font": {"size": 11, "color": CHOSEN}})
    ticks = [2 ** k for k in range(1, 20) if x.min() / 1.5 <= 2 ** k <= x.max() * 1.5]
    xcommon = {"type": "log", "showgrid": True, "gridcolor": "#F3F4F6", "zeroline": False, "tickmode": "array",
               "tickvals": ticks, "ticktext": [f"{t:,}" for t in ticks]}
    # first tokens of tiny budgets dwarf the interesting range: show up to 3x the fastest, say what is cut off
    ft = rows["first_token"].to_numpy(dtype=float)
    top = min(float(ft.max()), 3 * float(ft.min())) * 1.12
    if ft.max() > top:
        ann.append({"text": f"↑ smaller budgets: up to {ft.max():,.4g} {unit}", "xref": "paper", "yref": "y domain",
                    "x": 0.01, "y": 0.98, "xanchor": "left", "yanchor": "top", "showarrow": False,
                    "font": {"size": 11, "color": "#374151"}})
    themed(fig).update_layout(
        height=620, font=FONT, hoverlabel={"font_size": 12}, hovermode="closest",
        margin={"l": 70, "r": 20, "t": 93, "b": 60},
        legend={"orientation": "h", "y": 1.1, "yanchor": "bottom", "x": 0, "bgcolor": "rgba(0,0,0,0)"},
        xaxis={**xcommon, "anchor": "y", "matches": "x2", "showticklabels": False},
        xaxis2={**xcommon, "anchor": "y2", "title": {"text": "token budget per step (log scale)"}},
        yaxis={"domain": [0.55, 0.98], "anchor": "x", "range": [0, top], "title": {"text": unit}},
        yaxis2={"domain": [0, 0.43], "anchor": "x2", "rangemode": "tozero", "title": {"text": unit}},
        shapes=shapes, annotations=ann,
        meta={"sweet_spot": sweet, "best_gap": sweep["best_gap"], "tolerance": sweep["tolerance"], "chosen": chosen})
    return fig
