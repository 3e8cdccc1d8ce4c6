"""Figures for the "Static vs continuous batching" page (lesson Examples 2 and 3).

- batching_figure: the static run's slot lanes above the continuous run's, one step axis and
  one set of frames (figures.compare.lockstep_figure: ▶ Play advances both together), with
  padding slot-steps faded and a marker where each request's result returns.
- finish_figure: the step at which each request's result returns, both ways, with the means.

Inputs: the two Traces and sim.lessons.sweeps.batching_figures of each.
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from sim.trace import Trace

from .compare import lockstep_figure
from .common import FONT, themed

STATIC, CONTINUOUS, RETURN = "#8C9BAB", "#59A14F", "#111827"


def _returns(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(finish step, slot at that step, request ids) of every finished request."""
    b = trace.batch[["step", "request", "slot"]]
    last = b.sort_values("step", kind="stable").groupby("request", sort=False).last()
    r = trace.requests
    r = r[r["finish_step"].notna().to_numpy()]
    ids = r["request"].astype(str).to_numpy()
    slot = last.reindex(ids)["slot"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    return r["finish_step"].to_numpy(dtype=float), slot, ids


def batching_figure(static: Trace, continuous: Trace, titles: tuple[str, str] = ("Static batching",
                                                                                 "Continuous batching"),
                    max_frames: int = 200, frame_ms: int | None = None) -> go.Figure:
    """Static lanes (axes x/y) above continuous lanes (x2/y2), animated together.

    Adds one trace per run named "result returned" (x = finish step, y = the slot the request
    held, customdata = request id). layout.meta as lockstep_figure's.
    """
    fig = lockstep_figure(static, continuous, titles, max_frames=max_frames, frame_ms=frame_ms)
    fig.update_layout(yaxis_title_text="static: slot", yaxis2_title_text="continuous: slot")
    arrival = {str(k): int(v) for k, v in zip(static.requests["request"], static.requests["arrival_step"])}
    tokens = {str(k): int(v) for k, v in zip(static.requests["request"], static.requests["max_tokens"])} \
        if "max_tokens" in static.requests else {}
    for i, (tr, axes) in enumerate(((static, ("x", "y")), (continuous, ("x2", "y2")))):
        x, y, ids = _returns(tr)
        text = [f"{rid}: result returned at step {int(f)}" + (f" · {tokens[rid]} tokens" if rid in tokens else "")
                + f" · arrived before step {arrival.get(rid, 0) + 1}" for rid, f in zip(ids, x)]
        fig.add_trace(go.Scatter(
            x=x + 0.5, y=y, mode="markers", name="result returned", legendgroup="returned", showlegend=i == 0,
            xaxis=axes[0], yaxis=axes[1], customdata=ids, text=text, hovertemplate="%{text}<extra></extra>",
            marker={"symbol": "line-ns", "size": 22, "line": {"width": 4, "color": RETURN}}))
    return fig


def finish_figure(ids: list[str], tokens: list[int], static_finish: list[int], continuous_finish: list[int],
                  static_mean: float, continuous_mean: float) -> go.Figure:
    """Grouped bars per request: the step at which its result returned, static vs continuous,
    with a dashed line at each mean. Trace 0 static, trace 1 continuous."""
    labels = [f"{rid} ({n} tok)" for rid, n in zip(ids, tokens)]
    fig = go.Figure()
    for name, ys, colour in (("static", static_finish, STATIC), ("continuous", continuous_finish, CONTINUOUS)):
        fig.add_trace(go.Bar(x=labels, y=ys, name=f"{name} batching", marker_color=colour,
                             customdata=np.stack([ids, tokens], axis=-1) if ids else None,
                             hovertemplate="%{customdata[0]} (%{customdata[1]} tokens)<br>" + name
                                           + ": returned at step %{y}<extra></extra>"))
    for name, mean, colour, pos in (("static", static_mean, STATIC, "top left"),
                                    ("continuous", continuous_mean, CONTINUOUS, "bottom left")):
        fig.add_hline(y=mean, line={"color": colour, "dash": "dash", "width": 2},
                      annotation={"text": f"{name} mean {mean:.6g}", "font": {"color": "#374151", "size": 12}},
                      annotation_position=pos)
    themed(fig).update_layout(height=330, font=FONT, barmode="group", bargap=0.25,
                      margin={"l": 60, "r": 20, "t": 51, "b": 59}, hoverlabel={"font_size": 12},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
                      yaxis={"title": {"text": "step the result returns"}, "rangemode": "tozero"},
                      xaxis={"title": {"text": "request (tokens it generates)"}})
    return fig
